"""``nvcrectl analyze nccl``: the status the BandwidthMeasurement controller would write."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import yaml

from nvcre.testing.builders import LogProfile
from nvcre.testing.nccl_cases import status_row
from tests.unit.analyze_cli import analyze

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl"
DATA = Path(__file__).resolve().parents[1] / "data" / "nccl"


run = partial(analyze, "nccl")


def test_a_corpus_log_as_json() -> None:
    code, out, _ = run(str(CORPUS / "cre-real-a100-loopback-1gpu-pdt-two-passes.log"), "-o", "json")
    status = json.loads(out)
    assert code == 0
    assert len(status["results"]) == 28
    # two passes: L141 688.75 and L169 688.95 for 1073741824; both print in-place algBW `6e+06`
    assert status["results"][-1] == status_row(1073741824, "688.85", "0.00", "6000000.00", "0.00", samples=2)
    assert (status["transport"], status["wrongValues"]) == (["Socket"], 0)
    assert (status["busBandwidthGBps"], status["algBandwidthGBps"]) == (0.0, 688.85)
    assert {k: status[k] for k in ("test", "ranks", "hosts", "avgBusBandwidthGBps", "outOfBounds")} == {
        "test": "all_reduce_perf_mpi",  # L2 `# Collective test starting: all_reduce_perf_mpi`
        "ranks": 1,
        "hosts": ["krusty-loopback-communica-636-89cf2-workload-node-0-0"],
        "avgBusBandwidthGBps": "0",
        "outOfBounds": {"count": 0, "status": "OK"},
    }
    assert (status["complete"], status["incompleteReason"], status["sizesDropped"]) == (True, None, 0)
    assert status["failureLines"] == {"count": 0, "lines": []}


def test_every_field_is_printed_for_a_failed_run() -> None:
    code, out, _ = run(str(CORPUS / "issue287-rtx5090-2gpu-fail-after-header.log"), "-o", "json")
    status = json.loads(out)
    assert code == 1 and status["results"] == []
    assert (status["test"], status["ranks"], status["hosts"]) == ("all_reduce_perf", 2, ["GENOA-06"])
    assert (status["complete"], status["incompleteReason"]) == (
        False,
        "the table header was printed but no row followed",
    )
    assert status["failureLines"]["count"] == 6
    assert status["failureLines"]["lines"][0].startswith("GENOA-06: Test NCCL failure common.cu:392")
    assert (status["avgBusBandwidthGBps"], status["outOfBounds"], status["busBandwidthGBps"]) == (
        None,
        None,
        None,
    )


def test_stdin_yaml_and_several_files_read_as_one_log() -> None:
    text = (CORPUS / "awsbatch-p5-mpi-tagged.log").read_text()
    code, out, _ = run("-", stdin=text)
    assert code == 0 and yaml.safe_load(out)["busBandwidthGBps"] == 483.05  # L35
    path = str(CORPUS / "awsbatch-p5-mpi-tagged.log")
    code, out, _ = run(path, path, "-o", "json")
    assert code == 0 and {r["samples"] for r in json.loads(out)["results"]} == {2}


def test_table() -> None:
    code, out, _ = run(str(CORPUS / "awsome-slurm-p5-2node-srun-label.log"), "-o", "table")
    assert code == 1  # the author's excerpt stops before the footer: no complete sweep, no pass
    assert out.splitlines()[0].split() == [
        *("SIZE", "(B)", "ALGBW", "(GB/s)", "BUSBW", "(GB/s)"),
        *("IN-PLACE", "ALGBW", "IN-PLACE", "BUSBW", "#WRONG", "SAMPLES"),
    ]
    row = ["17179869184", "259.78", "487.09", "259.87", "487.26", "0", "1"]  # L34
    assert row in [line.split() for line in out.splitlines()]
    assert "busBandwidthGBps: 487.09" in out
    assert "complete: false (no footer (# Out of bounds / # Avg bus bandwidth) after the table)" in out
    assert (
        "verdict: MeasurementUnavailable: " in out and "the nccl-tests table is incomplete: no footer" in out
    )
    code, out, _ = run(str(CORPUS / "issue37-v100-allgather-old-error-column-FAILED.log"), "-o", "table")
    assert ["4294967296", "129.05", "129.05", "128.84", "128.84", "error", "1e+00", "1"] in [
        line.split() for line in out.splitlines()
    ]  # L5: the old float error column, not a count
    assert "outOfBounds: 2 FAILED" in out and "avgBusBandwidthGBps: 128.942" in out


def test_logs_without_a_readable_row_say_no_bandwidth_rows_recognised() -> None:
    for path, reason in (
        (CORPUS / "issue5-p100-nccl1-old-header-fail.log", "FailuresLogged"),  # NCCL 1.x header, a failure
        (DATA / "oci-oke-gb200-kubectl-tail-no-header.log", "MeasurementUnavailable"),  # no header
    ):
        code, out, err = run(str(path), "-o", "json")
        assert code == 1, path.name
        assert json.loads(out)["results"] == [] and json.loads(out)["busBandwidthGBps"] is None
        assert json.loads(out)["verdict"]["reason"] == reason
    assert err.startswith("Error: No final bandwidth data: no nccl-tests row was recognised in ")
    assert json.loads(out)["rowsWithoutHeader"] == 33


def test_bad_input_exits_2() -> None:
    code, _, err = run("/nonexistent/nccl.log")
    assert code == 2 and "cannot read file" in err
    code, _, err = run("--profile", "no-such-profile", "-")
    assert (code, err) == (
        2,
        "Error: no-such-profile: neither a built-in LogProfile (megatron-bridge, megatron-training, nccl-all-reduce, nccl-bandwidth, nccl-loopback, nemo-training, nemo4) nor a file\n",
    )


def test_a_profile_file(tmp_path: Path) -> None:
    profile = (
        LogProfile("custom")
        .spec(
            timestamp={"layout": "2006-01-02T15:04:05Z07:00"},
            patterns={
                "bandwidthResult": {
                    "regex": r"size=(?P<size>\d+) alg=(?P<algBW>[\d.]+) bus=(?P<busBW>[\d.]+)"
                }
            },
        )
        .obj()
    )
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(profile))
    code, out, _ = run(
        "--profile", str(path), "-o", "json", "-", stdin="size=8 alg=1.005 bus=2\nsize=8 alg=1.015 bus=2\n"
    )
    assert code == 0 and json.loads(out)["results"] == [
        {"sizeBytes": 8, "algBW": "1.01", "busBW": "2.00", "samples": 2}
    ]
    assert json.loads(out)["complete"] is None  # a profile's own pattern says nothing of tables
    del profile["spec"]["patterns"]["bandwidthResult"]  # type: ignore[index]
    profile["spec"]["patterns"]["applicationStart"] = {"regex": "start"}  # type: ignore[index]
    path.write_text(yaml.safe_dump(profile))
    code, _, err = run("--profile", str(path), "-")
    assert code == 2 and "spec.patterns.bandwidthResult: required" in err


def test_a_threshold_judges_the_peak_as_the_job_controller_does() -> None:
    log = str(CORPUS / "awsbatch-p5-mpi-tagged.log")  # a whole sweep and its footer
    code, out, err = run(log, "-o", "json", "--threshold", "busBandwidthGBps=value >= 480")
    assert code == 0 and json.loads(out)["verdict"] == {
        "failed": False,
        "reason": "ThresholdsMet",
        "message": "All performance thresholds satisfied",
    }
    code, out, err = run(log, "-o", "json", "--threshold", "busBandwidthGBps=value >= 1000")
    verdict = json.loads(out)["verdict"]
    assert code == 1 and verdict["reason"] == "ThresholdViolated"
    assert err == f"Error: {verdict['message']}\n"
    assert verdict["message"].startswith('Threshold "busBandwidthGBps" violated: measured 483.0500')  # L35
    code, _, err = run(log, "--threshold", "busBandwidthGbps=value > 1")
    assert code == 2 and "unknown threshold key(s) [busBandwidthGbps]" in err
    code, _, err = run(log, "--threshold", "busBandwidthGBps=value + 1")
    assert code == 2 and 'Threshold "busBandwidthGBps": ' in err
    code, _, err = run(log, "--threshold", "busBandwidthGBps")
    assert code == 2 and "expected KEY=EXPR" in err


def test_a_corrupted_real_run_fails_as_data_corruption() -> None:
    """A real run whose #wrong columns count about a billion values (in %g form) and whose
    footer says `Out of bounds values : 108 FAILED`: the Job's verdict, exit 1."""
    code, out, err = run(str(DATA / "inc-rtx3090-2node-wrong-exponent-oob-failed.log"), "-o", "json")
    status = json.loads(out)
    assert code == 1
    assert (status["wrongValues"], status["outOfBounds"]) == (1073741424, {"count": 108, "status": "FAILED"})
    assert status["results"][-1]["wrong"] == 536870000  # 2.68435e+08 in each half
    message = "nccl-tests found 1073741424 wrong values (#wrong columns): the results are corrupted, whatever the bandwidth"
    assert status["verdict"] == {"failed": True, "reason": "DataCorruption", "message": message}
    assert err == f"Error: {message}\n"
    code, out, _ = run(str(CORPUS / "issue37-v100-allgather-old-error-column-FAILED.log"), "-o", "json")
    assert code == 1 and json.loads(out)["verdict"]["message"] == (
        "nccl-tests reported Out of bounds values : 2 FAILED: the results are corrupted, whatever the bandwidth"
    )


def test_a_table_cut_short_fails_with_the_completeness_reason() -> None:
    """The only table of a real log stops at 16 MiB of a sweep to 128 MiB, with no footer."""
    code, out, err = run(str(CORPUS / "eunomia-rtx5090-allgather-LL-aborted.log"), "-o", "json")
    verdict = json.loads(out)["verdict"]
    assert code == 1 and verdict["reason"] == "MeasurementUnavailable"
    assert verdict["message"].startswith(
        "No final bandwidth data: the nccl-tests table is incomplete: the table stopped at 16777216 B "
        "before the footer; the sweep was to reach 134217728 B; the log ends: "
    )
    assert "# Note: 32MB+ sizes aborted" in verdict["message"]
    assert err.startswith("Error: No final bandwidth data: the nccl-tests table is incomplete")
