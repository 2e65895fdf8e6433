"""What a cold ``nvcrectl`` imports: a command loads only the modules it runs (the start-up cost)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

from nvcre.api.v1alpha1 import KIND_MODULES, KINDS, kind_model
from nvcre.cli.main import cli

EXAMPLE = Path(__file__).parents[2] / "examples" / "workloadrun" / "nccl-all-reduce.yaml"


def imported_by(*args: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``nvcrectl ARGS``."""
    script = (
        "import json, sys\n"
        "from nvcre.cli.main import cli\n"
        "try:\n"
        "    cli(args=sys.argv[1:], prog_name='nvcrectl')\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True)
    modules: list[str] = json.loads(done.stderr.splitlines()[-1])
    return set(modules)


def test_help_imports_no_model_and_no_render_code() -> None:
    modules = imported_by("--help")
    assert not {"pydantic", "yaml", "nvcre.api.v1alpha1", "nvcre.render"} & modules


def test_an_offline_render_imports_neither_cel_nor_the_cluster_client_nor_other_kinds() -> None:
    modules = imported_by("workloadrun", "render", str(EXAMPLE), "--platform", "aws", "--gpu-arch", "h100")
    assert "nvcre.render.workloadrun" in modules
    unused = {
        "celpy",
        "lightkube",
        "nvcre.api.v1alpha1.certification",
        "nvcre.api.v1alpha1.measurements",
        "nvcre.api.v1alpha1.workflow",  # the Workflow it builds is not validated again
        "nvcre.api.v1alpha1.job",
        "nvcre.api.trainer.v1alpha1",
        "nvcre.cli.run_commands",
        "nvcre.cli.report_commands",
        "nvcre.crd",  # the schema it checks against is read, not generated from the models
    }
    assert not unused & modules


def test_every_kind_is_found_by_its_module_name() -> None:
    assert list(KINDS) == list(KIND_MODULES)
    for kind, model in KINDS.items():
        assert kind == model.KIND
        assert kind_model(kind) is model


def test_every_lazy_command_is_registered_under_its_own_name() -> None:
    def walk(group: click.Group, ctx: click.Context) -> int:
        count = 0
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None and command.name == name, name
            count += 1 + (walk(command, ctx) if isinstance(command, click.Group) else 0)
        return count

    assert walk(cli, click.Context(cli)) > len(KIND_MODULES)


def test_the_mcp_sdk_is_imported_by_the_server_only() -> None:
    help_modules = imported_by("mcp", "serve", "--help")
    assert "nvcre.cli.mcp_serve" in help_modules
    assert not {"mcp", "lightkube"} & help_modules
    assert "mcp" not in imported_by("analyze", "nccl", "--help")
