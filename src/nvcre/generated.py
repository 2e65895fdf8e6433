"""Generated files (``config/crd``, ``config/logprofiles``, the RBAC files, the tables in
docs/): write them, or check them.

One rule for every generator: a file is stale when missing or different, a file of the folder's
suffix (``.yaml`` unless told) the generator no longer makes is removed, and ``--check`` lists
them and fails without writing. A table in a doc is the text between two marker lines.
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


def sync_files(wanted: Mapping[Path, str], *, check: bool, command: str) -> int:
    """Make each file of ``wanted`` (path -> text) hold its text; the exit status of the tool."""
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
    if check:
        for path in stale:
            print(f"{path}: out of date; run `{command}`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path])
    print(f"{len(stale)} of {len(wanted)} files written")
    return 0


def between_markers(doc: str, begin: str, end: str, text: str) -> str:
    """``doc`` with what stands between the markers ``begin`` and ``end`` replaced by ``text``."""
    start, stop = doc.find(begin), doc.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"the markers {begin!r} ... {end!r} are missing")
    return doc[: start + len(begin)] + "\n" + text + doc[stop:]
