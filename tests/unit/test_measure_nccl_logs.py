"""nvcre's nccl-tests table reader over the real logs this project collected (tests/data/nccl;
tests/data/nccl/README.md gives each file's source and traits): every figure the log states.

Each figure was checked by hand against the log text; they are listed in
tests/data/nccl/expected.yaml. See test_measure_nccl_corpus.py for the shape of a case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nvcre.testing.nccl_cases import check, load_cases

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"

CASES = load_cases(DATA / "expected.yaml")


def test_every_collected_log_is_a_case() -> None:
    assert sorted(p.name for p in DATA.glob("*.log")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_collected_log(name: str) -> None:
    check(DATA / name, CASES[name])
