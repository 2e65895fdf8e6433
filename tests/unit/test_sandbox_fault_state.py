"""Faults that change while a sandbox runs: the fault state file, its merge and clear rules, what
the runner takes back from a Node, and ``nvcrectl sandbox fault add|clear|status`` against a
state directory whose runner is played by a thread (no cluster)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from nvcre.cli.main import cli
from nvcre.sandbox import fault_state
from nvcre.sandbox.control import SandboxError, add_faults, clear_faults, status
from nvcre.sandbox.fault_state import FaultState
from nvcre.sandbox.faults import (
    HEALTH_CONDITION,
    HEALTH_LABEL,
    HEALTH_TAINT,
    FaultSpecError,
    NodeChange,
    apply_node_change,
    node_change,
    parse_faults,
    revert_node_change,
)
from nvcre.sandbox.runner import HEARTBEAT_PAUSED, gpus_to_remove, node_revert_patches, stale_changes
from nvcre.sandbox.state import (
    ComponentRecord,
    Record,
    StateDir,
    read_applied,
    read_faults,
    write_applied,
    write_faults,
)
from nvcre.testing.nodes import platform_nodes

NOW = "2026-12-04T18:00:00Z"
LATER = "2026-12-04T18:10:00Z"
NODES = [f"gpu-node-{i:03d}" for i in range(4)]


def specs(state: FaultState) -> list[str]:
    return [e.spec for e in state.entries]


def test_the_file_round_trips_and_a_bad_one_says_what_is_wrong() -> None:
    state = fault_state.added(fault_state.initial(["gpu-node-001=nccl-error"], NOW), ["link:a,b:0.5"], LATER)
    text = fault_state.encode(state)
    assert json.loads(text) == {
        "version": 1,
        "generation": 2,
        "faults": [
            {"spec": "gpu-node-001=nccl-error", "added": NOW},
            {"spec": "link:a,b:0.5", "added": LATER},
        ],
    }
    assert fault_state.decode(text) == state
    for bad, message in (
        ("{", "not JSON"),
        ('{"version": 2, "generation": 1, "faults": []}', "version 1"),
        ('{"version": 1, "generation": -1, "faults": []}', "generation -1"),
        ('{"version": 1, "generation": 1, "faults": {}}', "faults is not a list"),
        ('{"version": 1, "generation": 1, "faults": [{"spec": "x"}]}', r"faults\[0\] needs the strings"),
        (
            '{"version": 1, "generation": 1, "faults": [{"spec": "n=slow-nic:2", "added": ""}]}',
            r"faults\[0\]: 'n=slow-nic:2': slow-nic argument '2' must be a fraction",
        ),
    ):
        with pytest.raises(ValueError, match=message):
            fault_state.decode(bad)


def test_a_fault_added_replaces_the_same_kind_on_the_same_node_and_keeps_the_others() -> None:
    start = fault_state.initial(["gpu-node-001=slow-nic:0.5", "gpu-node-001=slow-nic:0.5"], NOW)
    assert specs(start) == ["gpu-node-001=slow-nic:0.5"] * 2, "up's faults hold as given"
    state = fault_state.added(start, ["gpu-node-003=slow-nic:0.85", "gpu-node-001=xid:79"], LATER)
    state = fault_state.added(state, ["gpu-node-001=slow-nic:0.25", "link:b,a:0.5"], LATER)
    state = fault_state.added(state, ["link:a,b:0.1"], LATER)
    assert specs(state) == [
        "gpu-node-003=slow-nic:0.85",
        "gpu-node-001=xid:79",
        "gpu-node-001=slow-nic:0.25",
        "link:a,b:0.1",
    ], "a later slow-nic replaces both earlier ones; a link is the same either way round"
    assert state.generation == 4
    assert [e.added for e in state.entries] == [LATER] * 4
    with pytest.raises(FaultSpecError, match="unknown fault kind 'slow'"):
        fault_state.added(state, ["gpu-node-002=slow-nic:0.5", "gpu-node-002=slow:0.5"], LATER)


def test_clear_takes_a_nodes_faults_and_the_links_naming_it_or_everything() -> None:
    state = fault_state.initial(
        ["gpu-node-001=xid:79", "gpu-node-002=slow-nic:0.5", "link:gpu-node-001,gpu-node-003:0.5"], NOW
    )
    one = fault_state.cleared(state, ["gpu-node-001"])
    assert specs(one) == ["gpu-node-002=slow-nic:0.5"]
    assert [e.spec for e in fault_state.removed(state, one)] == [
        "gpu-node-001=xid:79",
        "link:gpu-node-001,gpu-node-003:0.5",
    ]
    assert fault_state.by_node(state, ["gpu-node-001", "gpu-node-003", "gpu-node-000"]) == {
        "gpu-node-001": [state.entries[0], state.entries[2]],
        "gpu-node-003": [state.entries[2]],
        "gpu-node-000": [],
    }
    none = fault_state.cleared(one)
    assert (none.entries, none.generation) == ((), 3)
    assert fault_state.cleared(none).generation == 4, "a clear is a change even with nothing to clear"


def _node() -> dict[str, object]:
    (node,) = [n.to_dict() for n in platform_nodes(1, "aws", "NVIDIA-H100-80GB-HBM3")]
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }
    node["status"] = {**node.get("status", {}), "conditions": [ready]}
    return node


def _without_times(node: dict[str, object]) -> dict[str, object]:
    status = dict(node.get("status") or {})  # type: ignore[call-overload]
    status["conditions"] = [
        {k: v for k, v in c.items() if not k.endswith("Time")} for c in status.get("conditions") or ()
    ]
    return {**node, "status": status}


@pytest.mark.parametrize(
    "spec", ["gpu-node-000=xid:79", "gpu-node-000=not-ready", "gpu-node-000=missing-gpus:2"]
)
def test_reverting_a_fault_s_node_change_gives_the_healthy_node_back(spec: str) -> None:
    node = _node()
    change = node_change(parse_faults([spec]), "gpu-node-000")
    faulty = apply_node_change(node, change, now=NOW)
    assert faulty != node
    assert _without_times(revert_node_change(faulty, change, now=LATER)) == _without_times(node)


def test_the_revert_patches_delete_what_an_xid_wrote_and_resume_kwoks_heartbeat() -> None:
    change = node_change(parse_faults(["gpu-node-000=xid:79"]), "gpu-node-000")
    faulty = apply_node_change(_node(), change, now=NOW)
    body, status = node_revert_patches(faulty, change, LATER)
    assert body == {
        "metadata": {"labels": {HEALTH_LABEL: None}, "annotations": {HEARTBEAT_PAUSED: None}},
        "spec": {"taints": None},
    }
    assert status == {"status": {"conditions": [{"type": HEALTH_CONDITION, "$patch": "delete"}]}}
    assert HEALTH_TAINT in json.dumps(faulty)

    not_ready = node_change(parse_faults(["gpu-node-000=not-ready"]), "gpu-node-000")
    _, status = node_revert_patches(apply_node_change(_node(), not_ready, now=NOW), not_ready, LATER)
    (ready,) = status["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "KubeletReady")

    gpus = NodeChange(missing_gpus=2)
    body, status = node_revert_patches(apply_node_change(_node(), gpus, now=NOW), gpus, LATER)
    assert body["metadata"]["labels"] == {"nvidia.com/gpu.count": "8"}
    assert status["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert status["status"]["allocatable"]["nvidia.com/gpu"] == "8"


def test_a_change_kept_in_force_goes_once_no_fault_in_force_makes_it() -> None:
    xid = node_change(parse_faults(["gpu-node-001=xid:79"]), "gpu-node-001")
    lost = node_change(parse_faults(["gpu-node-002=not-ready"]), "gpu-node-002")
    kept = [("gpu-node-001", xid), ("gpu-node-002", lost)]
    assert stale_changes(kept, parse_faults(["gpu-node-001=xid:79", "gpu-node-002=not-ready"])) == []
    assert stale_changes(kept, parse_faults(["gpu-node-001=xid:79"])) == [("gpu-node-002", lost)]
    assert stale_changes(kept, parse_faults(["gpu-node-001=xid:48", "gpu-node-002=slow-nic:0.5"])) == kept


def test_missing_gpus_follow_the_faults_in_force() -> None:
    assert gpus_to_remove(parse_faults(["n=missing-gpus:2"]), "n", 0) == 2, "added: removed at once"
    assert gpus_to_remove(parse_faults(["n=missing-gpus:2"]), "n", 2) == 0
    assert gpus_to_remove(parse_faults(["n=missing-gpus:1"]), "n", 2) == -1
    assert gpus_to_remove(parse_faults(["n=slow-nic:0.5"]), "n", 2) == -2, "cleared: given back"
    assert gpus_to_remove(parse_faults(["n=missing-gpus:2@30s"]), "n", 0) == 0, "strikes in a run"
    assert gpus_to_remove(parse_faults(["n=missing-gpus:2@30s"]), "n", 2) == 0, "and stays"


# --- the commands, with a thread as the runner -------------------------------------------------


def _ready(path: Path, runner_pid: int) -> StateDir:
    """A state directory as a ready sandbox leaves it, this process as its supervisor, no API
    server."""
    state = StateDir(path)
    record = Record(
        supervisor=os.getpid(),
        nodes=NODES,
        faults=["gpu-node-001=nccl-error"],
        ready=True,
        components=[ComponentRecord("runner", runner_pid, "runner.log")],
    )
    state.write(record)
    state.write_pid("supervisor", os.getpid())
    write_faults(state.faults_path, fault_state.initial(record.faults, NOW))
    return state


@pytest.fixture
def box(tmp_path: Path) -> Iterator[StateDir]:
    """A ready sandbox's state directory and a thread that acknowledges each change as the
    runner does."""
    state = _ready(tmp_path / "state", os.getpid())
    stop = threading.Event()

    def runner() -> None:
        while not stop.wait(0.02):
            found = read_faults(state.faults_path)
            if found is not None and read_applied(state.faults_path) != found.generation:
                write_applied(state.faults_path, found.generation)

    thread = threading.Thread(target=runner, daemon=True)
    thread.start()
    yield state
    stop.set()
    thread.join()


def nvcrectl(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sandbox", *args])
    return result.exit_code, result.output


def test_add_waits_for_the_runner_and_status_lists_the_faults_with_their_time(box: StateDir) -> None:
    code, out = nvcrectl("fault", "add", "gpu-node-003=slow-nic:0.85", f"--state-dir={box.path}")
    assert (code, out) == (0, "added gpu-node-003=slow-nic:0.85 (applies to groups that start from now on)\n")
    found = read_faults(box.faults_path)
    assert found is not None and read_applied(box.faults_path) == found.generation == 2
    (added,) = [e for e in found.entries if e.fault.node == "gpu-node-003"]

    code, out = nvcrectl("status", f"--state-dir={box.path}")
    assert code == 0
    lines = out.splitlines()
    assert "  gpu-node-003                 Ready=?        gpu-node-003=slow-nic:0.85" in lines
    tail = lines[lines.index("faults in force (each applies to the groups that start after it was added):") :]
    assert [line.split() for line in tail[1:]] == [
        ["gpu-node-001", "gpu-node-001=nccl-error", "added", NOW],
        ["gpu-node-003", "gpu-node-003=slow-nic:0.85", "added", added.added],
    ]


def test_a_bad_fault_is_an_error_naming_it_and_nothing_changes(box: StateDir) -> None:
    before = box.faults_path.read_text()
    for spec, message in (
        (
            "gpu-node-003=slow-nic:2",
            "'gpu-node-003=slow-nic:2': slow-nic argument '2' must be a fraction in (0, 1]",
        ),
        (
            "gpu-node-009=slow-nic:0.5",
            "fault gpu-node-009=slow-nic:0.5 names no sandbox node (nodes: gpu-node-000",
        ),
        ("gpu-node-003", "'gpu-node-003': expected NODE=KIND[:ARG][@DELAY] or link:A,B:FRACTION"),
    ):
        code, out = nvcrectl("fault", "add", "gpu-node-002=xid:79", spec, f"--state-dir={box.path}")
        assert code == 1, out
        assert f"Error: {message}" in out
    code, out = nvcrectl("fault", "clear", "gpu-node-042", f"--state-dir={box.path}")
    assert (code, out.strip()) == (
        1,
        "Error: gpu-node-042: no sandbox node (nodes: gpu-node-000 ...) and no link end",
    )
    assert box.faults_path.read_text() == before


def test_clear_one_node_then_all(box: StateDir) -> None:
    add_faults(box, ["gpu-node-002=xid:79", "link:gpu-node-002,gpu-node-003:0.5"])
    assert [e.spec for e in clear_faults(box, ["gpu-node-002"])] == [
        "gpu-node-002=xid:79",
        "link:gpu-node-002,gpu-node-003:0.5",
    ]
    code, out = nvcrectl("fault", "clear", f"--state-dir={box.path}")
    assert (code, out) == (0, "cleared gpu-node-001=nccl-error\n")
    code, out = nvcrectl("fault", "clear", "gpu-node-001", f"--state-dir={box.path}")
    assert (code, out) == (0, "no fault to clear on gpu-node-001\n")
    found = status(box)
    assert found.faults == () and all(n.faults == () for n in found.nodes)
    assert nvcrectl("status", f"--state-dir={box.path}")[1].splitlines()[-1] == "faults in force: none"


def test_a_change_needs_a_running_sandbox_and_its_runner(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no sandbox running in"):
        add_faults(StateDir(tmp_path / "none"), ["gpu-node-001=hang"])
    box = _ready(tmp_path / "state", 2**22 + 1)  # no such process
    before = box.faults_path.read_text()
    with pytest.raises(SandboxError, match=r"the sandbox's runner is not running \(log: runner.log\)"):
        add_faults(box, ["gpu-node-001=hang"])
    assert box.faults_path.read_text() == before
