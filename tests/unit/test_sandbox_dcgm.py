"""``dcgmi diag`` in the sandbox: the command line as dcgmi parses it, a healthy node at each
level, each fault a diag reports, and the document and exit status DCGM 4.5 gives them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nvcre.measure.dcgm import read_diag
from nvcre.sandbox import Member, node_model, parse_faults, simulate
from nvcre.sandbox.dcgm import (
    EXIT_BAD_ARGUMENT,
    EXIT_BADPARAM,
    EXIT_ISOLATE,
    EXIT_NO_TEST,
    EXIT_NVVS_ERROR,
    EXIT_PARSE,
    DiagCommandError,
    parse_diag,
    styled,
)
from nvcre.sandbox.simulate import Simulation, workload

#: What the catalog's dcgm-level3 runs (src/nvcre/catalog/entries/_lib/bodies/dcgm.yaml).
DATA = Path(__file__).resolve().parents[1] / "data" / "dcgm"
CATALOG = [
    "dcgmi",
    "diag",
    "--host",
    "nvidia-dcgm.gpu-operator.svc:5555",
    "--run",
    "3",
    "--json",
    "--verbose",
]
NODE = [Member("gpu-node-000", node_model("gpu-node-000", "NVIDIA-H100-80GB-HBM3", "aws"))]

#: The tests of each level by category, in the order dcgmi prints them.
LEVELS = {
    1: [("Deployment", ["software"])],
    2: [("Deployment", ["software"]), ("Hardware", ["memory"]), ("Integration", ["pcie"])],
    3: [
        ("Deployment", ["software"]),
        ("Hardware", ["memory", "diagnostic", "nvbandwidth"]),
        ("Integration", ["pcie"]),
        ("Stress", ["memory_bandwidth", "targeted_stress", "targeted_power"]),
    ],
    4: [
        ("Deployment", ["software"]),
        ("Hardware", ["memory", "diagnostic", "nvbandwidth", "pulse_test"]),
        ("Stress", ["memtest", "memory_bandwidth", "targeted_stress", "targeted_power"]),
        ("Integration", ["pcie"]),
    ],
}


def diag(level: int, *faults: str, extra: tuple[str, ...] = (), **kwargs: Any) -> Simulation:
    command = [*CATALOG[:5], str(level), *CATALOG[6:], "-p", "nvbandwidth.is_allowed=true", *extra]
    return simulate(command, NODE, parse_faults(faults), seed=3, **kwargs)


def document(sim: Simulation) -> dict[str, Any]:
    assert all(line.stream == "stdout" for line in sim.lines)
    doc: dict[str, Any] = json.loads("\n".join(line.text for line in sim.lines))
    return doc


def by_test(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for c in doc["DCGM Diagnostic"]["test_categories"] for t in c["tests"]}


def failures(doc: dict[str, Any]) -> list[tuple[str, int, int, str]]:
    """(test, GPU, error id, message) of every warning on an entity."""
    return [
        (name, r["entity_id"], w["error_id"], w["warning"])
        for name, t in by_test(doc).items()
        for r in t["results"]
        for w in r.get("warnings", ())
    ]


# --- the command line -----------------------------------------------------------------------


def test_the_catalog_command_line_is_read_as_dcgmi_reads_it() -> None:
    parsed = parse_diag(
        [*CATALOG, "-p", "targeted_power.test_duration=1200s", "-p", "nvbandwidth.is_allowed=true"]
    )
    assert parsed is not None
    assert (parsed.level, parsed.json, parsed.verbose, parsed.host) == (
        3,
        True,
        True,
        "nvidia-dcgm.gpu-operator.svc:5555",
    )
    # the tests a real DCGM 4.4.2 `-r 3` table lists after software, in its order
    real = read_diag((DATA / "gb10-microk8s-pod-dcgm442-r3-text-all-skipped-but-software.log").read_text())
    assert real is not None
    assert real.tests()[0][1] == "software"
    assert parsed.tests == tuple(test for _category, test in real.tests()[1:])
    assert parsed.param("targeted_power", "test_duration") == "1200s"
    assert parsed.param("nvbandwidth", "is_allowed") == "true"
    assert parsed.entity_ids == "*,cpu:*"


def test_short_flags_combined_switches_and_suite_names() -> None:
    short = parse_diag(["/usr/bin/dcgmi", "diag", "-r", "long", "-jv", "-i", "0,1", "-p", "a.b=1;c.d=2"])
    assert short is not None
    assert (short.level, short.json, short.verbose, short.entity_ids) == (3, True, True, "0,1")
    assert dict(short.params) == {"a.b": "1", "c.d": "2"}
    named = parse_diag(["dcgmi", "diag", "-r", "targeted_stress,pcie"])
    assert named is not None and (named.level, named.tests) == (None, ("pcie", "targeted_stress"))


def test_other_programs_and_subcommands_are_not_a_diag() -> None:
    assert parse_diag(["dcgmi", "discovery", "-l"]) is None
    assert parse_diag(["dcgmi"]) is None
    assert parse_diag(["all_reduce_perf", "diag"]) is None


@pytest.mark.parametrize(
    ("args", "first", "second"),
    [
        (["--bogus"], "PARSE ERROR: Argument: --bogus", "             Couldn't find match for argument"),
        (["--run=3"], "PARSE ERROR: Argument: --run=3", "             Couldn't find match for argument"),
        (["-r"], "PARSE ERROR: Argument: -r (--run)", "             Missing a value for this argument!"),
        (
            ["-r", "1", "--run", "2"],
            "PARSE ERROR: Argument: -r (--run)",
            "             Argument already set!",
        ),
        (["-j", "-j"], "PARSE ERROR: Argument: -j (--json)", "             Argument already set!"),
        (
            ["--iterations", "x"],
            "PARSE ERROR: Argument: (--iterations)",
            "             Couldn't read argument value from string 'x'",
        ),
    ],
)
def test_a_flag_tclap_refuses_is_a_parse_error_and_exit_1(args: list[str], first: str, second: str) -> None:
    with pytest.raises(DiagCommandError) as err:
        parse_diag(["dcgmi", "diag", *args])
    assert err.value.exit_code == EXIT_PARSE == 1
    assert err.value.lines[:2] == (first, second)
    assert "   dcgmi diag --help" in err.value.lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-r", "7"], "Error: Invalid value '7' specified for -r.."),
        (["-r", "-1"], "Error: Positive value expected, negative value found for arg run."),
        (["--iterations", "0"], "Error: The value for iterations cannot be 0.."),
        (["--train"], "Error: Specifying training is no longer supported and this code has been removed.."),
        (["--check-interval", "5"], "Error: The --fail-early option must be enabled for arg check-interval."),
        (
            ["-p", "diagnostic"],
            "Error: Improperly formatted parameters argument: 'diagnostic'. Argument must follow the format: "
            "test_name.attr_name=attr_value[;...].",
        ),
    ],
)
def test_a_value_refused_after_parsing_exits_254(args: list[str], message: str) -> None:
    with pytest.raises(DiagCommandError) as err:
        parse_diag(["dcgmi", "diag", *args])
    assert err.value.exit_code == EXIT_BAD_ARGUMENT == 254  # main returns -2
    assert err.value.lines == (message, "An error occurred trying to parse the command line.")


def test_a_refused_command_line_prints_on_stderr_and_exits_at_once() -> None:
    sim = simulate(["dcgmi", "diag", "--bogus"], NODE)
    assert sim.exit_code == 1 and sim.duration_s is not None and sim.duration_s < 1
    assert [line.stream for line in sim.lines] == ["stderr"] * len(sim.lines)
    assert sim.lines[0].text == "PARSE ERROR: Argument: --bogus"


def test_the_diag_is_found_in_a_shell_script() -> None:
    found = workload(["sh", "-c", "set -e; LEVEL=2; exec dcgmi diag -r $LEVEL -j"])
    assert found.dcgm is not None and found.dcgm.level == 2 and found.error is None


# --- a healthy node -------------------------------------------------------------------------


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_a_healthy_node_passes_every_test_of_its_level(level: int) -> None:
    sim = diag(level)
    assert (sim.exit_code, sim.node_effects, sim.failed_hosts) == (0, (), ())
    doc = document(sim)
    listed = [
        (c["category"], [t["name"] for t in c["tests"]]) for c in doc["DCGM Diagnostic"]["test_categories"]
    ]
    assert listed == LEVELS[level]
    for test in by_test(doc).values():
        assert test["test_summary"] == {"status": "Pass"}
        assert [
            (r["entity_group"], r["entity_group_id"], r["entity_id"], r["status"]) for r in test["results"]
        ] == [("GPU", 1, gpu, "Pass") for gpu in range(8)]
    assert doc["metadata"] == {"Driver Version Detected": "590.44.01", "version": "4.5.2"}
    (gpus,) = doc["entity_groups"]
    assert (gpus["entity_group"], gpus["entity_group_id"]) == ("GPU", 1)
    assert [(e["entity_id"], e["device_id"]) for e in gpus["entities"]] == [(i, "2330") for i in range(8)]
    assert len({e["serial_num"] for e in gpus["entities"]}) == 8
    assert {line.offset_s for line in sim.lines} == {sim.lines[0].offset_s}  # one document at the end
    assert sim.duration_s is not None and sim.duration_s >= sim.lines[-1].offset_s


def test_each_level_takes_about_as_long_as_dcgm_says() -> None:
    durations = [diag(level).duration_s for level in (1, 2, 3, 4)]
    assert all(d is not None for d in durations)
    one, two, three, four = (float(d or 0) for d in durations)
    assert one < 30 and 90 < two < 240 and 8 * 60 < three < 20 * 60 and four > three + 600
    # The catalog's level 4 (20-minute power and stress phases) lasts about an hour.
    catalog = ("-p", "targeted_power.test_duration=1200s", "-p", "targeted_stress.test_duration=1200s")
    catalog_four = diag(4, extra=catalog)
    assert catalog_four.duration_s is not None and catalog_four.duration_s > four + 2 * 1000


def test_the_document_is_written_as_jsoncpp_writes_it() -> None:
    text = "\n".join(line.text for line in diag(1).lines) + "\n"
    assert text.startswith('{\n\t"DCGM Diagnostic" : \n\t{\n\t\t"test_categories" : \n\t\t[\n\t\t\t{\n')
    assert '\t\t\t\t"category" : "Deployment",\n' in text and text.endswith("\n}\n")
    assert (
        styled({"a": [], "b": {}, "c": [1, "x"]})
        == '{\n\t"a" : [],\n\t"b" : {},\n\t"c" : \n\t[\n\t\t1,\n\t\t"x"\n\t]\n}\n'
    )


def test_without_json_dcgmi_prints_its_table() -> None:
    sim = simulate(["dcgmi", "diag", "-r", "2"], NODE, seed=3)
    lines = [line.text for line in sim.lines]
    assert lines[0] == "Successfully ran diagnostic for group."
    assert all(len(line) == 78 for line in lines[1:])
    assert "| GPU Device IDs Detected   | 2330, 2330, 2330, 2330, 2330, 2330, 2330, 2330 |" in lines
    assert "| memory                    | Pass                                           |" in lines
    assert lines.count("|                           | GPU0: Pass                                     |") == 3


def test_the_entity_list_picks_the_gpus() -> None:
    doc = document(diag(2, extra=("-i", "gpu:1,3,cpu:*")))
    assert [r["entity_id"] for r in by_test(doc)["memory"]["results"]] == [1, 3]


def test_an_entity_dcgmi_cannot_read_is_a_runtime_error() -> None:
    sim = diag(2, extra=("-i", "abc"))
    assert sim.exit_code == EXIT_BADPARAM == 255
    assert document(sim) == {
        "DCGM Diagnostic": {
            "runtime_error": "Error: Error: Expected numerical entityId instead of abc\n",
            "version": "4.5.2",
        }
    }


def test_an_unknown_test_name_is_not_run() -> None:
    sim = simulate(["dcgmi", "diag", "-r", "pcie,warp_drive", "-j"], NODE)
    assert sim.exit_code == EXIT_NO_TEST == 198
    assert "Requested tests were not found" in document(sim)["DCGM Diagnostic"]["runtime_error"]


def test_nvbandwidth_not_allowed_is_skipped() -> None:
    simulated = simulate(
        ["dcgmi", "diag", "-r", "3", "-j"], [Member("a", node_model("a", "NVIDIA-B200", "aws"))]
    )
    assert simulated.exit_code == 0
    test = by_test(document(simulated))["nvbandwidth"]
    assert test["test_summary"]["status"] == "Skip"
    assert test["test_summary"]["info"] == [
        "The nvbandwidth test is skipped. Check DCGM and system configuration. "
        "This error may be eliminated with an updated configuration."
    ]
    assert {r["status"] for r in test["results"]} == {"Skip"}


def test_iterations_repeat_the_run_under_one_document() -> None:
    sim = diag(2, extra=("--iterations", "2"))
    doc = document(sim)
    assert doc["Overall Result"] == "Pass" and len(doc["iterations"]) == 2
    assert sim.duration_s is not None and sim.duration_s > 2 * float(diag(2).duration_s or 0) - 1


def test_a_diag_ends_when_its_tests_do_past_the_horizon_that_cuts_open_ended_runs() -> None:
    """The catalog's level 4 lasts about an hour of its own; the runner's horizon (an hour) stops
    runs that would never end, not a diag, which always does."""
    sim = diag(4, horizon_s=600.0)
    assert sim.exit_code == 0 and sim.duration_s is not None and sim.duration_s > 600.0
    assert document(sim)["DCGM Diagnostic"]["test_categories"], "its report, printed at its end"
    hung = diag(4, "gpu-node-000=hang", horizon_s=600.0)
    assert (hung.exit_code, hung.lines) == (None, ()), "a hang still stops it"


# --- faults ---------------------------------------------------------------------------------


def test_an_xid_fails_the_test_running_when_it_strikes_on_gpu_0() -> None:
    memory_at = 20.0  # software takes the first ~15 s, memory the next ~35
    sim = diag(2, f"gpu-node-000=xid:79@{memory_at}s")
    assert sim.exit_code == EXIT_NVVS_ERROR == 226  # DCGM_ST_NVVS_ERROR (-30)
    doc = document(sim)
    assert failures(doc) == [
        (
            "memory",
            0,
            101,
            "Detected XID 79 for GPU 0 Please consult the documentation for details of this XID.",
        )
    ]
    memory = by_test(doc)["memory"]
    assert memory["test_summary"]["status"] == "Fail"
    assert memory["test_summary"]["warnings"][0] == {
        "error_category": 5,
        "error_id": 101,
        "error_severity": 4,
        "warning": "Detected XID 79 for GPU 0 Please consult the documentation for details of this XID.",
    }
    assert [r["status"] for r in memory["results"]] == ["Fail"] + ["Pass"] * 7
    assert by_test(doc)["pcie"]["test_summary"] == {"status": "Pass"}
    assert [(e.offset_s, e.node) for e in sim.node_effects] == [(memory_at, "gpu-node-000")]


def test_an_xid_strikes_half_way_through_by_default() -> None:
    doc = document(diag(3, "gpu-node-000=xid:48"))
    ((test, gpu, error, message),) = failures(doc)
    assert (gpu, error, message) == (
        0,
        101,
        "Detected XID 48 for GPU 0 Please consult the documentation for details of this XID.",
    )
    assert test not in ("software", "memory")  # the middle of a level-3 run is past the memory test


def test_xid_95_is_an_uncontained_error_that_says_to_isolate() -> None:
    sim = diag(3, "gpu-node-000=xid:95")
    assert sim.exit_code == EXIT_ISOLATE == 205  # DCGM_ST_NVVS_ISOLATE_ERROR (-51)
    ((_, gpu, error, message),) = failures(document(sim))
    assert (gpu, error) == (0, 81)
    assert message == "GPU had an uncontained error (XID 95) Drain the GPU and reset it or reboot the node."


def test_an_ecc_xid_during_the_software_test_leaves_a_row_remapping_pending() -> None:
    sim = diag(1, "gpu-node-000=xid:48")
    assert sim.exit_code == EXIT_NVVS_ERROR
    doc = document(sim)
    assert failures(doc) == [
        (
            "software",
            0,
            85,
            "GPU 0 had memory errors and row remappings are pending Check DCGM and system logs for errors. "
            "Reset GPU. Restart DCGM. Rerun diagnostics.",
        )
    ]
    (warning,) = by_test(doc)["software"]["test_summary"]["warnings"]
    assert (warning["error_category"], warning["error_severity"]) == (10, 6)  # hardware memory, RESET


def test_an_xid_the_software_test_does_not_watch_passes_level_1_but_marks_the_node() -> None:
    sim = diag(1, "gpu-node-000=xid:79")
    assert sim.exit_code == 0 and failures(document(sim)) == []
    assert len(sim.node_effects) == 1


def test_a_slow_gpu_fails_targeted_stress_from_level_3() -> None:
    sim = diag(3, "gpu-node-000=slow-gpu:1.5")
    assert sim.exit_code == EXIT_NVVS_ERROR
    ((test, gpu, error, message),) = failures(document(sim))
    assert (test, gpu, error) == ("targeted_stress", 0, 50)
    assert message.startswith("Max stress level of ")
    achieved = float(message.split()[4])
    assert 29250.0 / 1.5 < achieved < 29250.0 * 1.05 / 1.5
    assert message.endswith(
        " did not reach desired stress level of 29250.0 for GPU 0 Check DCGM and system logs for errors. "
        "Reset GPU. Restart DCGM. Rerun diagnostics."
    )
    assert diag(2, "gpu-node-000=slow-gpu:1.5").exit_code == 0  # no stress test at level 2
    assert diag(3, "gpu-node-000=slow-gpu:1.02").exit_code == 0  # within target_perf_min_ratio 0.95


def test_hang_and_not_ready_stop_the_diag_before_it_prints() -> None:
    hung = diag(2, "gpu-node-000=hang")
    assert (hung.exit_code, hung.duration_s, hung.lines) == (None, None, ())
    lost = diag(2, "gpu-node-000=not-ready")
    assert (lost.exit_code, lost.lines) == (None, ())
    assert [e.change.conditions[0].status for e in lost.node_effects] == ["Unknown"]


def test_nccl_failures_and_network_faults_change_nothing_a_diag_measures() -> None:
    healthy = diag(3)
    for fault in ("nccl-error", "flaky:1", "slow-nic:0.1", "slow-nvlink:0.5", "tcp-fallback", "corrupt"):
        sim = diag(3, f"gpu-node-000={fault}")
        assert (sim.exit_code, sim.lines) == (healthy.exit_code, healthy.lines), fault


def test_missing_gpus_are_not_diagnosed_and_no_log_is_kept() -> None:
    doc = document(diag(2, "gpu-node-000=missing-gpus:2"))
    assert [e["entity_id"] for e in doc["entity_groups"][0]["entities"]] == list(range(6))
    assert diag(2, "gpu-node-000=no-log").log_served is False


def test_a_fault_on_another_node_changes_nothing() -> None:
    assert diag(3, "gpu-node-001=xid:79").lines == diag(3).lines


# --- read back by nvcre's own reader ---------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "faults"),
    [
        (1, ()),
        (4, ()),
        (2, ("gpu-node-000=xid:79@20s",)),
        (1, ("gpu-node-000=xid:48",)),
        (3, ("gpu-node-000=xid:95",)),
        (3, ("gpu-node-000=slow-gpu:1.5",)),
    ],
)
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_the_reader_finds_exactly_the_simulated_failures(
    level: int, faults: tuple[str, ...], as_json: bool
) -> None:
    json_sim = diag(level, *faults)
    sim = json_sim if as_json else _table(level, *faults)
    diagnosis = read_diag("\n".join(line.text for line in sim.lines), level=level)
    assert diagnosis is not None and diagnosis.complete
    doc = document(json_sim)
    read = [t for _, t in diagnosis.tests()]
    assert (
        read == list(by_test(doc)) if as_json else sorted(read) == sorted(by_test(doc))
    )  # a table's own order
    assert {(r.test, r.entity, r.status, r.message) for r in diagnosis.failed} == {
        (test, f"GPU {gpu}", "Fail", message) for test, gpu, _, message in failures(doc)
    }
    assert diagnosis.passed == (sim.exit_code == 0)


def _table(level: int, *faults: str) -> Simulation:
    """The same run without ``--json``: dcgmi's table."""
    command = [w for w in CATALOG if w != "--json"]
    command[command.index("--run") + 1] = str(level)
    return simulate([*command, "-p", "nvbandwidth.is_allowed=true"], NODE, parse_faults(faults), seed=3)
