"""The entry point: how each fault kind ends a run, what it does to Nodes, and the CRI log."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from nvcre.cli.main import cli
from nvcre.sandbox import Member, cri_log, node_model, parse_faults, simulate
from nvcre.sandbox.faults import HEALTH_CONDITION
from nvcre.sandbox.simulate import EPOCH, Simulation

COMMAND = [
    "/opt/amazon/openmpi/bin/mpirun", "-N", "8", "-x", "NCCL_DEBUG=INFO",
    "/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-n", "20",
]  # fmt: skip
GROUP = [Member(f"n{i}", node_model(f"n{i}", "NVIDIA-H100-80GB-HBM3", "aws")) for i in range(2)]
ROW = re.compile(r"^ +\d+ +\d+ +float ")


def run(*faults: str, attempt: int = 0, command: list[str] = COMMAND, seed: int = 1) -> Simulation:
    return simulate(command, GROUP, parse_faults(faults), seed=seed, attempt=attempt)


def rows(sim: Simulation) -> int:
    return sum(bool(ROW.match(line.text)) for line in sim.lines)


def test_a_healthy_run_prints_the_whole_table_and_exits_0() -> None:
    sim = run()
    assert (sim.exit_code, rows(sim), sim.node_effects, sim.failed_hosts) == (0, 28, (), ())
    assert sim.duration_s is not None and sim.duration_s >= sim.lines[-1].offset_s
    offsets = [line.offset_s for line in sim.lines]
    assert offsets == sorted(offsets)


def test_nccl_error_fails_the_run_naming_the_node() -> None:
    sim = run("n1=nccl-error")
    assert sim.exit_code == 3 and sim.failed_hosts == ("n1",)
    text = "\n".join(line.text for line in sim.lines)
    assert "n1: Test NCCL failure common.cu:1204 'remote process exited or there was a network error" in text
    assert "NCCL WARN NET/OFI" in text and "Exit code:    3" in text
    assert rows(sim) == 0  # it strikes at the first collective
    assert "# Out of bounds values" not in text


def test_a_delayed_error_strikes_mid_table() -> None:
    healthy = run()
    late = run("n0=nccl-error@" + str(healthy.lines[-1].offset_s * 0.9))
    assert late.exit_code == 3 and 0 < rows(late) < rows(healthy)


def test_hang_stops_progress_and_never_exits() -> None:
    sim = run("n0=hang")
    assert (sim.exit_code, sim.duration_s, rows(sim)) == (None, None, 0)
    assert any("Rank 15" in line.text for line in sim.lines)  # start-up did happen


def test_xid_marks_the_node_mid_run_and_a_fatal_xid_stops_progress() -> None:
    healthy = run()
    sim = run("n1=xid:79")
    (effect,) = sim.node_effects
    assert effect.node == "n1" and effect.change.conditions[0].type == HEALTH_CONDITION
    assert healthy.duration_s is not None and 0 < effect.offset_s < healthy.duration_s
    assert (sim.exit_code, sim.duration_s) == (None, None)
    assert 0 < rows(sim) < rows(healthy)
    benign = run("n1=xid:63")
    assert benign.exit_code == 0 and rows(benign) == rows(healthy) and len(benign.node_effects) == 1


def test_not_ready_mid_run_is_a_node_effect_and_a_stall() -> None:
    sim = run("n0=not-ready@2")
    (effect,) = sim.node_effects
    assert (effect.offset_s, effect.change.conditions[0].status, sim.exit_code) == (2.0, "Unknown", None)


def test_faults_on_other_nodes_do_nothing() -> None:
    assert run("n7=nccl-error", "n7=xid:79", "n7=slow-nic:0.1").lines == run().lines


def test_missing_gpus_fail_a_run_that_needs_them() -> None:
    sim = run("n1=missing-gpus:1")
    assert sim.exit_code == 1 and sim.failed_hosts == ("n1",)
    assert "Invalid number of GPUs: 8 requested but only 7 were found." in sim.lines[0].text


def test_flaky_is_deterministic_per_seed_and_attempt_and_a_retry_can_clear_it() -> None:
    outcomes = [run("n1=flaky:0.5", attempt=a).exit_code for a in range(12)]
    assert outcomes == [run("n1=flaky:0.5", attempt=a).exit_code for a in range(12)]
    assert {0, 3} == set(outcomes)
    assert all(run("n1=flaky:0", attempt=a).exit_code == 0 for a in range(5))
    assert all(run("n1=flaky:1", attempt=a).exit_code == 3 for a in range(5))


def test_mpi_workers_only_run_sshd() -> None:
    sim = simulate(["/usr/sbin/sshd", "-De", "-f", "/home/mpiuser/.sshd_config"], GROUP, rank=1)
    assert sim.exit_code is None and next(line.text for line in sim.lines).startswith("Server listening")


def test_unknown_commands_exit_0_quietly() -> None:
    assert simulate(["sleep", "10"], GROUP) == Simulation((), 0, 1.0)


def test_cri_log_lines_are_what_kwok_reads() -> None:
    lines = cri_log(run(), EPOCH)
    assert lines[0].startswith("2026-01-01T00:00:00.6")
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z stdout F ", line) for line in lines)


def test_zero_cycles_run_until_killed() -> None:
    command = [*COMMAND[:-2], "-n", "1", "-N", "0"]
    sim = simulate(command, GROUP, seed=1, horizon_s=60.0)
    assert (sim.exit_code, sim.duration_s) == (None, None)
    assert rows(sim) > 28 and not any(line.text.startswith("# Avg bus") for line in sim.lines)


def _rendered_containers() -> dict[str, list[str]]:
    """The launcher's and a worker's argv as ``nvcrectl workloadrun render`` writes them (aws H100)."""
    example = Path(__file__).resolve().parents[2] / "examples" / "workloadrun" / "nccl-all-reduce.yaml"
    result = CliRunner().invoke(
        cli, ["workloadrun", "render", str(example), "--platform", "aws", "--gpu-arch", "h100"]
    )
    assert result.exit_code == 0, result.output
    (workflow,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    trainer = workflow["spec"]["jobTemplate"]["spec"]["workload"]["trainJob"]["trainer"]
    runtime = workflow["spec"]["dependencies"][0]["spec"]["template"]["spec"]["replicatedJobs"]
    node = next(j for j in runtime if j["name"] == "node")["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    return {"launcher": [*trainer["command"], *trainer["args"]], "node": [*node["command"], *node["args"]]}


def test_the_commands_nvcre_renders_run_on_the_simulator() -> None:
    commands = _rendered_containers()
    launcher = simulate(commands["launcher"], GROUP, seed=2)
    assert launcher.exit_code == 0
    texts = [line.text for line in launcher.lines]
    assert any(t.startswith("# Collective test starting: all_reduce_perf_mpi") for t in texts)
    assert [t.split(" on ")[1].split()[0] for t in texts if t.startswith("#  Rank")] == ["n0"] * 8 + [
        "n1"
    ] * 8
    assert any("Using network AWS Libfabric" in t for t in texts)  # the render sets NCCL_DEBUG=INFO
    worker = simulate(commands["node"], GROUP, rank=1)
    assert (worker.exit_code, worker.duration_s) == (None, None)  # sshd serves until the launcher is done
