"""Every benchmark of the project, one after the other, each printing its own table.

    .venv/bin/python benchmarks/run_all.py [NAME ...]

With names (e.g. ``render_workloadrun``), only those run. Benchmarks measure; nothing here
asserts a time. Quote medians: the machines they run on are shared and noisy.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(
        p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_")
    )
    if argv:
        scripts = [p for p in scripts if p.stem in argv]
    status = 0
    for script in scripts:
        print(f"\n== {script.stem}", flush=True)
        status |= subprocess.call([sys.executable, str(script)])
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
