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
    assert lines[0] == (
        "2026-01-01T00:00:00.300000000Z stderr F Warning: Permanently added 'n0' (ED25519) to the list of known hosts."
    )
    assert next(line for line in lines if " stdout F " in line).startswith("2026-01-01T00:00:00.6")
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z std(out|err) F ", line) for line in lines)
    assert cri_log(run(), EPOCH, speed=4.0)[0].startswith("2026-01-01T00:00:00.075000000Z")


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


# --- corrupt, tcp-fallback, truncate, no-log ----------------------------------------------------

FOUR = [Member(f"n{i}", node_model(f"n{i}", "NVIDIA-H100-80GB-HBM3", "aws")) for i in range(4)]
TABLE = re.compile(
    r"^ +(\d+) +(\d+) +\w+ +\w+ +-?\d+ +[\d.]+ +[\d.]+ +([\d.]+) +(\S+) +[\d.]+ +[\d.]+ +([\d.]+) +(\S+)$"
)


def table(sim: Simulation) -> list[tuple[int, float, str, str]]:
    """(size, out-of-place busbw, out-of-place #wrong, in-place #wrong) of each row."""
    found = [TABLE.match(line.text) for line in sim.lines]
    return [(int(m.group(1)), float(m.group(3)), m.group(4), m.group(6)) for m in found if m]


def footer(sim: Simulation, name: str) -> str | None:
    return next(
        (line.text.split(":", 1)[1].strip() for line in sim.lines if line.text.startswith(f"# {name}")), None
    )


def test_corrupt_makes_every_checked_result_wrong_and_the_run_fail_like_nccl_tests() -> None:
    """An all_reduce carries one GPU's bad data to every rank: #wrong is N per rank over the 32
    ranks (the whole result in small rows); each of the 32 processes counts each wrong check in
    the footer; run() returns testNumResults (7), which every process traces."""
    sim = simulate(COMMAND, FOUR, parse_faults(["n2=corrupt:1000"]), seed=1)
    rows_ = table(sim)
    assert [(size, out, inplace) for size, _, out, inplace in rows_][:2] == [
        (8, "64", "64"),
        (16, "128", "128"),
    ]
    assert all(out == inplace == "32000" for size, _, out, inplace in rows_ if size >= 4000 * 4)
    assert footer(sim, "Out of bounds values") == f"{2 * 32 * len(rows_)} FAILED"
    traces = [line.text for line in sim.lines if line.text.endswith("Test failure common.cu:1189")]
    assert len(traces) == 32 and traces[0].startswith(" .. n0 pid ")
    assert sim.exit_code == 7 and "  Exit code:    7" in [line.text for line in sim.lines]


def test_corrupt_from_its_delay_on_and_only_where_the_bad_data_lands() -> None:
    healthy = simulate(COMMAND, FOUR, seed=1)
    printed = [line.offset_s for line in healthy.lines if TABLE.match(line.text)]
    late = simulate(COMMAND, FOUR, parse_faults([f"n2=corrupt@{printed[len(printed) // 2]}"]), seed=1)
    wrong = [out != "0" for _, _, out, _ in table(late)]
    assert wrong[0] is False and wrong[-1] is True and wrong == sorted(wrong)
    reduce_ = [*COMMAND[:5], "/opt/nccl-tests/build/reduce_perf", *COMMAND[6:]]
    rooted = simulate(reduce_, FOUR, parse_faults(["n2=corrupt:5"]), seed=1)
    assert {out for size, _, out, _ in table(rooted) if size >= 20} == {"5"}  # the root's result only
    assert footer(rooted, "Out of bounds values") == f"{2 * len(table(rooted))} FAILED"


def test_tcp_fallback_runs_the_group_over_sockets_and_says_so() -> None:
    healthy = simulate(COMMAND, GROUP, seed=1)
    fallback = simulate(COMMAND, GROUP, parse_faults(["n1=tcp-fallback"]), seed=1)
    assert table(healthy)[-1][1] > 300.0 and 9.0 < table(fallback)[-1][1] < 13.0
    networks = {
        line.text.split(" [")[0].split(":")[0]: line.text.rsplit("network ", 1)[1]
        for line in fallback.lines
        if "Using network" in line.text
    }
    assert networks == {"n0": "AWS Libfabric", "n1": "Socket"}
    assert any(line.text.endswith("via NET/Socket/0") for line in fallback.lines)
    one_node = [GROUP[1]]
    single = [*COMMAND[:2], "8", *COMMAND[3:]]
    assert table(simulate(single, one_node, parse_faults(["n1=tcp-fallback"]), seed=1)) == table(
        simulate(single, one_node, seed=1)
    )


def test_truncate_cuts_the_launchers_log_mid_table_and_exits_0() -> None:
    healthy = simulate(COMMAND, GROUP, seed=1)
    cut = simulate(COMMAND, GROUP, parse_faults(["n1=truncate:1M"]), seed=1)
    assert cut.exit_code == 0 and cut.duration_s == healthy.duration_s
    assert [size for size, *_ in table(cut)][-1] == 1 << 20
    assert footer(cut, "Out of bounds values") is None and footer(cut, "Avg bus bandwidth") is None
    half = simulate(COMMAND, GROUP, parse_faults(["n0=truncate"]), seed=1)
    sizes = [size for size, *_ in table(healthy)]
    assert [size for size, *_ in table(half)][-1] == sizes[len(sizes) // 2]


def test_no_log_is_a_run_whose_log_is_not_served() -> None:
    sim = simulate(COMMAND, GROUP, parse_faults(["n1=no-log"]), seed=1)
    assert (sim.exit_code, sim.log_served) == (0, False) and rows(sim) == rows(run())
    worker = simulate(["/usr/sbin/sshd", "-De"], GROUP, parse_faults(["n1=no-log"]), rank=1)
    assert worker.log_served is False
    assert simulate(COMMAND, GROUP, parse_faults(["n7=no-log"]), seed=1).log_served is True
