"""kubectl conventions over the whole ``nvcrectl`` command tree (every command, as registered)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from nvcre.cli.main import cli


def commands(
    group: click.Group, ctx: click.Context, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        yield " ".join((*path, name)), command
        if isinstance(command, click.Group):
            yield from commands(command, ctx, (*path, name))


def options(command: click.Command) -> dict[str, list[str]]:
    """Each option's long name -> all its names."""
    out = {}
    for param in command.params:
        if isinstance(param, click.Option):
            longs = [o for o in param.opts if o.startswith("--")]
            out[longs[0] if longs else param.opts[0]] = list(param.opts)
    return out


ALL = sorted(commands(cli, click.Context(cli)))


@pytest.mark.parametrize(("path", "command"), ALL, ids=[path for path, _ in ALL])
def test_flags_follow_kubectl(path: str, command: click.Command) -> None:
    found = options(command)
    if "--kubeconfig" in found:
        assert "--context" in found, f"{path}: --kubeconfig without --context"
    if "--output" in found:
        assert found["--output"] == ["-o", "--output"], path
    if "--namespace" in found:
        assert found["--namespace"] == ["-n", "--namespace"], path
    assert "-o" not in found and "-n" not in found, f"{path}: -o/-n without their long form"


def test_the_cluster_commands_take_the_connection_flags() -> None:
    by_path = dict(ALL)
    for path in (
        "cluster info",
        "workloadrun status",
        "workloadrun cancel",
        "certification list",
        "certification status",
        "node history",
        "fleet",
    ):
        found = options(by_path[path])
        assert {"--kubeconfig", "--context"} <= set(found), path
    for path in ("workloadrun status", "workloadrun cancel", "certification list", "certification status"):
        assert "--namespace" in options(by_path[path]), path
    for path in ("cluster info", "node history", "fleet"):
        assert "--namespace" not in options(by_path[path]), path  # nodes and their records are cluster-wide


@pytest.mark.parametrize(
    "args",
    [
        ["no-such-command"],
        ["cluster", "info", "--no-such-flag"],
        ["workloadrun", "status"],
        ["workloadrun", "cancel"],
        ["node", "history"],
        ["fleet", "extra"],
    ],
)
def test_bad_usage_exits_2_without_a_traceback(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args, prog_name="nvcrectl")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_an_unusable_kubeconfig_is_one_error_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing-kubeconfig")
    for args in (
        ["cluster", "info"],
        ["workloadrun", "status", "x"],
        ["certification", "list"],
        ["node", "history", "x"],
        ["fleet"],
    ):
        result = CliRunner().invoke(cli, [*args, "--kubeconfig", missing], prog_name="nvcrectl")
        assert result.exit_code == 1, args
        assert result.stderr.startswith("Error: cannot load kubeconfig: "), result.stderr
        assert len(result.stderr.splitlines()) == 1
