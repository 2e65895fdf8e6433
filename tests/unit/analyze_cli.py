"""``nvcrectl analyze`` run in-process, as the CLI tests of each log kind call it."""

from __future__ import annotations

from click.testing import CliRunner

from nvcre.cli.main import cli


def analyze(kind: str, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """``nvcrectl analyze KIND ARGS...`` (``stdin`` fed to ``-``): exit status, stdout, stderr."""
    result = CliRunner().invoke(cli, ["analyze", kind, *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr
