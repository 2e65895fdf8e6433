"""nvcre's nccl-tests table reader (the built-in ``nccl-bandwidth`` profile) over every nccl-tests
log of the shared corpus: each figure the log states, both halves and the footers included.

Each figure was checked by hand against the log text; they are listed in
tests/data/nccl-corpus-expected.yaml. Files are read where they are
(``../shared/corpus/nccl``), never copied. A row is ``(sizeBytes, algBW, busBW, inPlaceAlgBW,
inPlaceBusBW, samples)``; ``peak`` is (busBandwidthGBps, algBandwidthGBps), the maximum over sizes;
``oob`` the ``Out of bounds values`` footer; ``hosts`` the number of host names of the device list.
The same table shape checks the project's own real logs (tests/data/nccl, test_measure_nccl_logs.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nvcre.testing.nccl_cases import check, load_cases

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl"

CASES = load_cases(Path(__file__).resolve().parents[1] / "data" / "nccl-corpus-expected.yaml")


def test_every_corpus_file_is_a_case() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.log")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_log(name: str) -> None:
    check(CORPUS / name, CASES[name])
