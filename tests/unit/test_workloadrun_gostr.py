from __future__ import annotations

import pytest

from nvcre.render.workloadrun.gostr import go_quote


@pytest.mark.parametrize(
    ("raw", "quoted"),
    [
        ("timeout", '"timeout"'),
        ('-o "x"', '"-o \\"x\\""'),
        ("a\\b", '"a\\\\b"'),
        ("line\nnext", '"line\\nnext"'),
        ("tab\t", '"tab\\t"'),
        ("\x01", '"\\x01"'),
        ("$PATH:é", '"$PATH:é"'),
    ],
)
def test_go_quote(raw: str, quoted: str) -> None:
    assert go_quote(raw) == quoted
