"""The ``dcgmi diag`` reader (nvcre.measure.dcgm) over real published outputs and the shapes
NVIDIA/DCGM's ``dcgmi/Diag.cpp`` prints.

Real outputs are read where they are: the shared corpus (``../shared/corpus/dcgm``, never copied)
and tests/data/dcgm (sources in its README.md). Every figure asserted below was read by hand from
the file's text. The hand-written documents further down are built from the source's JSON keys
and table stencil (DCGM 2.x-4.x), not from a run, and say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvcre.measure.dcgm import ALL, FAIL, MAX_SUMMARY, PASS, SKIP, Diagnosis, DiagResult, read_diag, summary

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "dcgm"
DATA = Path(__file__).resolve().parents[1] / "data" / "dcgm"


def _read(path: Path) -> Diagnosis:
    d = read_diag(path.read_text())
    assert d is not None
    return d


def _statuses(d: Diagnosis, test: str) -> dict[str, str]:
    return {r.entity: r.status for r in d.results if r.test == test}


# --- the shared corpus (text tables) ------------------------------------------------------------


def test_gcm_level4_all_pass() -> None:
    """``dcgmi diag -r 4`` (old DCGM, ``Blacklist``): 9 Deployment tests Pass, PCIe, GPU Memory,
    Diagnostic, Pulse Test and five Stress tests ``Pass - All``; the table is closed."""
    d = _read(CORPUS / "gcm-dcgmi-diag-r4-all-pass.log")
    assert d.complete and d.passed and not d.failed
    assert d.level == 4 and d.version is None
    assert len(d.tests()) == 18
    assert [c for c, _t in d.tests()].count("Deployment") == 9
    assert d.tests()[0] == ("Deployment", "Blacklist")
    assert ("Integration", "PCIe") in d.tests() and ("Stress", "Memtest") in d.tests()
    assert _statuses(d, "GPU Memory") == {ALL: PASS}
    assert summary(d) == "dcgmi diag level 4: all 18 tests passed"


def test_stas00_gpu_memory_fail_on_gpu0_wrapped_warning() -> None:
    """``-r 2`` on a faulty node (trimmed by its author, no border): GPU Memory Pass on GPUs 1-7
    and Fail on GPU 0, the Warning cut every 45 characters mid-word ('second|s', 'GP|U 0')."""
    d = _read(CORPUS / "stas00-dcgmi-r2-gpu-memory-fail-thermal-trimmed.log")
    assert not d.complete and not d.passed
    assert _statuses(d, "GPU Memory") == {**{f"GPU {i}": PASS for i in range(1, 8)}, "GPU 0": FAIL}
    (failed,) = d.failed
    assert failed.entity == "GPU 0"
    assert failed.message.startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds")
    assert "for GPU 0 Verify that the cooling" in failed.message
    assert failed.message.endswith("thermal material interface, fans, and any other components.")
    text = summary(d)
    assert text.startswith(
        "dcgmi diag: report cut short; 1 of the 1 tests read failed: GPU Memory on GPU 0 ("
    )
    assert "passed" not in text


def test_stas00_xid64_deployment_error_row() -> None:
    """A Deployment ``Error`` row with no test row before it (author-trimmed), wrapped before
    ' remappings'."""
    d = _read(CORPUS / "stas00-dcgmi-xid64-row-remap-pending-trimmed.log")
    assert not d.complete and not d.passed
    assert d.results == (
        DiagResult(
            "Deployment",
            "Error",
            "GPU 3",
            FAIL,
            "GPU 3 has uncorrectable memory errors and row remappings are pending",
        ),
    )


def test_every_corpus_file_is_read() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.log")) == [
        "gcm-dcgmi-diag-r4-all-pass.log",
        "stas00-dcgmi-r2-gpu-memory-fail-thermal-trimmed.log",
        "stas00-dcgmi-xid64-row-remap-pending-trimmed.log",
    ]


# --- tests/data/dcgm ----------------------------------------------------------------------------


def test_a10g_339_targeted_power_fail_on_gpu1() -> None:
    """DCGM 3.3.9 ``-r 3`` on 4x A10G: 16 tests; Targeted Power Pass on GPUs 0, 2, 3 and Fail on
    GPU 1 (max power 224.1 under the 224.2 minimum); EUD Test Skip - All; Info rows are not the
    failure's message."""
    d = _read(DATA / "a10g-dcgm339-r3-text-targeted-power-fail-gpu1.log")
    assert d.complete and not d.passed
    assert d.version == "3.3.9" and d.level is None
    assert len(d.tests()) == 16
    assert _statuses(d, "Targeted Power") == {"GPU 0": PASS, "GPU 2": PASS, "GPU 3": PASS, "GPU 1": FAIL}
    assert _statuses(d, "EUD Test") == {ALL: SKIP}
    assert _statuses(d, "Denylist") == {ALL: PASS}
    (failed,) = d.failed
    assert failed.category == "Stress"
    assert failed.message == (
        "GPU 1 Max power of 224.1 did not reach desired power minimum target_power_min_ratio of 224.2 "
        "for GPU 1 Verify that the clock speeds and GPU utilization are high."
    )
    assert not any("max power: 299.5" in r.message for r in d.results)
    assert summary(d).startswith(
        "dcgmi diag: 1 of 16 tests failed: Targeted Power on GPU 1 (GPU 1 Max power of 224.1"
    )
    assert read_diag(
        DATA.joinpath("a10g-dcgm339-r3-text-targeted-power-fail-gpu1.log").read_text(), level=3
    ) == (Diagnosis(d.results, True, 3, "3.3.9"))


def test_gb10_423_json_software_fail() -> None:
    """DCGM 4.2.3 ``-r 1 -j`` on a GB10: one test, ``software``, Fail on GPU 0 for persistence mode
    (error_id 29); the SRAM text is test_summary info, not a warning."""
    d = _read(DATA / "gb10-dcgm423-r1-json-software-fail-persistence.json")
    assert d.complete and not d.passed and d.version == "4.2.3"
    (failed,) = d.results
    assert (failed.category, failed.test, failed.entity, failed.status) == (
        "Deployment",
        "software",
        "GPU 0",
        FAIL,
    )
    assert failed.message.startswith("Persistence Mode: Persistence mode for GPU 0 is disabled.")
    assert "SRAM" not in failed.message
    assert summary(d).startswith("dcgmi diag: 1 of 1 tests failed: software on GPU 0 (Persistence Mode:")


def test_issue215_json_fragment_is_incomplete() -> None:
    """A DCGM 4 JSON fragment (one test object, then a comma): diagnostic Pass on GPUs 0-7, the
    category and the document lost, so it is never a pass."""
    d = _read(DATA / "issue215-dcgm4-r4-json-fragment-diagnostic-8gpu.json")
    assert not d.complete and not d.passed
    assert _statuses(d, "diagnostic") == {f"GPU {i}": PASS for i in range(8)}
    assert {r.category for r in d.results} == {""}
    assert summary(d) == "dcgmi diag: report cut short; none of the 1 tests read failed"


def test_nccl_tests_issue264_gpu_memory_fail_all_on_8_gpus() -> None:
    """DCGM 3.3.8 ``--run 3`` on 8x H100 without CUDA: 13 tests; GPU Memory ``Fail - All`` with
    eight Warnings (one per GPU, cuInit 'system not yet initialized'); PCIe, Memory Bandwidth and
    EUD Test ``Skip - All``; the Persistence Mode ``Info`` is no message."""
    d = _read(DATA / "nccl-tests-issue264-h100-dcgm338-r3-text-gpu-memory-fail-all-cuinit.log")
    assert d.complete and not d.passed and (d.level, d.version) == (3, "3.3.8")
    assert len(d.tests()) == 13
    (failed,) = d.failed
    assert (failed.category, failed.test, failed.entity) == ("Hardware", "GPU Memory", ALL)
    assert failed.message.count("Error using CUDA API cuInit") == 8
    assert failed.message.startswith(
        "GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU."
    )
    assert "Unable to initialize CUDA library: 'system not yet initialized'" in failed.message
    assert "GPU 7 Error using CUDA API cuInit" in failed.message
    assert [t for _c, t in d.tests() if _statuses(d, t) == {ALL: SKIP}] == [
        "PCIe",
        "Memory Bandwidth",
        "EUD Test",
    ]
    assert _statuses(d, "Persistence Mode") == {ALL: PASS}
    assert not any("Persistence mode for GPU" in r.message for r in d.results)


def test_dcgm_exporter_pod_pcie_fail_all_empty_stress_section() -> None:
    """DCGM 3.3.0 ``-r 2`` in the GPU Operator's dcgm-exporter pod: 11 tests; PCIe ``Fail - All``
    (GPU 0: 'unsupported display driver / cuda driver combination', bus ID 00000000:1B:00.0 cut
    over two rows); GPU Memory ``Skip - All``; the Stress section is empty, the table closed."""
    d = _read(DATA / "k8s-dcgm-exporter-pod-dcgm330-r2-text-pcie-fail-all-cuda-driver.log")
    assert d.complete and not d.passed and (d.level, d.version) == (2, "3.3.0")
    assert len(d.tests()) == 11
    (failed,) = d.failed
    assert (failed.category, failed.test, failed.entity) == ("Integration", "PCIe", ALL)
    assert "cudaDeviceGetByPCIBusId" in failed.message
    assert failed.message.endswith(
        "'system has unsupported display driver / cuda driver combination' for GPU 0, bus ID = 00000000:1B:00.0"
    )
    assert _statuses(d, "GPU Memory") == {ALL: SKIP}


def test_issue253_pcie_fails_while_every_gpu_passes() -> None:
    """DCGM 4.2.3: ``pcie`` Fail with four global Warnings, then GPU0-3 Pass; software and memory
    Pass on GPU0-3; the block has no closing border, so it is not complete."""
    d = _read(DATA / "issue253-dcgm423-r2-text-pcie-fail-global-warnings-gpus-pass-no-footer.log")
    assert not d.complete and not d.passed and d.version == "4.2.3"
    assert d.tests() == (("Deployment", "software"), ("Hardware", "memory"), ("Integration", "pcie"))
    assert _statuses(d, "pcie") == {ALL: FAIL, **{f"GPU {i}": PASS for i in range(4)}}
    assert _statuses(d, "memory") == {f"GPU {i}": PASS for i in range(4)}
    (failed,) = d.failed
    assert failed.message.count("There was an internal error during the test:") == 4
    assert "'A child process (152) exited with non-zero status 1'" in failed.message
    assert (
        "'Output of child process (153) couldn't be parsed: '* Line 1, Column 1 Syntax error:"
        in failed.message
    )
    assert summary(d).startswith(
        "dcgmi diag: report cut short; 1 of the 3 tests read failed: pcie (There was"
    )


def test_issue253_b200_pcie_fail_one_global_warning() -> None:
    """DCGM 4.4.1 ``-r 2`` under Slurm on 8x B200: pcie Fail (child process 11167 output not
    parsed), GPU0-7 Pass in all three tests; closed."""
    d = _read(DATA / "issue253-b200-dcgm441-r2-slurm-text-pcie-fail-global-warning.log")
    assert d.complete and not d.passed and d.version == "4.4.1"
    assert _statuses(d, "software") == {f"GPU {i}": PASS for i in range(8)}
    (failed,) = d.failed
    assert (failed.test, failed.entity) == ("pcie", ALL)
    assert failed.message == (
        "There was an internal error during the test: 'Output of child process (11167) couldn't be parsed: "
        "'* Line 1, Column 1 Syntax error: value, object or array expected. '' Check DCGM and system logs for "
        "errors. Reset GPU. Restart DCGM. Rerun diagnostics."
    )


def test_issue124_dcgm4_all_pass() -> None:
    d = _read(DATA / "issue124-a10g-dcgm442-r2-text-all-pass.log")
    assert d.passed and (d.level, d.version) == (2, "4.4.2")
    assert [(r.test, r.entity, r.status) for r in d.results] == [
        ("software", "GPU 0", PASS),
        ("memory", "GPU 0", PASS),
        ("pcie", "GPU 0", PASS),
    ]
    assert summary(d) == "dcgmi diag level 2: all 3 tests passed"


def test_gb10_pod_everything_skipped_but_software() -> None:
    """DCGM 4.4.2 ``-r 3`` in a pod on a GB10, the table from its ``Diagnostic | Result`` row:
    software Pass; memory, diagnostic, nvbandwidth, pcie, memory_bandwidth, targeted_stress,
    targeted_power Skip. Nothing failed; the summary says how little ran."""
    d = _read(DATA / "gb10-microk8s-pod-dcgm442-r3-text-all-skipped-but-software.log")
    assert d.complete and d.passed and d.version == "4.4.2"
    assert [t for _c, t in d.tests()] == [
        "software",
        "memory",
        "diagnostic",
        "nvbandwidth",
        "pcie",
        "memory_bandwidth",
        "targeted_stress",
        "targeted_power",
    ]
    assert [r.status for r in d.results].count(SKIP) == 7
    assert summary(d) == "dcgmi diag: no test failed: 1 of 8 passed, 7 skipped"


def test_nvidia_docs_example_indented() -> None:
    d = _read(DATA / "nvidia-docs-feature-overview-dcgm400-r3-text-all-pass-indented.log")
    assert d.passed and d.version == "4.0.0" and len(d.tests()) == 7
    assert len(d.results) == 28 and {r.entity for r in d.results} == {f"GPU {i}" for i in range(4)}


def test_every_data_file_is_listed_in_the_readme() -> None:
    readme = (DATA / "README.md").read_text()
    files = sorted(p.name for p in DATA.iterdir() if p.suffix in {".log", ".json"})
    assert len(files) == 10
    assert all(f"`{name}`" in readme for name in files)


# --- hand-written shapes from dcgmi/Diag.cpp ----------------------------------------------------

V4 = {
    "DCGM Diagnostic": {
        "test_categories": [
            {
                "category": "Deployment",
                "tests": [
                    {
                        "name": "software",
                        "results": [
                            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": i, "status": "Pass"}
                            for i in range(2)
                        ],
                        "test_summary": {"status": "Pass"},
                    }
                ],
            },
            {
                "category": "Hardware",
                "tests": [
                    {
                        "name": "memory",
                        "results": [
                            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                            {
                                "entity_group": "GPU",
                                "entity_group_id": 1,
                                "entity_id": 1,
                                "status": "Fail",
                                "warnings": [
                                    {
                                        "error_category": 2,
                                        "error_id": 95,
                                        "error_severity": 2,
                                        "warning": "A memory mismatch was detected on GPU 1,\n but no error was reported",
                                    }
                                ],
                            },
                        ],
                        "test_summary": {"status": "Fail"},
                    },
                    {
                        "name": "diagnostic",
                        "results": [
                            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": i, "status": "Skip"}
                            for i in range(2)
                        ],
                        "test_summary": {"status": "Skip"},
                    },
                ],
            },
        ]
    },
    "metadata": {"version": "4.2.3", "Driver Version Detected": "570.148.08"},
}


def _styled(document: object) -> str:
    """As jsoncpp's toStyledString prints it: keys sorted, tab indents, ``" : "``."""
    return json.dumps(document, indent="\t", sort_keys=True, separators=(",", " : ")) + "\n"


def test_v4_json_among_kubelet_prefixed_lines() -> None:
    lines = ["Successfully ran diagnostic for group.", *_styled(V4).splitlines()]
    log = "\n".join(f"2026-12-05T09:00:{i % 60:02d}.123456789Z {line}" for i, line in enumerate(lines))
    d = read_diag('Defaulted container "dcgm" out of: dcgm\n' + log + "\n", level=2)
    assert d is not None and d.complete and not d.passed
    assert (d.level, d.version) == (2, "4.2.3")
    assert d.tests() == (("Deployment", "software"), ("Hardware", "memory"), ("Hardware", "diagnostic"))
    (failed,) = d.failed
    assert (failed.test, failed.entity) == ("memory", "GPU 1")
    assert failed.message == "A memory mismatch was detected on GPU 1, but no error was reported"
    assert summary(d) == (
        "dcgmi diag level 2: 1 of 3 tests failed: memory on GPU 1 "
        "(A memory mismatch was detected on GPU 1, but no error was reported)"
    )


def test_v4_json_tail_reads_the_complete_tests_left() -> None:
    """A log tail that starts inside the software test: memory and diagnostic remain whole, with
    their category; the version comes last (metadata sorts after the results)."""
    text = _styled(V4)
    tail = text[text.index('"entity_id" : 1') :]
    d = read_diag(tail)
    assert d is not None and not d.complete and not d.passed
    assert d.tests() == (("Hardware", "memory"), ("Hardware", "diagnostic"))
    assert d.version == "4.2.3"
    assert [r.entity for r in d.failed] == ["GPU 1"]
    assert summary(d).startswith(
        "dcgmi diag: report cut short; 1 of the 2 tests read failed: memory on GPU 1"
    )


def test_v4_summary_failure_without_an_entity_result() -> None:
    """A test that failed on a global error (entity NONE): only its test_summary says so."""
    test = {
        "name": "pcie",
        "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}],
        "test_summary": {"status": "Fail", "warnings": [{"error_id": 1, "warning": "NVML error"}]},
    }
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Integration", "tests": [test]}]}}
    d = read_diag(_styled(doc))
    assert d is not None
    assert d.failed == (DiagResult("Integration", "pcie", ALL, FAIL, "NVML error"),)
    assert summary(d) == "dcgmi diag: 1 of 1 tests failed: pcie (NVML error)"


def test_v33_json_level_one_warnings_under_warnings_and_gpu_id() -> None:
    """DCGM 3.2/3.3: a Deployment result carries ``gpu_id`` (an integer) only with an error, whose
    text is under ``warnings`` inside the warning; per-GPU results carry ``gpu_id`` strings."""
    doc = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {"name": "Denylist", "results": [{"status": "Pass"}]},
                        {
                            "name": "Page Retirement/Row Remap",
                            "results": [
                                {
                                    "gpu_id": 3,
                                    "status": "Fail",
                                    "warnings": [
                                        {"warnings": "GPU 3 had uncorrectable memory errors", "error_id": 62}
                                    ],
                                }
                            ],
                        },
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass", "info": "Allocated 1 bytes"},
                                {
                                    "gpu_id": "1",
                                    "status": "Warn",
                                    "warnings": [{"warning": "slow", "error_id": 5}],
                                },
                            ],
                        }
                    ],
                },
            ]
        },
        "version": "3.3.9",
        "Driver Version Detected": "550.54.15",
    }
    d = read_diag("Successfully ran diagnostic for group.\n" + _styled(doc))
    assert d is not None and d.complete and d.version == "3.3.9"
    assert d.failed == (
        DiagResult(
            "Deployment", "Page Retirement/Row Remap", "GPU 3", FAIL, "GPU 3 had uncorrectable memory errors"
        ),
    )
    assert _statuses(d, "GPU Memory") == {"GPU 0": PASS, "GPU 1": "Warn"}


def test_v31_json_gpu_ids_and_warning_strings() -> None:
    doc = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Stress",
                    "tests": [
                        {
                            "name": "Targeted Power",
                            "results": [
                                {"gpu_ids": "0", "status": "Pass"},
                                {"gpu_ids": "1", "status": "Fail", "warnings": "GPU 1 did not reach 300 W"},
                            ],
                        }
                    ],
                }
            ]
        }
    }
    d = read_diag(json.dumps(doc))
    assert d is not None and d.complete
    assert d.failed == (DiagResult("Stress", "Targeted Power", "GPU 1", FAIL, "GPU 1 did not reach 300 W"),)


def test_all_pass_json_is_passed() -> None:
    doc = {"DCGM Diagnostic": {"test_categories": [V4["DCGM Diagnostic"]["test_categories"][0]]}}  # type: ignore[index]
    d = read_diag(_styled(doc), level=1)
    assert d is not None and d.passed
    assert summary(d) == "dcgmi diag level 1: all 1 tests passed"


def test_runtime_error_and_iterations() -> None:
    runtime = read_diag(
        '{"DCGM Diagnostic": {"runtime_error": "Error: Unable to complete diagnostic.", "version": "4.1"}}'
    )
    assert runtime is not None and not runtime.passed
    assert runtime.failed == (
        DiagResult("", "runtime error", ALL, FAIL, "Error: Unable to complete diagnostic."),
    )
    iterations = {"Overall Result": "Fail", "Warning": "Error: The diagnostic failed", "iterations": [V4, V4]}
    d = read_diag(_styled(iterations))
    assert d is not None and d.version == "4.2.3" and len(d.failed) == 2


def test_v4_text_table() -> None:
    """DCGM 4's table (Diag.cpp stencil): test rows, ``GPU0: Fail`` rows, a ``Warning: GPU0``
    message wrapped at 45 characters, Info rows, closed by the footer border."""
    message = "Detected XID 79 for GPU 0 Please consult the documentation for details of this XID."
    pieces = [message[i : i + 45] for i in range(0, len(message), 45)]

    def row(name: str, value: str) -> str:
        return f"| {name:<25} | {value:<46} |"

    table = [
        "Successfully ran diagnostic for group.",
        "+---------------------------+------------------------------------------------+",
        row("Diagnostic", "Result"),
        "+===========================+================================================+",
        "|-----  Metadata  ----------+------------------------------------------------|",
        row("DCGM Version", "4.2.3"),
        row("GPU Device IDs Detected", "26b9, 26b9"),
        "|-----  Deployment  --------+------------------------------------------------|",
        row("software", "Pass"),
        row("", "GPU0: Pass"),
        row("", "GPU1: Pass"),
        "+-----  Hardware  ----------+------------------------------------------------+",
        row("memory", "Fail"),
        row("", "GPU0: Fail"),
        row("Warning: GPU0", pieces[0]),
        *(row("", piece) for piece in pieces[1:]),
        row("", "GPU1: Pass"),
        row("Info: GPU1", "Allocated 1 bytes"),
        "+-----  Stress  ------------+------------------------------------------------+",
        row("targeted_stress", "Skip"),
        row("", "GPU0: Skip"),
        row("", "GPU1: Skip"),
        "+---------------------------+------------------------------------------------+",
    ]
    d = read_diag("\n".join(table) + "\n", level=3)
    assert d is not None and d.complete and not d.passed and d.version == "4.2.3"
    assert d.tests() == (("Deployment", "software"), ("Hardware", "memory"), ("Stress", "targeted_stress"))
    assert d.failed == (DiagResult("Hardware", "memory", "GPU 0", FAIL, message),)
    assert _statuses(d, "memory") == {"GPU 0": FAIL, "GPU 1": PASS}
    assert summary(d).startswith("dcgmi diag level 3: 1 of 3 tests failed: memory on GPU 0 (Detected XID 79")
    assert read_diag("".join(f"    {line}\n" for line in table), level=3) == d  # indented
    cut = read_diag("\n".join(table[:-1]) + "\n")
    assert cut is not None and not cut.complete and not cut.passed


def test_failure_line_instead_of_a_report() -> None:
    log = "Error: Unable to complete diagnostic for group 0. Return: (-30) The GPU Diagnostic returned an error.\n"
    d = read_diag(log)
    assert d is not None and d.complete and not d.passed
    assert d.failed[0].message.startswith("Error: Unable to complete diagnostic for group 0.")


def test_unknown_status_is_a_failure() -> None:
    doc = {
        "DCGM Diagnostic": {
            "test_categories": [
                {"category": "X", "tests": [{"name": "t", "results": [{"status": "Inconclusive"}]}]}
            ]
        }
    }
    d = read_diag(json.dumps(doc))
    assert d is not None and not d.passed and d.failed[0].status == "Inconclusive"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "dcgmi: command not found\n",
        '{"DCGM Diagnostic" : {\n "test_categories" : [\n',  # cut before any test
        "| Diagnostic | Result |\n",
        "+---------------------------+------------------------------------------------+\n",
    ],
)
def test_no_report(text: str) -> None:
    d = read_diag(text)
    assert d is None or not d.passed


def test_empty_complete_report_never_passes() -> None:
    d = read_diag('{"DCGM Diagnostic": {"test_categories": []}}')
    assert d is not None and d.complete and not d.passed
    assert summary(d) == "dcgmi diag: no test result in the report"


def test_summary_is_cut() -> None:
    results = tuple(DiagResult("Stress", f"test {i}", f"GPU {i}", FAIL, "x" * 500) for i in range(20))
    text = summary(Diagnosis(results, True, 4, None))
    assert len(text) <= MAX_SUMMARY and text.endswith("…")
    assert text.startswith("dcgmi diag level 4: 20 of 20 tests failed: test 0 on GPU 0 (")
