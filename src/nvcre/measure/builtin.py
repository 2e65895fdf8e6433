"""The built-in LogProfiles shipped with nvcre (cluster-scoped; installed by setup and the sandbox)."""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml


def builtin_profiles() -> list[dict[str, Any]]:
    """Every built-in LogProfile manifest, by file name (``measure/profiles/<name>.yaml``)."""
    folder = resources.files("nvcre.measure") / "profiles"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    return [yaml.safe_load(f.read_text()) for f in files]
