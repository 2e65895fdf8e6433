"""``nvcrectl node history NODE`` and ``nvcrectl fleet`` with click's runner, on a client that
hands back NodeRecords and Nodes (no cluster): the tables people read, the JSON and YAML programs
read, and the errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from nvcre.cli import connection
from nvcre.cli.main import cli

NCCL = "communication/nccl-all-reduce"
H100 = "NVIDIA-H100-80GB-HBM3"
AWS_BLOCK = "topology.k8s.aws/network-node-layer-1"


def ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def result(days: float, bus: float, verdict: str = "Passed", **fields: Any) -> dict[str, Any]:
    return {
        "time": ago(days),
        "run": {"kind": "Certification", "namespace": "nvcre", "name": "fleet-nccl", "uid": "c"},
        "workflow": {"namespace": "nvcre", "name": "fleet-nccl-communication-e4403", "uid": f"w{days}"},
        "group": "group-3",
        "groupSize": 2,
        "partners": ["gpu-node-006"],
        "values": {"algBandwidthGBps": round(bus / 1.875, 2), "busBandwidthGBps": bus},
        "verdict": verdict,
        **fields,
    }


def record(node: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": node},
        "spec": {"nodeName": node},
        "status": {"categories": [{"name": NCCL, "results": results}] if results else [], "summary": {}},
    }


def node(name: str, block: str = "nn-a", product: str = H100) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product, AWS_BLOCK: block},
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
    }


class _Obj:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return self.data


class Client:
    """What the commands ask of lightkube: a record by name, the records, the GPU Nodes."""

    def __init__(self, records: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        self.records = {r["metadata"]["name"]: r for r in records}
        self.nodes = nodes
        self.listed: list[tuple[str, Any]] = []

    def get(self, resource: Any, name: str, namespace: str | None = None) -> _Obj | None:
        assert resource.__name__ == "NodeRecord" and namespace is None
        found = self.records.get(name)
        return _Obj(found) if found is not None else None  # get_or_none's None: not found

    def list(self, resource: Any, labels: Any = None, chunk_size: int | None = None) -> list[_Obj]:
        assert chunk_size == 500  # paged: a fleet's records do not come in one response
        self.listed.append((resource.__name__, labels))
        if resource.__name__ == "NodeRecord":
            return [_Obj(r) for r in self.records.values()]
        wanted = labels or {}
        return [
            _Obj(n)
            for n in self.nodes
            if all(n["metadata"]["labels"].get(k) == v for k, v in wanted.items() if isinstance(v, str))
        ]


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Client:
    found = Client(
        [
            record(
                "gpu-node-007",
                [
                    result(3, 480.0),
                    result(2, 490.0),
                    result(
                        1,
                        200.09,
                        "Failed",
                        group="isolate-1",
                        partners=["gpu-node-001"],
                        reason="ThresholdViolation",
                        cause="ThresholdViolated",
                        message='Job "j" failed: Threshold "busBandwidthGBps" violated: measured 200.0900',
                    ),
                ],
            ),
            record("gpu-node-006", [result(2, 490.0), result(1, 400.0, "Failed", cause="Regression")]),
            record("gpu-node-005", [result(45, 480.0)]),
            record("gpu-node-004", [result(1, 485.0, domains=["nn-b"])]),
            record("gpu-node-003", []),
        ],
        [
            node("gpu-node-002", product="NVIDIA-B200"),
            node("gpu-node-003"),
            node("gpu-node-004"),
            node("gpu-node-005", block="nn-b"),
            node("gpu-node-006"),
            node("gpu-node-007"),
        ],
    )
    monkeypatch.setattr(connection, "client", lambda kubeconfig, context: found)
    return found


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), prog_name="nvcrectl")


def test_node_history_is_a_table_oldest_first_with_the_trend_and_the_failures_messages(
    client: Client,
) -> None:
    done = invoke("node", "history", "gpu-node-007")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[:2] == ["Node:    gpu-node-007", "State:   failing"]
    header, *rows = lines[3:6]
    assert (
        " ".join(header.split())
        == "TIME CATEGORY RUN GROUP PARTNERS BUSBW STEP-TIME GOODPUT VS-BASELINE VERDICT CAUSE"
    )
    # 490/480-1 = +2.1 %; the failed 200.09 against median(480, 490) = 485: -58.7 %
    assert [r.split()[1:] for r in rows] == [
        [
            NCCL,
            "Certification/nvcre/fleet-nccl",
            "group-3",
            "gpu-node-006",
            "480",
            "-",
            "-",
            "-",
            "Passed",
            "-",
        ],
        [
            NCCL,
            "Certification/nvcre/fleet-nccl",
            "group-3",
            "gpu-node-006",
            "490",
            "-",
            "-",
            "+2.1%",
            "Passed",
            "-",
        ],
    ]
    last = lines[6].split()
    assert last[3:] == [
        "isolate-1",
        "gpu-node-001",
        "200.09",
        "-",
        "-",
        "-58.7%",
        "Failed",
        "ThresholdViolated",
    ]
    # aligned: every column starts where its header does
    assert {line.index("Certification") for line in lines[4:7]} == {lines[3].index("RUN")}
    assert {line.index("Passed" if "Passed" in line else "Failed") for line in lines[4:7]} == {
        lines[3].index("VERDICT")
    }
    message = 'Job "j" failed: Threshold "busBandwidthGBps" violated: measured 200.0900'
    assert lines[7:] == ["", "Failures:", f"  {last[0]}  {message}"]


def test_node_history_json_and_yaml_are_the_same_document(client: Client) -> None:
    doc = json.loads(invoke("node", "history", "gpu-node-007", "-o", "json").stdout)
    assert (doc["node"], doc["state"], doc["summary"]) == ("gpu-node-007", "failing", {})
    assert [r["verdict"] for r in doc["results"]] == ["Passed", "Passed", "Failed"]
    assert doc["results"][2]["vsBaseline"] == {"busBandwidthGBps": -58.7}
    assert doc["results"][2]["baseline"] == {"busBandwidthGBps": {"value": 485.0, "results": 2}}
    assert doc["results"][2]["run"] == {"kind": "Certification", "namespace": "nvcre", "name": "fleet-nccl"}
    assert yaml.safe_load(invoke("node", "history", "gpu-node-007", "-o", "yaml").stdout) == doc


def test_node_history_of_a_node_without_a_record_names_it(client: Client) -> None:
    done = invoke("node", "history", "gpu-node-404")
    assert done.exit_code == 1
    assert done.stdout == ""
    assert done.stderr.startswith('Error: node "gpu-node-404" has no NodeRecord: ')
    assert len(done.stderr.splitlines()) == 1


def test_node_history_of_a_record_without_results(client: Client) -> None:
    done = invoke("node", "history", "gpu-node-003")
    assert done.exit_code == 0
    assert done.stdout == "Node:    gpu-node-003\nState:   never\n\nNo results recorded.\n"


def test_fleet_counts_by_domain_and_gpu_type_and_lists_the_failing_nodes(client: Client) -> None:
    done = invoke("fleet")
    assert done.exit_code == 0, done.output
    assert client.listed == [("Node", {"nvidia.com/gpu.present": "true"}), ("NodeRecord", None)]
    blocks = [b.splitlines() for b in done.stdout.split("\n\n")]
    assert blocks[0] == [
        "6 nodes: 1 certified, 1 failing, 1 regressed, 1 stale, 2 never (stale: passed over 30 days ago)"
    ]
    assert [r.split() for r in blocks[1]] == [
        ["DOMAIN", "NODES", "CERTIFIED", "FAILING", "REGRESSED", "STALE", "NEVER"],
        ["nn-a", "4", "0", "1", "1", "0", "2"],
        ["nn-b", "2", "1", "0", "0", "1", "0"],  # 004 by its result's domain, 005 by its label
    ]
    assert [r.split() for r in blocks[2]] == [
        ["GPU-TYPE", "NODES", "CERTIFIED", "FAILING", "REGRESSED", "STALE", "NEVER"],
        ["NVIDIA-B200", "1", "0", "0", "0", "0", "1"],
        [H100, "5", "1", "1", "1", "1", "1"],
    ]
    assert [r.split()[:4] for r in blocks[3]] == [
        ["NODE", "STATE", "CAUSE", "CATEGORY"],
        ["gpu-node-006", "regressed", "Regression", NCCL],
        ["gpu-node-007", "failing", "ThresholdViolated", NCCL],
    ]
    assert blocks[1][1].index("4") == blocks[1][0].index("NODES")


def test_fleet_json_and_a_selector(client: Client) -> None:
    doc = json.loads(invoke("fleet", "-o", "json", "-l", f"{AWS_BLOCK}=nn-b").stdout)
    assert client.listed[0] == ("Node", {"nvidia.com/gpu.present": "true", AWS_BLOCK: "nn-b"})
    # only gpu-node-005 carries the label: the other records are left out
    assert [(n["name"], n["state"]) for n in doc["nodes"]] == [("gpu-node-005", "stale")]
    assert doc["total"] == {"nodes": 1, "certified": 0, "failing": 0, "regressed": 0, "stale": 1, "never": 0}
    assert list(doc) == ["staleAfterDays", "total", "byDomain", "byGpuType", "nodes"]


def test_fleet_of_nothing_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "client", lambda kubeconfig, context: Client([], []))
    done = invoke("fleet")
    assert done.exit_code == 0
    assert done.stdout == (
        "0 nodes: 0 certified, 0 failing, 0 regressed, 0 stale, 0 never (stale: passed over 30 days ago)\n"
    )


def test_fleet_refuses_yaml() -> None:
    done = invoke("fleet", "-o", "yaml")
    assert done.exit_code == 1
    assert done.stderr == 'Error: invalid --output "yaml": must be one of table, json\n'
