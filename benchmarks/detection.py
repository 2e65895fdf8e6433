"""How often nvcre is right: recall, healthy nodes blamed, time and GPU time to a verdict, per
fault kind, fleet and strategy, on the sandbox.

    .venv/bin/python benchmarks/detection.py [--quick] [--json PATH] [--lanes N] [--only KIND]

Each cell of the matrix is a fleet (its size and shape) with 0 to 3 faulty nodes of one kind. For
every cell and strategy one sandbox lane (nodes of its own, the cell's faults on them) runs one
Certification of the catalog's NCCL all-reduce in pairs (20 iterations, 3 sweeps: enough for the
early verdict), or, for a straggler GPU, of the catalog's Nemotron 5 8B training in pairs (50
steps), targeting its lane's nodes by name; ``--lanes`` of them at a time. The strategies:

* ``plain``: isolation and the early verdict off; a failed pair names both its nodes. This is
  the first reference, "pairs once, blame both";
* ``isolation``: the defaults (isolation and the early verdict on);
* ``diagnose``: the category's diagnose test scale (diagnose mode).

The second reference, "bisection by halving" (test the fleet, halve each failing part down to
pairs, blame both nodes of a failing pair), is modelled from the cell's faulty nodes: its rounds
and node-minutes use the measured duration of the healthy plain lane's one round.

For every lane it records what a user reads: the nodes the failed-nodes ConfigMap names (recall
of the faulty ones; healthy nodes blamed, a flaky node counting as healthy), whether a bad link
was named, the wall-clock seconds from the Certification's creation to its verdict, the extra
rounds (isolation's one, diagnose mode's rounds beyond the first) and the node-minutes of GPU time
(each Job's nodes x its running time). It prints a table and writes it as JSON. Nothing here
asserts: docs/benchmarks.md#detection has the numbers and what they show.

``--quick`` is one 16-node aws fleet (network blocks of 8), one faulty node per kind (and two and
three slow NICs); the full matrix adds 64 and 256 nodes, GB200 cliques and a fleet with no
topology labels, and 0 to 3 faulty nodes of every kind.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lightkube import Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from nvcre import resources
from nvcre.api.v1alpha1.constants import Annotation
from nvcre.api.v1alpha1.meta import parse_time
from nvcre.sandbox import control
from nvcre.sandbox.state import StateDir
from nvcre.sandbox.supervisor import Options
from nvcre.testing.inspect import failed_nodes_record, get, jobs_of, true_condition
from nvcre.testing.nodes import domain_labels

H100 = "NVIDIA-H100-80GB-HBM3"
GB200 = "NVIDIA-GB200"
SIZING = {"nodesPerJob": 2, "numIterations": 20, "numCycles": 3}
ALL_REDUCE: dict[str, Any] = {"domain": "communication", "variant": "nccl-all-reduce", "options": SIZING}
TRAINING: dict[str, Any] = {
    "domain": "training",
    "variant": "nemotron5-8b",
    # pairs, like the all-reduce lanes; the README example's pod size, so a pod fits a sandbox node
    "options": {
        "nodesPerJob": 2,
        "maxSteps": 50,
        "resources": {"limits": {"cpu": "6", "memory": "48Gi"}, "requests": {"cpu": "4", "memory": "32Gi"}},
    },
}
STRATEGIES: dict[str, dict[str, Any]] = {
    "plain": {"isolation": "Off", "earlyVerdict": "Off"},
    "isolation": {},
    "diagnose": {"testScale": "diagnose"},
}
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Fleet:
    shape: str  #: aws (network blocks), gb200 (NVLink cliques) or none (no topology labels)
    size: int
    domain: int = 8

    @property
    def platform(self) -> str:
        return {"aws": "aws", "gb200": "aws", "none": "oci"}[self.shape]

    @property
    def product(self) -> str:
        return GB200 if self.shape == "gb200" else H100


@dataclass(frozen=True)
class Kind:
    name: str
    spec: Callable[[str], str]  #: the fault on one node
    hard: bool = True  #: a fault nvcre must name (flaky: must not)
    category: dict[str, Any] = field(default_factory=lambda: ALL_REDUCE)  #: what the lane certifies


def _on(fault: str) -> Callable[[str], str]:
    return lambda node: f"{node}={fault}"


KINDS = [
    *(Kind(f"slow-nic:{f}", _on(f"slow-nic:{f}")) for f in ("0.9", "0.8", "0.6", "0.4")),
    Kind("xid:79", _on("xid:79")),
    Kind("not-ready", _on("not-ready")),
    Kind("nccl-error", _on("nccl-error")),
    Kind("hang", _on("hang@10")),  # ten seconds into the run, mid-sweep
    Kind("flaky:0.3", _on("flaky:0.3"), hard=False),
    Kind("corrupt", _on("corrupt")),
    Kind("tcp-fallback", _on("tcp-fallback")),
    Kind("slow-gpu:1.5", _on("slow-gpu:1.5"), category=TRAINING),  # a straggler GPU, in training
]
LINK = "link"


@dataclass(frozen=True)
class Cell:
    fleet: Fleet
    kind: str
    count: int


@dataclass
class Lane:
    cell: Cell
    strategy: str
    nodes: list[str]
    faulty: list[str]
    faults: list[str]
    name: str = ""
    namespace: str = ""
    created: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)


def _node(index: int) -> str:
    return f"gpu-node-{index:03d}"


def _faulty(first: int, size: int, count: int, domain: int) -> list[str]:
    """``count`` nodes of the lane in different pairs and, where there are enough, domains."""
    picks = [3, domain + 2, 2 * domain + 5 if size > 2 * domain else domain + 5][:count]
    return [_node(first + p % size) for p in picks]


def lanes_of(cells: list[Cell]) -> tuple[list[Lane], int]:
    """Every (cell, strategy) lane with its nodes and faults, and the sandbox's node count."""
    out: list[Lane] = []
    first = 0
    for cell in cells:
        for strategy in STRATEGIES:
            size, domain = cell.fleet.size, cell.fleet.domain
            if cell.kind == LINK:
                # one node of block A, the rest of block B and block C: the overflow pair crosses A-B
                nodes = [_node(first), *(_node(first + domain + i) for i in range(size - 1))]
                blocks = [
                    domain_labels(cell.fleet.platform, cell.fleet.product, first // domain + b)
                    for b in (0, 1)
                ]
                key = next(iter(blocks[0]))
                faults = [f"link:{blocks[0][key]},{blocks[1][key]}:0.3"]
                reserved = domain + size - 1
                faulty: list[str] = []
            else:
                nodes = [_node(first + i) for i in range(size)]
                kind = next(k for k in KINDS if k.name == cell.kind)
                faulty = _faulty(first, size, cell.count, domain)
                faults = [kind.spec(n) for n in faulty]
                reserved = size
                if not kind.hard:
                    faulty = []
            out.append(Lane(cell, strategy, nodes, faulty, faults))
            first += math.ceil(reserved / domain) * domain
    return out, first


def matrix(quick: bool) -> list[Cell]:
    if quick:
        fleet = Fleet("aws", 16)
        cells = [Cell(fleet, "slow-nic:0.4", 0)]  # healthy: the count is what matters
        cells += [Cell(fleet, k.name, 1) for k in KINDS]
        cells += [Cell(fleet, "slow-nic:0.4", n) for n in (2, 3)]
        return [*cells, Cell(fleet, LINK, 1)]
    cells = []
    for shape in ("aws", "gb200", "none"):
        for size in (16, 64, 256):
            fleet = Fleet(shape, size, 18 if shape == "gb200" else 8)
            cells += [Cell(fleet, k.name, n) for k in KINDS for n in range(4)]
            cells.append(Cell(fleet, LINK, 1))
    return cells


def certify(kube: Client, lane: Lane) -> None:
    lane.name = f"{lane.strategy}-{secrets.token_hex(3)}"
    lane.namespace = lane.name
    kube.create(Namespace(metadata=ObjectMeta(name=lane.namespace)))
    kind = next((k for k in KINDS if k.name == lane.cell.kind), None)
    category = kind.category if kind else ALL_REDUCE
    options = {**category["options"], **STRATEGIES[lane.strategy]}
    document = {
        "apiVersion": "nvcre.nvidia.com/v1alpha1",
        "kind": "Certification",
        "metadata": {"name": lane.name, "namespace": lane.namespace},
        "spec": {
            "target": {"nodeNames": lane.nodes},
            "categories": [{**category, "options": options}],
        },
    }
    lane.created = time.monotonic()
    kube.create(resources.Certification.from_dict(document))


def _seconds(a: str, b: str) -> float:
    return (parse_time(b) - parse_time(a)).total_seconds()


def measure(kube: Client, lane: Lane) -> dict[str, Any]:
    cert = get(kube, resources.Certification, lane.name, lane.namespace)
    found = true_condition(cert)
    (category,) = cert["status"]["categoryStatuses"]
    workflow = get(kube, resources.Workflow, category["workflowRef"]["name"], lane.namespace)
    orchestration = workflow["status"].get("orchestration") or {}
    ref = (category.get("failedNodesRef") or {}).get("name")
    entries = failed_nodes_record(kube, lane.namespace, ref) if ref else []
    blamed = sorted({e["name"] for e in entries})
    node_minutes = 0.0
    for job in jobs_of(kube, lane.namespace, workflow["metadata"]["name"]).values():
        ended = [
            c["lastTransitionTime"]
            for c in job["status"].get("conditions") or ()
            if c["type"] in TERMINAL and c["status"] == "True"
        ]
        start = job["status"].get("workloadStartTime") or job["metadata"]["creationTimestamp"]
        nodes = (job["metadata"].get("annotations") or {}).get(Annotation.GROUP_NODES, "").split(",")
        if ended:
            node_minutes += len([n for n in nodes if n]) * max(_seconds(start, ended[0]), 0.0) / 60
    diagnose = orchestration.get("diagnose") or {}
    isolation = orchestration.get("isolation") or {}
    links = [lk.get("domains") or lk.get("nodes") for lk in isolation.get("links") or ()]
    links += [f["domains"] for f in diagnose.get("infrastructureFaults") or ()]
    verdict = next(
        (
            c
            for c in cert["status"].get("conditions") or ()
            if c["type"] in TERMINAL and c["status"] == "True"
        ),
        None,
    )
    faulty = set(lane.faulty)
    return {
        "phase": found[0] if found else "?",
        "blamed": blamed,
        "recall": (len(faulty & set(blamed)) / len(faulty)) if faulty else None,
        "healthyBlamed": len(set(blamed) - faulty),
        "linkNamed": bool(links),
        "verdictSec": round(_seconds(cert["metadata"]["creationTimestamp"], verdict["lastTransitionTime"]), 1)
        if verdict
        else None,
        "extraRounds": max(int(diagnose.get("round") or 1) - 1, 0) if diagnose else (1 if isolation else 0),
        "nodeMinutes": round(node_minutes, 2),
        "evidence": [f"{e['name']}: {e['message']}" for e in entries],
    }


def bisection(lane: Lane, round_minutes: float) -> dict[str, Any]:
    """The "bisection by halving" reference, modelled: test the fleet, halve each failing part
    down to pairs (each round as long as one healthy round), blame both nodes of a failing pair."""
    faulty = set(lane.faulty)
    parts, rounds, node_minutes, blamed = [lane.nodes], 0, 0.0, set()
    while parts:
        rounds += 1
        node_minutes += sum(len(p) for p in parts) * round_minutes
        failing = [p for p in parts if faulty & set(p)]
        blamed |= {n for p in failing if len(p) <= 2 for n in p}
        parts = [h for p in failing if len(p) > 2 for h in (p[: len(p) // 2], p[len(p) // 2 :])]
    return {
        "recall": (len(faulty & blamed) / len(faulty)) if faulty else None,
        "healthyBlamed": len(blamed - faulty),
        "extraRounds": rounds - 1,
        "nodeMinutes": round(node_minutes, 2),
    }


def run_fleet(lanes: list[Lane], total: int, fleet: Fleet, concurrency: int, seed: int, speed: float) -> None:
    faults = [f for lane in lanes for f in lane.faults]
    with tempfile.TemporaryDirectory() as tmp:
        state = StateDir(Path(tmp) / "state")
        options = Options(
            nodes=total,
            platform=fleet.platform,
            product=fleet.product,
            domain_size=fleet.domain,
            faults=faults,
            seed=seed,
            speed=speed,
        )
        started = time.monotonic()
        with control.running(state, options) as record:
            print(
                f"[detection] {total} nodes up in {time.monotonic() - started:.0f}s",
                file=sys.stderr,
                flush=True,
            )
            kube = Client(KubeConfig.from_file(record.kubeconfig))
            waiting = list(lanes)
            running: list[Lane] = []
            while waiting or running:
                while waiting and len(running) < concurrency:
                    lane = waiting.pop(0)
                    certify(kube, lane)
                    running.append(lane)
                time.sleep(5)
                for lane in list(running):
                    cert = get(kube, resources.Certification, lane.name, lane.namespace)
                    found = true_condition(cert)
                    if found and found[0] in TERMINAL:
                        running.remove(lane)
                        lane.result = measure(kube, lane)
                        print(f"[detection] {row(lane)}", file=sys.stderr, flush=True)


def row(lane: Lane) -> str:
    r = lane.result
    recall = "-" if r.get("recall") is None else f"{r['recall']:.0%}"
    return (
        f"{lane.cell.fleet.shape:<5} {lane.cell.fleet.size:>4} {lane.cell.kind:<13} {lane.cell.count:>2} "
        f"{lane.strategy:<10} {recall:>6} {r.get('healthyBlamed', '-'):>7} "
        f"{'yes' if r.get('linkNamed') else '-':>4} {r.get('verdictSec', '-'):>8} "
        f"{r.get('extraRounds', '-'):>6} {r.get('nodeMinutes', '-'):>8}"
    )


HEADER = (
    f"{'fleet':<5} {'size':>4} {'fault':<13} {'#':>2} {'strategy':<10} {'recall':>6} {'healthy':>7} "
    f"{'link':>4} {'verdict':>8} {'rounds':>6} {'node-min':>8}"
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one 16-node aws fleet, one fault per kind")
    parser.add_argument("--json", type=Path, default=Path("detection.json"), help="where the rows go")
    parser.add_argument("--lanes", type=int, default=8, help="Certifications running at once")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--speed", type=float, default=4.0, help="simulated seconds a second (sandbox run's default)"
    )
    parser.add_argument(
        "--only", action="append", default=[], help="only cells of this fault kind (repeatable)"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the sandbox is torn down on the way out
    cells = [c for c in matrix(args.quick) if not args.only or c.kind in args.only]
    fleets: dict[Fleet, list[Cell]] = {}
    for cell in cells:
        fleets.setdefault(cell.fleet, []).append(cell)
    started = time.monotonic()
    every: list[Lane] = []
    for fleet, group in fleets.items():
        lanes, total = lanes_of(group)
        run_fleet(lanes, total, fleet, args.lanes, args.seed, args.speed)
        every += lanes
    print(HEADER)
    for lane in every:
        print(row(lane))
    rows = [
        {**asdict(lane.cell), "strategy": lane.strategy, "faulty": lane.faulty, **lane.result}
        for lane in every
    ]
    for fleet in fleets:
        healthy = next(
            (
                lane
                for lane in every
                if lane.cell.fleet == fleet and lane.cell.count == 0 and lane.strategy == "plain"
            ),
            None,
        )
        round_minutes = (healthy.result.get("verdictSec") or 0) / 60 if healthy else 0.0
        for lane in every:
            if lane.cell.fleet == fleet and lane.strategy == "plain" and lane.cell.kind != LINK:
                model = bisection(lane, round_minutes)
                rows.append(
                    {**asdict(lane.cell), "strategy": "bisection (modelled)", "faulty": lane.faulty, **model}
                )
                print(f"{'':<26} bisection  {model}")
    args.json.write_text(
        json.dumps({"quick": args.quick, "at": datetime.now().isoformat(), "rows": rows}, indent=1)
    )
    print(
        f"[detection] {len(every)} lanes in {time.monotonic() - started:.0f}s; rows in {args.json}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
