"""Every command that reads a file, fed every kind of bad input, from a path and from stdin.

Each ends with exactly one line on stderr, ``Error: <file>: <problem>``, exit status 2, never a
traceback (docs/cli.md, "Exit codes"): ``validate``, the three renders (and their
``--nodes-file``), ``analyze nccl|goodput`` (their logs and ``--profile`` files).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from nvcre.cli.main import cli
from nvcre.testing.rejections import RUN

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CORPUS = ROOT.parent / "shared" / "corpus"
NCCL_LOG = CORPUS / "nccl" / "cre-real-a100-allreduce-2node-pdt-timestamps.log"
MEGATRON_LOG = CORPUS / "megatron" / "cre-fixture-n6-full-sequence-k8s-ts-checkpoint.log"
WORKFLOW = """\
apiVersion: nvcre.nvidia.com/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  jobTemplate:
    spec:
      workload:
        trainJob: {runtimeRef: {name: rt, kind: TrainingRuntime}, trainer: {image: img, numNodes: 1}}
  orchestration: {}
"""

ALIAS_BOMB = b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n".encode() for i in range(6)
)
"""Seven lines that stand for ten million strings once their aliases are followed."""


@dataclass(frozen=True)
class Bad:
    id: str
    data: bytes
    problem: str


BAD_MANIFESTS = [
    Bad("empty", b"", "empty file"),
    Bad("whitespace", b"\n   \n", "only whitespace"),
    Bad(
        "binary", bytes(range(256)) * 4, "binary data (a NUL byte at offset 0); a manifest is UTF-8 YAML text"
    ),
    Bad("utf-16", "kind: Workflow\n".encode("utf-16"), "binary data (a NUL byte at offset 3)"),
    Bad(
        "not-utf-8", b"kind: Workflow\nmetadata: {name: caf\xe9}\n", "not UTF-8 text (byte 0xe9 at offset 35)"
    ),
    Bad(
        "malformed-yaml",
        b"kind: [unclosed\n",
        "not valid YAML (line 2, column 1): did not find expected ',' or ']'",
    ),
    Bad("tab-indented", b"kind: x\nspec:\n\tnumNodes: 1\n", "not valid YAML (line 3, column 1)"),
    Bad("yaml-list", b"- a\n- b\n", "document is a YAML list, not a Kubernetes object (a mapping)"),
    Bad("yaml-string", b"just words\n", "document is a YAML string, not a Kubernetes object (a mapping)"),
    Bad("only-separators", b"---\n---\n", "no Kubernetes objects (only empty YAML documents)"),
    Bad("alias-bomb", ALIAS_BOMB, "more than 1,000,000 values once YAML aliases are expanded"),
    Bad("self-alias", b"kind: &k [*k]\n", "more than 1,000,000 values once YAML aliases are expanded"),
]
NOT_NODES = {"yaml-list", "yaml-string"}
"""A nodes file may be a plain YAML list: these two are read, then refused as not Nodes (exit 1)."""


@dataclass(frozen=True)
class Command:
    id: str
    before: tuple[str, ...]
    after: tuple[str, ...] = ()
    directory: str = "cannot read file: Is a directory"
    missing: str = "cannot read file: No such file or directory"


NOT_A_PROFILE = (
    "neither a built-in LogProfile (megatron-bridge, megatron-training, nccl-all-reduce, nccl-bandwidth, "
    "nccl-loopback, nemo-training, nemo4) nor a file"
)


def _good_files(tmp: Path) -> dict[str, str]:
    (tmp / "wf.yaml").write_text(WORKFLOW)
    (tmp / "run.yaml").write_text(yaml.safe_dump(RUN))
    return {"WF": str(tmp / "wf.yaml"), "CERT": str(EXAMPLES / "certification" / "gpu-cluster-cert.yaml")}


MANIFEST_COMMANDS = [
    Command("validate", ("validate",), directory="a directory without .yaml or .yml files"),
    Command("workloadrun-render", ("workloadrun", "render", "--gpu-arch", "h100")),
    Command("certification-render", ("certification", "render", "--gpu-arch", "h100")),
    Command("workflow-render", ("workflow", "render", "--gpu-arch", "h100")),
    Command("workflow-render-nodes-file", ("workflow", "render", "WF", "--nodes-file")),
    Command("certification-render-nodes-file", ("certification", "render", "CERT", "--nodes-file")),
    Command(
        "analyze-nccl-profile", ("analyze", "nccl", "--profile"), (str(NCCL_LOG),), missing=NOT_A_PROFILE
    ),
    Command(
        "analyze-goodput-profile",
        ("analyze", "goodput", "--profile"),
        (str(MEGATRON_LOG),),
        missing=NOT_A_PROFILE,
    ),
]


def invoke(args: list[str], stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, args, input=stdin)


def assert_one_line(result: Result, source: str, problem: str) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {source}: "), lines[0]
    assert problem in lines[0], lines[0]


def _args(command: Command, tmp: Path, target: str) -> list[str]:
    good = _good_files(tmp)
    return [good.get(arg, arg) for arg in command.before] + [target, *command.after]


MATRIX = [
    pytest.param(command, bad, id=f"{command.id}-{bad.id}")
    for command in MANIFEST_COMMANDS
    for bad in BAD_MANIFESTS
    if not (command.id.endswith("nodes-file") and bad.id in NOT_NODES)
]


@pytest.mark.parametrize(("command", "bad"), MATRIX)
def test_a_bad_manifest_file(tmp_path: Path, command: Command, bad: Bad) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(bad.data)
    assert_one_line(invoke(_args(command, tmp_path, str(path))), str(path), bad.problem)


@pytest.mark.parametrize(("command", "bad"), MATRIX)
def test_a_bad_manifest_on_stdin(tmp_path: Path, command: Command, bad: Bad) -> None:
    assert_one_line(invoke(_args(command, tmp_path, "-"), bad.data), "<stdin>", bad.problem)


@pytest.mark.parametrize("command", MANIFEST_COMMANDS, ids=lambda c: c.id)
def test_a_missing_file_and_a_directory(tmp_path: Path, command: Command) -> None:
    missing = tmp_path / "missing.yaml"
    assert_one_line(invoke(_args(command, tmp_path, str(missing))), str(missing), command.missing)
    folder = tmp_path / "folder"
    folder.mkdir()
    assert_one_line(invoke(_args(command, tmp_path, str(folder))), str(folder), command.directory)


MALFORMED_PROFILES = [
    pytest.param(
        {"spec": [1]}, "spec: Invalid value: [1]: spec in body must be of type object", id="spec-list"
    ),
    pytest.param(
        {"spec": {"timestamp": {"layout": 5}, "patterns": {}}},
        "spec.timestamp.layout: Invalid value: 5: spec.timestamp.layout in body must be of type string",
        id="layout-number",
    ),
    pytest.param(
        {"spec": {"timestamp": {"layout": "2006-01-02"}, "patterns": {"bandwidthResult": "x"}}},
        'spec.patterns.bandwidthResult: Invalid value: "x"',
        id="pattern-string",
    ),
    pytest.param(
        {"spec": {"timestamp": {"layout": "2006-01-02"}, "patterns": {"trainingStep": {"regex": "(?P<x>"}}}},
        "spec.patterns.trainingStep.regex: missing )",
        id="regex-does-not-compile",
    ),
    pytest.param(
        {
            "spec": {
                "timestamp": {"layout": "2006-01-02"},
                "patterns": {"trainingStep": {"regex": "(?P<t>[0-9]+)", "units": ["s"]}},
            }
        },
        'spec.patterns.trainingStep.units: Invalid value: ["s"]',
        id="units-list",
    ),
]


@pytest.mark.parametrize("subcommand", ["nccl", "goodput"])
@pytest.mark.parametrize(("body", "problem"), MALFORMED_PROFILES)
def test_a_malformed_logprofile_names_its_field(
    tmp_path: Path, subcommand: str, body: dict[str, object], problem: str
) -> None:
    path = tmp_path / "profile.yaml"
    manifest = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "LogProfile",
        "metadata": {"name": "p"},
        **body,
    }
    path.write_text(yaml.safe_dump(manifest))
    log = NCCL_LOG if subcommand == "nccl" else MEGATRON_LOG
    result = invoke(["analyze", subcommand, "--profile", str(path), str(log)])
    assert_one_line(result, str(path), f"LogProfile: {problem}")


LOG_COMMANDS = [("analyze", "nccl"), ("analyze", "goodput")]
BAD_LOGS = [
    Bad("empty", b"", "empty file"),
    Bad(
        "binary",
        bytes(range(1, 256)) * 64,
        "binary data, not a text log (60% of its first 64 KiB is neither text nor NUL)",
    ),
    Bad("utf-16", "# nThread 1 nGpus 1\n".encode("utf-16"), "UTF-16 or UTF-32 text; logs are read as UTF-8"),
]


@pytest.mark.parametrize("bad", BAD_LOGS, ids=lambda b: b.id)
@pytest.mark.parametrize("command", LOG_COMMANDS, ids=" ".join)
def test_a_bad_log(tmp_path: Path, command: tuple[str, str], bad: Bad) -> None:
    path = tmp_path / "bad.log"
    path.write_bytes(bad.data)
    assert_one_line(invoke([*command, str(path)]), str(path), bad.problem)
    assert_one_line(invoke([*command, "-"], bad.data), "<stdin>", bad.problem)


@pytest.mark.parametrize("command", LOG_COMMANDS, ids=" ".join)
def test_a_missing_log_and_a_directory(tmp_path: Path, command: tuple[str, str]) -> None:
    missing = tmp_path / "missing.log"
    assert_one_line(
        invoke([*command, str(missing)]), str(missing), "cannot read file: No such file or directory"
    )
    assert_one_line(invoke([*command, str(tmp_path)]), str(tmp_path), "cannot read file: Is a directory")


@pytest.mark.parametrize(("command", "log"), [("nccl", NCCL_LOG), ("goodput", MEGATRON_LOG)])
def test_a_log_with_stray_bytes_is_read_like_the_clean_one(tmp_path: Path, command: str, log: Path) -> None:
    """Real logs hold stray bytes (a cut multi-byte character, a NUL run left by copytruncate):
    they read as U+FFFD (NULs as they are), and every line still counts."""
    clean = invoke(["analyze", command, "-o", "json", str(log)])
    assert clean.exit_code == 0, clean.output
    lines = log.read_bytes().splitlines(keepends=True)
    noise = [b"\xff\xfe caf\xe9 \x80\n" for _ in lines[::7]]
    stray = b"\0" * 4096 + b"".join(
        line + (noise[i // 7] if i % 7 == 0 else b"") for i, line in enumerate(lines)
    )
    path = tmp_path / "stray.log"
    path.write_bytes(stray)
    dirty = invoke(["analyze", command, "-o", "json", str(path)])
    assert dirty.exit_code == 0, dirty.output
    read, expected = json.loads(dirty.stdout), json.loads(clean.stdout)
    if "linesRead" in expected:  # the noise lines are lines read too, and may end the log's tail
        assert read.pop("linesRead") == expected.pop("linesRead") + len(noise)
        assert set(read.pop("logTail")) <= {*expected.pop("logTail"), "\ufffd\ufffd caf\ufffd \ufffd"}
    assert read == expected


def test_validate_reports_each_bad_file_and_still_checks_the_good_ones(tmp_path: Path) -> None:
    good = tmp_path / "run.yaml"
    good.write_text(yaml.safe_dump(RUN))
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe")
    result = invoke(["validate", str(good), str(bad), str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    assert result.stdout == f"{good}: WorkloadRun/run: OK\n"
    assert result.stderr.splitlines() == [
        f"Error: {bad}: binary data (a UTF-16 or UTF-32 byte order mark); a manifest is UTF-8 YAML text",
        f"Error: {tmp_path / 'missing.yaml'}: cannot read file: No such file or directory",
    ]


def test_validate_reads_stdin(tmp_path: Path) -> None:
    result = invoke(["validate", "-"], yaml.safe_dump(RUN).encode())
    assert (result.exit_code, result.stdout, result.stderr) == (0, "<stdin>: WorkloadRun/run: OK\n", "")
