"""How the report reads the run's NodeRecords: by name for a few nodes, one paged list for many,
and without them (a warning, the report unchanged) when the reader may not read them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status

from nvcre.cli import report_io
from nvcre.testing.fakeclient import api_error


def forbidden(message: str) -> ApiError:
    return ApiError(status=Status(code=403, reason="Forbidden", message=message))


def workflow(nodes: list[str], excluded: list[str] | None = None) -> dict[str, Any]:
    orchestration: dict[str, Any] = {"groups": [{"name": "group-0", "nodes": nodes}]}
    if excluded:
        orchestration["excludedNodes"] = excluded
    return {"metadata": {"name": "wf"}, "status": {"orchestration": orchestration}}


class Item(dict[str, Any]):
    """A record as lightkube lists it: ``metadata.name`` readable before it is converted."""

    @property
    def metadata(self) -> Any:
        return SimpleNamespace(name=self["metadata"]["name"])

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


class Records:
    """A client holding ``names``' records; records each request; ``refuse``: answers 403."""

    def __init__(self, names: list[str] | None, refuse: bool = False) -> None:
        """``names`` None: the API server does not serve the kind (404 for every request)."""
        self.records: dict[str, Item] | None = (
            None if names is None else {n: Item(metadata={"name": n}, spec={"nodeName": n}) for n in names}
        )
        self.refuse = refuse
        self.requests: list[tuple[str, Any]] = []

    def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Item:
        self.requests.append(("get", name))
        assert namespace is None, "records are cluster-scoped"
        if self.refuse:
            raise forbidden(f'noderecords.nvcre.nvidia.com "{name}" is forbidden')
        if self.records is None or name not in self.records:
            raise api_error(404)
        return self.records[name]

    def list(self, resource: Any, *, chunk_size: int | None = None) -> Any:
        self.requests.append(("list", chunk_size))
        if self.records is None:
            raise api_error(404, "the server could not find the requested resource")
        if self.refuse:
            raise forbidden("noderecords.nvcre.nvidia.com is forbidden")
        yield from (self.records or {}).values()


def test_a_few_nodes_records_are_read_by_name_and_a_missing_one_is_no_record() -> None:
    kube: Any = Records(["gpu-0", "gpu-2", "other"])
    found = report_io.node_records(kube, [workflow(["gpu-1", "gpu-0"], excluded=["gpu-2"])])
    assert [r["metadata"]["name"] for r in found or ()] == ["gpu-0", "gpu-2"]
    assert kube.requests == [("get", "gpu-0"), ("get", "gpu-1"), ("get", "gpu-2")]


def test_many_nodes_records_are_read_in_one_paged_list_keeping_the_targets() -> None:
    nodes = [f"gpu-{i:05d}" for i in range(report_io.RECORDS_BY_NAME + 1)]
    kube: Any = Records([*nodes[::2], "other"])
    found = report_io.node_records(kube, [workflow(nodes)])
    assert [r["metadata"]["name"] for r in found or ()] == nodes[::2]
    assert kube.requests == [("list", report_io.RECORDS_PER_PAGE)]


@pytest.mark.parametrize("count", [2, report_io.RECORDS_BY_NAME + 1])
def test_an_install_without_the_noderecord_kind_has_no_records_and_no_warning(
    count: int, capsys: pytest.CaptureFixture[str]
) -> None:
    kube: Any = Records(None)
    assert report_io.node_records(kube, [workflow([f"gpu-{i:05d}" for i in range(count)])]) == []
    assert capsys.readouterr().err == ""


def test_no_target_node_reads_nothing() -> None:
    kube: Any = Records(["gpu-0"])
    assert report_io.node_records(kube, [{"metadata": {"name": "wf"}}]) == []
    assert kube.requests == []


@pytest.mark.parametrize("many", [False, True])
def test_a_reader_refused_the_records_gets_a_warning_and_no_history(
    many: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = [f"gpu-{i:05d}" for i in range(report_io.RECORDS_BY_NAME + 1 if many else 2)]
    kube: Any = Records(nodes, refuse=True)
    assert report_io.node_records(kube, [workflow(nodes)]) is None
    assert len(kube.requests) == 1, "the first refusal ends the reading"
    err = capsys.readouterr().err
    assert err.startswith("Warning: cannot read noderecords: Forbidden: noderecords.nvcre.nvidia.com ")
    assert err.endswith("; the report leaves out the nodes' history\n")
