"""Coverage-guided fuzzing of ``nvcrectl``'s file-reading commands with atheris.

    python hack/fuzz/cli.py manifests -max_total_time=600 -timeout=10
    python hack/fuzz/cli.py analyze   -max_total_time=600 -timeout=10
    python hack/fuzz/cli.py cel       -max_total_time=600 -timeout=10

``manifests`` feeds arbitrary bytes, as a file or on stdin, to ``validate``, the three renders
and ``analyze --profile``; ``analyze`` feeds them as a log (with a fuzzed ``--threshold``) to
``analyze nccl`` and ``analyze goodput``; ``cel`` compiles and evaluates arbitrary threshold,
node-health and override expressions. A crash is any exception other than the documented
clean endings: ``SystemExit`` with status 0, 1 or 2 for a command, ``CELError`` for an
expression. A hang is an input that runs past ``-timeout`` seconds. The examples, the built-in
LogProfiles and the corpus logs (copies of them) seed the mutations.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["nvcre"]):
    # the commands import their modules when they run: import them here to have them instrumented
    import nvcre.cli.analyze
    import nvcre.cli.certification
    import nvcre.cli.validate
    import nvcre.cli.workflow
    import nvcre.cli.workloadrun  # noqa: F401
    from nvcre import cel
    from nvcre.cli.main import cli
    from nvcre.health.nodes import with_defaults
    from nvcre.render.overrides import OverrideContext

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"
WORK = Path(tempfile.mkdtemp(prefix="nvcre-fuzz-cli-"))
INPUT = WORK / "input"
CLEAN_EXITS = (0, 1, 2)

MANIFEST_COMMANDS = (
    ("validate",),
    ("workloadrun", "render", "--gpu-arch", "h100"),
    ("workloadrun", "render", "--platform", "aws", "--gpu-arch", "h100"),
    ("certification", "render", "--gpu-arch", "h100"),
    ("workflow", "render", "--gpu-arch", "h100"),
    ("workflow", "render", "--platform", "aws", "--gpu-arch", "h100"),
    (
        "analyze",
        "nccl",
        str(CORPUS / "nccl" / "cre-real-a100-allreduce-2node-pdt-timestamps.log"),
        "--profile",
    ),
    (
        "analyze",
        "goodput",
        str(CORPUS / "megatron" / "cre-fixture-n6-full-sequence-k8s-ts-checkpoint.log"),
        "--profile",
    ),
)
LOG_COMMANDS = (
    ("analyze", "nccl"),
    ("analyze", "goodput"),
    ("analyze", "goodput", "--profile", "nemo-training"),
)
THRESHOLD_KEYS = ("busBandwidthGBps", "algBandwidthGBps", "goodputRatio", "avgTFLOPsPerGPU", "avgStepTimeSec")


def _invoke(args: list[str], data: bytes, stdin: bool) -> None:
    """Run ``nvcrectl ARGS`` on ``data`` (the last file argument, or stdin); raise on a crash."""
    if stdin:
        result = CliRunner().invoke(cli, [*args, "-"], input=data)
    else:
        INPUT.write_bytes(data)
        result = CliRunner().invoke(cli, [*args, str(INPUT)])
    error = result.exception
    if error is None:
        return
    if isinstance(error, SystemExit) and error.code in CLEAN_EXITS:
        return
    raise AssertionError(f"nvcrectl {' '.join(args)} ended with {error!r}") from error


def _choice(data: bytes, back: int, count: int) -> int:
    """A choice taken from the input's last bytes, so that the whole input (a seed manifest or
    log as it is) stays the file's content."""
    return data[-back] % count if len(data) >= back else 0


def manifests(data: bytes) -> None:
    command = MANIFEST_COMMANDS[_choice(data, 1, len(MANIFEST_COMMANDS))]
    _invoke(list(command), data, stdin=_choice(data, 2, 2) == 1)


def analyze(data: bytes) -> None:
    command = list(LOG_COMMANDS[_choice(data, 1, len(LOG_COMMANDS))])
    key = _choice(data, 3, len(THRESHOLD_KEYS) + 1)
    if key < len(THRESHOLD_KEYS):
        command += ["--threshold", f"{THRESHOLD_KEYS[key]}=value >= 1"]
    _invoke(command, data, stdin=_choice(data, 2, 2) == 1)


SAMPLES = (
    {"value": 487.7},
    {"node": with_defaults({"metadata": {"name": "n", "labels": {"a": "b"}}})},
    OverrideContext(platform="aws", gpu_architecture="h100", domain_count=2).cel_variables(),
)


def expressions(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    variables = SAMPLES[provider.ConsumeIntInRange(0, len(SAMPLES) - 1)]
    try:
        cel.compile_expression(provider.ConsumeUnicodeNoSurrogates(sys.maxsize)).evaluate(variables)
    except cel.CELError:
        return


def _seeds(target: str) -> Path:
    """A folder of seed inputs (copies: libFuzzer adds what it finds to it)."""
    seeds = WORK / "seeds"
    seeds.mkdir()
    if target == "manifests":
        sources = [*ROOT.glob("examples/*/*.yaml"), *ROOT.glob("src/nvcre/measure/profiles/*.yaml")]
    elif target == "analyze":
        sources = [p for p in CORPUS.glob("*/*.log") if p.stat().st_size < 256 * 1024]
    else:
        sources = []
    for index, source in enumerate(sources):
        shutil.copyfile(source, seeds / f"{index:03}-{source.name}")
    return seeds


TARGETS: dict[str, Callable[[bytes], None]] = {"manifests": manifests, "analyze": analyze, "cel": expressions}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [libFuzzer flags]")
    target = sys.argv[1]
    seeds = _seeds(target)
    argv = [sys.argv[0], *sys.argv[2:]]
    if any(seeds.iterdir()):
        argv.append(str(seeds))
    atheris.Setup(argv, TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
