"""Running ``nvcrectl`` in-process, as the unit tests of its commands do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from nvcre.cli.main import cli


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str]:
    """``nvcrectl args``: its exit code and output. A failed assertion inside the command (a test's
    stand-in refusing what the command reached for) fails the test, rather than being an error."""
    result = CliRunner().invoke(cli, list(args), input=stdin)
    assert not isinstance(result.exception, AssertionError), result.output
    return result.exit_code, result.output


def write_yaml(path: Path, document: dict[str, Any]) -> Path:
    """``document`` written to ``path`` as YAML, for a command to read."""
    path.write_text(yaml.safe_dump(document))
    return path
