"""Every third-party package the code imports is declared in pyproject.toml, with a lower bound."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "nvcre"
TEST_SUPPORT = SOURCE / "testing"  # may use the dev extra (it is a pytest plugin)


def requirement_names(requirements: list[str]) -> dict[str, str]:
    """Normalized distribution name -> the whole requirement."""
    names = {}
    for requirement in requirements:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert name, requirement
        names[normalize(name.group())] = requirement
    return names


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return {
        m for m in modules if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "nvcre"
    }


def owners() -> dict[Path, str]:
    """Installed file -> the distribution that installed it."""
    files = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            files[Path(str(dist.locate_file(file))).resolve()] = normalize(dist.metadata["Name"])
    return files


def distribution_of(module: str, files: dict[Path, str]) -> str:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"{module} is imported but not installed"
    return files[Path(spec.origin).resolve()]


def test_every_imported_distribution_is_declared_with_a_lower_bound() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = requirement_names(project["dependencies"])
    dev = requirement_names(project["optional-dependencies"]["dev"])
    files = owners()
    missing = []
    for path in sorted(SOURCE.rglob("*.py")):
        allowed = runtime | dev if TEST_SUPPORT in path.parents else runtime
        for module in sorted(imported_modules(path)):
            dist = distribution_of(module, files)
            if dist not in allowed:
                missing.append(f"{path.relative_to(ROOT)} imports {module} from {dist}")
    assert not missing, "undeclared dependencies:\n" + "\n".join(missing)
    unbounded = [r for r in runtime.values() if ">=" not in r]
    assert not unbounded, f"runtime dependencies without a lower bound: {unbounded}"
