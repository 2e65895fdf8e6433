"""One judge: a saved log gets from ``nvcrectl analyze nccl`` the verdict the Job controller
writes for the same log, for every real log of the corpus and mutated copies of them (a sweep cut
short, a footer lost, wrong values, failure lines, a transport that changed, lines duplicated)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from nvcre.cli.main import cli
from nvcre.measure import verdicts
from nvcre.measure.builtin import builtin_profiles
from nvcre.measure.lines import split_lines
from nvcre.measure.nccl import Parser, final_reason, transitions
from nvcre.measure.profile import compile_profile
from nvcre.measure.thresholds import Verdict

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl"
LOGS = sorted(CORPUS.glob("*.log"))
ENDED = datetime(2026, 3, 10, 15, 0, 0, tzinfo=UTC)
PROFILE = compile_profile(next(p for p in builtin_profiles() if p["metadata"]["name"] == "nccl-bandwidth"))
THRESHOLDS = [{}, {"busBandwidthGBps": "value >= 100"}, {"algBandwidthGBps": "value > 1"}]
FAILURE = "gpu-node-001:41:97 [3] transport/net.cc:911 NCCL WARN Test NCCL failure common.cu:1204 'remote process exited or there was a network error'"


def _mutations(lines: list[str]) -> st.SearchStrategy[list[str]]:
    count = max(len(lines), 1)
    cut = st.integers(0, count).map(lambda n: lines[:n])
    lost_footer = st.just([line for line in lines if "Out of bounds" not in line and "Avg bus" not in line])
    wrong = st.just([_with_wrong(line) for line in lines])
    failure = st.integers(0, count).map(lambda n: [*lines[:n], FAILURE, *lines[n:]])
    socket = st.just([line.replace("Using network AWS Libfabric", "Using network Socket") for line in lines])
    doubled = st.integers(0, count).map(lambda n: [*lines[:n], *lines[n : n + 5], *lines[n:]])
    return st.one_of(st.just(lines), cut, lost_footer, wrong, failure, socket, doubled)


def _with_wrong(line: str) -> str:
    """A data row whose last #wrong column says 3 instead of 0."""
    stripped = line.rstrip()
    cells = stripped.split()
    if len(cells) >= 9 and cells[-1] == "0" and all(c.replace(".", "", 1).isdigit() for c in cells[-4:]):
        return stripped[:-1] + "3" + line[len(stripped) :]
    return line


def controller_verdict(lines: list[str], thresholds: dict[str, str], nodes: int, transport: str) -> Verdict:
    """What the BandwidthMeasurement controller writes after the final read, then the Job
    controller's judge."""
    parser = Parser(PROFILE)
    aggregate = parser.aggregate()
    parser.fold(aggregate, lines)
    reason, message = final_reason(aggregate, "pod ns/launcher")
    status: dict[str, Any] = {}
    transitions.complete(reason, message, "2026-03-10T15:00:00Z", aggregate, ENDED)(status)
    config: dict[str, Any] = {"logProfileRef": "nccl-bandwidth"}
    if transport:
        config["expectedTransport"] = transport
    job = {
        "metadata": {
            "uid": "u",
            "annotations": {"nvcre.nvidia.com/group-nodes": ",".join(f"n{i}" for i in range(nodes))},
        },
        "spec": {"thresholds": thresholds, "bandwidthMeasurement": config},
        "status": {
            "conditions": [
                {"type": "Succeeded", "status": "True", "lastTransitionTime": "2026-03-10T15:00:00Z"}
            ]
        },
    }
    bm = {"metadata": {"labels": {"nvcre.nvidia.com/job-uid": "u"}}, "status": status}
    decided = verdicts.judge(job, bm, None, ENDED + timedelta(hours=1))
    assert isinstance(decided, Verdict)
    return decided


def cli_verdict(
    path: Path, thresholds: dict[str, str], nodes: int, transport: str
) -> tuple[int, dict[str, Any]]:
    args = ["analyze", "nccl", str(path), "-o", "json"]
    args += [f"--threshold={k}={v}" for k, v in thresholds.items()]
    args += ["--nodes", str(nodes)] if nodes else []
    args += ["--expect-transport", transport] if transport else []
    result = CliRunner().invoke(cli, args)
    return result.exit_code, json.loads(result.stdout)["verdict"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_analyze_and_the_controller_reach_the_same_verdict(data: st.DataObject, tmp_path: Path) -> None:
    log = data.draw(st.sampled_from(LOGS), label="log")
    lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    mutated = data.draw(_mutations(lines), label="mutated")
    thresholds = data.draw(st.sampled_from(THRESHOLDS), label="thresholds")
    nodes = data.draw(st.sampled_from([0, 2]), label="nodes")
    transport = data.draw(st.sampled_from(["", "AWS Libfabric"]), label="transport")
    text = "\n".join(mutated).encode()
    assume(text.strip())  # an empty file is not a log: analyze refuses it as bad input (exit 2)
    path = tmp_path / "launcher.log"
    path.write_bytes(text)
    # the controller splits the pod log's bytes as the CLI splits the file's
    expected = controller_verdict(list(split_lines([text])), thresholds, nodes, transport)
    code, printed = cli_verdict(path, thresholds, nodes, transport)
    assert (printed["failed"], printed["reason"], printed["message"]) == (
        expected.failed,
        expected.reason,
        expected.message,
    )
    assert code == (1 if expected.failed else 0)
