"""Shared CLI helpers: one-line user errors, output formats, loading manifests and nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from nvcre.api.v1alpha1.workloadrun import WorkloadRun
from nvcre.cli.common import (
    UserError,
    choice,
    emit,
    load_nodes,
    load_resource,
    load_validated,
    output_option,
    render,
    user_errors,
)
from nvcre.testing import builders

RUN: dict[str, Any] = (
    builders.WorkloadRun("run")
    .image("nvcr.io/nvidia/pytorch:26.01-py3")
    .framework({"mpi": {"binary": "/bin/all_reduce_perf_mpi", "mpirunPath": "/usr/bin/mpirun"}})
    .nodes(2)
    .obj()
)


@click.command()
@click.option("--fail", default="")
@output_option(formats=("table", "json", "yaml"), default="table")
@user_errors
def demo(fail: str, output: str) -> None:
    if fail:
        raise UserError(fail)
    click.echo(f"format={output}")


def test_user_error_is_one_line_and_exit_1() -> None:
    result = CliRunner().invoke(demo, ["--fail", "first line\nsecond line"])
    assert result.exit_code == 1
    assert result.stderr == "Error: first line second line\n"
    assert result.stdout == ""


def test_output_option_formats() -> None:
    runner = CliRunner()
    assert runner.invoke(demo, []).stdout == "format=table\n"
    assert runner.invoke(demo, ["-o", "json"]).stdout == "format=json\n"
    bad = runner.invoke(demo, ["--output", "xml"])
    assert bad.exit_code == 1
    assert bad.stderr == 'Error: invalid --output "xml": must be one of table, json, yaml\n'


def test_choice() -> None:
    assert choice("a", ("a", "b"), "--x") == "a"
    with pytest.raises(UserError, match=r'^invalid --x "c": must be one of a, b$'):
        choice("c", ("a", "b"), "--x")


def test_render_yaml_and_json() -> None:
    data = {"b": 1, "a": {"script": "line1\nline2\n", "list": [1, 2]}}
    text = render(data, "yaml")
    assert text.startswith("b: 1\na:\n")  # key order kept
    assert "script: |\n" in text
    assert yaml.safe_load(text) == data
    assert json.loads(render(data, "json")) == data
    stream = render([{"a": 1}, {"b": 2}], "yaml")
    assert stream == "a: 1\n---\nb: 2\n"
    assert list(yaml.safe_load_all(stream)) == [{"a": 1}, {"b": 2}]
    assert json.loads(render([{"a": 1}], "json")) == [{"a": 1}]


def test_emit_writes_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    emit({"a": 1}, "json")
    assert json.loads(capsys.readouterr().out) == {"a": 1}


def test_load_resource_and_validated(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(RUN))
    run = load_resource(path, WorkloadRun)
    assert isinstance(run, WorkloadRun)
    assert run.name == "run"
    raw, model = load_validated(path, WorkloadRun)
    assert raw == RUN
    assert model.spec.num_nodes == 2


def test_load_resource_reports_every_finding_on_one_line(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(RUN))
    bad["spec"]["numNodes"] = 0
    bad["spec"]["bogus"] = True
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(UserError) as error:
        load_resource(path, WorkloadRun)
    message = error.value.message
    assert message.startswith(f"{path}: ")
    assert "spec.numNodes" in message
    assert "spec.bogus: Unknown field" in message
    assert "\n" not in message


def test_load_nodes_shapes(tmp_path: Path) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    other = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}}
    for name, text in {
        "list.yaml": yaml.safe_dump([node, other]),
        "nodelist.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "NodeList", "items": [node, other]}),
        "stream.yaml": yaml.safe_dump(node) + "---\n" + yaml.safe_dump(other),
    }.items():
        path = tmp_path / name
        path.write_text(text)
        assert [n["metadata"]["name"] for n in load_nodes(path)] == ["n1", "n2"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "no nodes in file"),
        ("- kind: Node\n  metadata: {}\n", "item 0: metadata.name is required"),
        ("- kind: Pod\n  metadata: {name: p}\n", "item 0 is not a Node"),
        ("- 3\n", "item 0 is not a Node"),
    ],
)
def test_load_nodes_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(content)
    with pytest.raises(UserError) as error:
        load_nodes(path)
    assert error.value.message == f"{path}: {message}"
