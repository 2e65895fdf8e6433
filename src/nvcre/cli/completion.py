"""``nvcrectl completion bash|zsh``: the shell completion script (click's shell completion)."""

from __future__ import annotations

import click

PROG_NAME = "nvcrectl"
COMPLETE_VAR = "_NVCRECTL_COMPLETE"
"""The environment variable the script sets when it asks ``nvcrectl`` for completions."""


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh"]))
@click.pass_context
def completion_command(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash:  source <(nvcrectl completion bash)      (or save it under
           /etc/bash_completion.d/nvcrectl)
    zsh:   source <(nvcrectl completion zsh)        (after compinit)
    """
    from click.shell_completion import get_completion_class

    root = ctx.find_root().command
    completion_class = get_completion_class(shell)
    if completion_class is None:  # click ships both; a stripped-down click may not
        raise click.ClickException(f"click has no {shell} completion")
    click.echo(completion_class(root, {}, PROG_NAME, COMPLETE_VAR).source(), nl=False)
