"""A platform preCommand wraps the trainer in ``bash -c``: every user word must reach the binary as
written, whatever it contains (quotes, ``$``, backticks, globs, newlines, unicode).

The property renders a WorkloadRun on AWS (whose preCommand wraps the command), takes the
rendered script and runs its ``exec`` line through the real ``bash -c``, with the binary replaced
by a Python one-liner that writes the argv it received. Only the platform's own lines are left
out (they ``rm -rf`` a directory of the AWS image).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.render.workloadrun import build_workflow
from nvcre.testing import builders

DUMP_ARGV = "import os, sys; sys.stdout.buffer.write(b'\\0'.join(os.fsencode(a) for a in sys.argv[1:]))"
NASTY = ["$(id)", "`id`", "$HOME", "${PATH}", "'", '"', "\\", "*", "a b", "\n", "!", ";", "&&", "-x", "", "é"]
# argv entries are C strings: no NUL; surrogates cannot be encoded as UTF-8 (nor written in YAML).
WORD = st.one_of(
    st.sampled_from(NASTY),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20),
)


def trainer(args: list[str]) -> dict[str, Any]:
    run = WorkloadRun.model_validate(
        builders.WorkloadRun("shell")
        .namespace("team-a")
        .image("nvcr.io/nvidia/pytorch:26.01-py3")
        .framework({"exec": {"command": [sys.executable, "-c", DUMP_ARGV], "args": args}})
        .nodes(1)
        .obj()
    )
    workflow = build_workflow(run, None, resolve=True, platform="aws", gpu_arch="b200").workflow
    result: dict[str, Any] = workflow["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    return result


def split_script(script: str) -> tuple[list[str], str]:
    """(the platform's lines, the script from its ``exec`` line on)."""
    lines = script.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("exec "))
    return lines[:start], "\n".join(lines[start:])


def test_aws_wraps_the_command_in_bash_after_its_own_lines() -> None:
    rendered = trainer(["x"])
    assert rendered["command"] == ["/bin/bash", "-c"]
    platform_lines, _ = split_script(rendered["args"][0])
    assert "unset NCCL_NET_PLUGIN" in platform_lines


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(WORD, max_size=6))
def test_every_argument_reaches_the_binary_byte_for_byte(args: list[str]) -> None:
    rendered = trainer(args)
    assert rendered["command"] == ["/bin/bash", "-c"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "HOME": "/nonexistent"}
    completed = subprocess.run(
        ["/bin/bash", "-c", split_script(rendered["args"][0])[1]],
        capture_output=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    received = completed.stdout.split(b"\0") if args else []
    assert received == [a.encode() for a in args]
