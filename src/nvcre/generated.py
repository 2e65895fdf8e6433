"""Folders of generated files (``config/crd``, ``config/logprofiles``): write them, or check them.

One rule for every generator: a file is stale when missing or different, a file of the folder's
suffix (``.yaml`` unless told) the generator no longer makes is removed, and ``--check`` lists
both and fails without writing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path


def sync_folder(
    directory: Path, wanted: Mapping[str, str], *, check: bool, command: str, what: str, suffix: str = ".yaml"
) -> int:
    """Make ``directory`` hold exactly ``wanted`` (file name -> text); the exit status of the tool."""
    present = {p.name for p in directory.glob(f"*{suffix}")} if directory.exists() else set()
    stale = sorted(n for n, text in wanted.items() if n not in present or (directory / n).read_text() != text)
    extra = sorted(present - set(wanted))
    if check:
        for name in stale + extra:
            print(f"{directory / name}: out of date; run `{command}`", file=sys.stderr)
        return 1 if stale or extra else 0
    directory.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (directory / name).write_text(wanted[name])
    for name in extra:
        (directory / name).unlink()
    print(f"{len(wanted)} {what} in {directory} ({len(stale)} written, {len(extra)} removed)")
    return 0
