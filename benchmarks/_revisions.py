"""Another revision of this repository's code, for a benchmark's baseline rows."""

from __future__ import annotations

import subprocess
from pathlib import Path


def export_source(revision: str, into: Path) -> Path:
    """``src/`` of a git revision of this repository, written under ``into``."""
    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", revision, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"
