"""The CLI's file-reading commands on arbitrary input (hypothesis, a few seconds on every run).

The long, coverage-guided runs are hack/fuzz/cli.py (atheris). Here the same property on every CI
run: whatever the bytes, as a file or on stdin, each command ends cleanly, exit status 0, 1 or 2,
and status 2 is one ``Error:`` line naming the input.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvcre.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [p.read_bytes() for p in sorted(ROOT.glob("examples/*/*.yaml"))]
NCCL_LOG = ROOT.parent / "shared" / "corpus" / "nccl" / "cre-real-a100-allreduce-2node-pdt-timestamps.log"
COMMANDS = [
    ("validate",),
    ("workloadrun", "render", "--platform", "aws", "--gpu-arch", "h100"),
    ("workflow", "render", "--gpu-arch", "h100"),
    ("analyze", "nccl", str(NCCL_LOG), "--profile"),
    ("analyze", "nccl"),
    ("analyze", "goodput"),
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """An example manifest with a few bytes changed, cut or inserted."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        match draw(st.sampled_from(["replace", "insert", "cut"])):
            case "replace" if at < len(data):
                data[at] = draw(st.integers(0, 255))
            case "insert":
                data[at:at] = draw(st.binary(min_size=1, max_size=8))
            case _:
                del data[at:]
    return bytes(data)


CONTENT = st.one_of(st.binary(max_size=512), mutated(), st.text(max_size=300).map(str.encode))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.sampled_from(COMMANDS), content=CONTENT, stdin=st.booleans())
def test_any_input_ends_cleanly(
    tmp_path_factory: pytest.TempPathFactory, command: tuple[str, ...], content: bytes, stdin: bool
) -> None:
    if stdin:
        source = "<stdin>"
        result = CliRunner().invoke(cli, [*command, "-"], input=content)
    else:
        path = tmp_path_factory.mktemp("fuzz") / "input"
        path.write_bytes(content)
        source = str(path)
        result = CliRunner().invoke(cli, [*command, source])
    error = result.exception
    assert error is None or (isinstance(error, SystemExit) and error.code in (0, 1, 2)), repr(error)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"Error: {source}: "), (
            result.stderr
        )
