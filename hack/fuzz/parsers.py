"""Coverage-guided fuzzing of the log parsers with atheris (``pip install -e '.[fuzz]'``).

    python hack/fuzz/parsers.py nccl    -atheris_runs=200000
    python hack/fuzz/parsers.py goodput -max_total_time=60
    python hack/fuzz/parsers.py profile -max_total_time=60

Each target feeds arbitrary bytes through exactly what a controller runs on a log (or, for
``profile``, on a LogProfile); any exception other than the documented ``ProfileError`` is a
crash and stops the run with the input that caused it. The corpus logs (a copy of them) seed the mutations.
Beyond these runs the tests fuzz the same code with hypothesis on every CI run.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from nvcre.measure.builtin import builtin_profiles
    from nvcre.measure.goodput import GoodputParser, finish, observe
    from nvcre.measure.nccl import Aggregate, Parser
    from nvcre.measure.profile import ProfileError, compile_profile

PROFILES = {str(p["metadata"]["name"]): compile_profile(p) for p in builtin_profiles()}
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
NOW = datetime(2026, 2, 5, 18, tzinfo=UTC)


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines()


def nccl(data: bytes) -> None:
    for name in ("nccl-bandwidth", "nccl-loopback"):
        parser, aggregate = Parser(PROFILES[name]), Aggregate()
        for line in _lines(data):
            aggregate.add(parser.parse_line(line))
        aggregate.results()


def goodput(data: bytes) -> None:
    for name in ("megatron-training", "nemo-training", "megatron-bridge"):
        profile = PROFILES[name]
        window = GoodputParser(profile).feed_all(_lines(data))
        status = observe({}, window, now=NOW, log_interval=profile.log_interval)
        result = float(finish(status, "Succeeded", anchor=NOW).get("result") or 0)
        assert 0.0 <= result <= 1.0, result


def profile(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    pattern = provider.ConsumeUnicodeNoSurrogates(200)
    layout = provider.ConsumeUnicodeNoSurrogates(40) or "2006"
    example = provider.ConsumeUnicodeNoSurrogates(100)
    spec = {
        "timestamp": {"layout": layout},
        "patterns": {"trainingStep": {"regex": pattern, "example": example}},
    }
    try:
        compiled = compile_profile({"metadata": {"name": "fuzz"}, "spec": spec})
    except ProfileError:
        return
    compiled.parse_time(provider.ConsumeUnicodeNoSurrogates(60))


TARGETS: dict[str, tuple[Callable[[bytes], None], str]] = {
    "nccl": (nccl, "nccl"),
    "goodput": (goodput, "megatron"),
    "profile": (profile, ""),
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(TARGETS)}}} [libFuzzer flags]")
    target, seeds = TARGETS[sys.argv[1]]
    argv = [sys.argv[0], *sys.argv[2:]]
    if seeds and (CORPUS / seeds).is_dir():  # a copy: libFuzzer adds what it finds to the folder
        argv.append(
            str(shutil.copytree(CORPUS / seeds, Path(tempfile.mkdtemp(prefix="nvcre-fuzz-")) / seeds))
        )
    atheris.Setup(argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
