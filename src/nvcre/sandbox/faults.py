"""Faults injected per node: the spec syntax, a registry of kinds, and what each kind does.

Syntax (``--fault``, repeatable)::

    NODE=KIND[:ARG][@DELAY]        e.g. gpu-node-003=slow-nic:0.5, gpu-node-003=xid:79@30s
    link:A,B:FRACTION[@DELAY]      one bad link between node (or NVLink domain) A and B

``DELAY`` is ``90``, ``90s``, ``2m``, ``1m30s`` or ``1h``: seconds from the start of the
workload on that node until the fault strikes. Each kind is a :class:`FaultKind` in
:data:`KINDS` with hooks: bandwidth and step-time factors, what it does to a running workload
(fail or hang) and the change it makes to the Node object.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nvcre.api.v1alpha1.constants import NodeLabel
from nvcre.sandbox.model import parse_size, unit

Outcome = Literal["fail", "hang"]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_DELAY = re.compile(r"^(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?$")


class FaultSpecError(ValueError):
    """A ``--fault`` spec that does not parse; the message names the part that is wrong."""


@dataclass(frozen=True)
class Fault:
    """One injected fault. ``peer`` is set for ``link`` only (``node`` is then side A)."""

    kind: str
    node: str
    value: float | None = None
    peer: str | None = None
    delay_s: float = 0.0

    def __str__(self) -> str:
        arg = "" if self.value is None else _number(self.value)
        delay = f"@{_number(self.delay_s)}s" if self.delay_s else ""
        if self.peer is not None:
            return f"{self.kind}:{self.node},{self.peer}:{arg}{delay}"
        return f"{self.node}={self.kind}{':' + arg if arg else ''}{delay}"

    def active(self, at_s: float) -> bool:
        """Whether the fault is in force ``at_s`` seconds after the workload started."""
        return at_s >= self.delay_s


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class NodeChange:
    """What a fault changes on a Node: labels set, taints added, conditions set, GPUs removed."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    conditions: tuple[Condition, ...] = ()
    missing_gpus: int = 0


def _one(_: Fault) -> float:
    return 1.0


def _value(f: Fault) -> float:
    assert f.value is not None
    return f.value


def _no_change(_: Fault) -> NodeChange | None:
    return None


def _no_outcome(_: Fault, seed: int, attempt: int) -> Outcome | None:
    return None


def _no_wrong(_: Fault) -> int:
    return 0


@dataclass(frozen=True)
class FaultKind:
    """A registered fault kind and its hooks (defaults: no effect)."""

    name: str
    arg: str  #: the argument as the docs show it, '' for none
    summary: str
    parse_arg: Callable[[str | None], float | None]
    network: Callable[[Fault], float] = _one  #: factor on the node's network bandwidth
    nvlink: Callable[[Fault], float] = _one  #: factor on the node's NVLink bandwidth
    step_time: Callable[[Fault], float] = _one  #: factor on training step time
    outcome: Callable[[Fault, int, int], Outcome | None] = _no_outcome  #: (fault, seed, attempt)
    node_change: Callable[[Fault], NodeChange | None] = _no_change
    #: When an event strikes without ``@DELAY``: ``start`` (at once), ``collective`` (at the
    #: first collective after start-up) or ``mid`` (half way through the healthy run).
    default_at: Literal["start", "collective", "mid"] = "start"
    #: The fabric NCCL picks on the node at start-up instead of the platform's (``socket``).
    fabric: str | None = None
    #: Wrong elements per rank in each checked result from the fault's time on (data corruption).
    wrong: Callable[[Fault], int] = _no_wrong
    #: The launcher's log stops after the table row of the fault's size (its value; ``None``:
    #: half the sweep) while the program runs on to its end.
    log_cut: bool = False
    #: Whether the pods of a group with the node have their log served through the API.
    log_served: bool = True


KINDS: dict[str, FaultKind] = {}


def register(kind: FaultKind) -> FaultKind:
    """Add ``kind`` to :data:`KINDS` (a name may be registered once)."""
    if kind.name in KINDS:
        raise ValueError(f"fault kind {kind.name!r} is already registered")
    KINDS[kind.name] = kind
    return kind


def _fraction(arg: str | None) -> float:
    value = _float(arg, "a fraction")
    if not 0.0 < value <= 1.0:
        raise FaultSpecError(f"argument {arg!r} must be a fraction in (0, 1]")
    return value


def _factor(arg: str | None) -> float:
    value = _float(arg, "a factor")
    if value < 1.0:
        raise FaultSpecError(f"argument {arg!r} must be a slowdown factor >= 1")
    return value


def _probability(arg: str | None) -> float:
    value = _float(arg, "a probability")
    if not 0.0 <= value <= 1.0:
        raise FaultSpecError(f"argument {arg!r} must be a probability in [0, 1]")
    return value


def _count(arg: str | None) -> float:
    if arg is None or not arg.isdigit() or int(arg) < 1:
        raise FaultSpecError(f"argument {arg!r} must be a whole number >= 1")
    return float(int(arg))


def _optional_count(arg: str | None) -> float | None:
    return None if arg is None else _count(arg)


def _optional_size(arg: str | None) -> float | None:
    if arg is None:
        return None
    try:
        return float(parse_size(arg))
    except ValueError:
        raise FaultSpecError(f"argument {arg!r} is not a size (8, 512M, 16G)") from None


def _none(arg: str | None) -> float | None:
    if arg is not None:
        raise FaultSpecError(f"takes no argument, got {arg!r}")
    return None


def _float(arg: str | None, what: str) -> float:
    if arg is None:
        raise FaultSpecError(f"needs {what} argument (KIND:{what.split()[-1].upper()})")
    try:
        value = float(arg)
    except ValueError:
        raise FaultSpecError(f"argument {arg!r} is not {what}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise FaultSpecError(f"argument {arg!r} is not {what}")
    return value


#: XID code -> what the driver's message says (NVIDIA's XID catalogue).
XID_DESCRIPTIONS: dict[int, str] = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "Unrecovered ECC error",
}
#: XIDs after which the GPU stops making progress (the workload hangs until killed).
FATAL_XIDS = frozenset({43, 48, 74, 79, 94, 95, 119, 120, 140})

#: The signals health agents write (see docs/sandbox.md): NVSentinel's condition, a
#: ``gpu.health/error`` taint and gpud's label, so each documented CEL expression matches.
HEALTH_CONDITION = "NVSentinelGPUHealthy"
HEALTH_TAINT = "gpu.health/error"
HEALTH_LABEL = "gpud.nvidia.com/unhealthy"


def _xid_change(f: Fault) -> NodeChange:
    code = int(_value(f))
    what = XID_DESCRIPTIONS.get(code, "Unknown XID")
    return NodeChange(
        labels={HEALTH_LABEL: "true"},
        taints=(Taint(HEALTH_TAINT, f"xid-{code}", "NoSchedule"),),
        conditions=(Condition(HEALTH_CONDITION, "False", f"XID{code}", f"GPU 0: XID {code} ({what})"),),
    )


def _xid_outcome(f: Fault, seed: int, attempt: int) -> Outcome | None:
    return "hang" if int(_value(f)) in FATAL_XIDS else None


def _flaky_outcome(f: Fault, seed: int, attempt: int) -> Outcome | None:
    return "fail" if unit(seed, "flaky", f.node, attempt) < _value(f) else None


def _xid_code(arg: str | None) -> float:
    value = _count(arg)
    if value > 999:
        raise FaultSpecError(f"argument {arg!r} is not an XID code (1-999)")
    return value


for _kind in (
    FaultKind(
        "slow-nic",
        "<fraction>",
        "the node's network gets that fraction of its bandwidth",
        _fraction,
        network=_value,
    ),
    FaultKind(
        "slow-nvlink",
        "<fraction>",
        "the node's NVLink gets that fraction of its bandwidth",
        _fraction,
        nvlink=_value,
    ),
    FaultKind(
        "slow-gpu",
        "<factor>",
        "training steps on the node take that many times longer",
        _factor,
        step_time=_value,
    ),
    FaultKind(
        "nccl-error",
        "",
        "the workload fails with an NCCL network error naming the node (exit 3)",
        _none,
        outcome=lambda f, s, a: "fail",
        default_at="collective",
    ),
    FaultKind(
        "hang",
        "",
        "no progress after start-up (the pod runs until killed)",
        _none,
        outcome=lambda f, s, a: "hang",
        default_at="collective",
    ),
    FaultKind(
        "xid",
        "<code>",
        "a health agent marks the node (condition, taint, label) mid-run; fatal XIDs stop the workload",
        _xid_code,
        outcome=_xid_outcome,
        node_change=_xid_change,
        default_at="mid",
    ),
    FaultKind(
        "not-ready",
        "",
        "the node's kubelet stops reporting mid-run (Ready=Unknown); the workload stops",
        _none,
        outcome=lambda f, s, a: "hang",
        node_change=lambda f: NodeChange(
            conditions=(
                Condition("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."),
            )
        ),
        default_at="mid",
    ),
    FaultKind(
        "missing-gpus",
        "<n>",
        "the node advertises n fewer GPUs (capacity, allocatable, nvidia.com/gpu.count)",
        _count,
        node_change=lambda f: NodeChange(missing_gpus=int(_value(f))),
    ),
    FaultKind(
        "link",
        "<A>,<B>:<fraction>",
        "the link between nodes (or domains) A and B gets that fraction of its bandwidth",
        _fraction,
        network=_value,
    ),
    FaultKind(
        "corrupt",
        "[<n>]",
        "nccl-tests finds n wrong elements (default 1) per rank in every checked result: "
        "non-zero #wrong, Out of bounds values FAILED, exit 7",
        _optional_count,
        wrong=lambda f: int(f.value or 1),
    ),
    FaultKind(
        "tcp-fallback",
        "",
        "NCCL on the node uses sockets instead of the platform's network (Using network Socket)",
        _none,
        fabric="socket",
    ),
    FaultKind(
        "truncate",
        "[<size>]",
        "the launcher's log stops after the row of that size (default: half the sweep), no footer; exit 0",
        _optional_size,
        log_cut=True,
    ),
    FaultKind(
        "no-log",
        "",
        "the logs of a group's pods are not served through the API (kubectl logs fails)",
        _none,
        log_served=False,
    ),
    FaultKind(
        "flaky",
        "<probability>",
        "each attempt fails with that probability (an NCCL error); a retry may clear it",
        _probability,
        outcome=_flaky_outcome,
        default_at="collective",
    ),
):
    register(_kind)


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def parse_delay(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``2m``, ``1m30s`` or ``1h``."""
    match = _DELAY.match(text)
    if text and text.replace(".", "", 1).isdigit():
        return float(text)
    if not text or match is None or not any(match.groupdict().values()):
        raise FaultSpecError(f"delay {text!r} is not a duration like 30s, 2m or 1m30s")
    h, m, s = (match.group(k) for k in ("h", "m", "s"))
    return int(h or 0) * 3600.0 + int(m or 0) * 60.0 + float(s or 0)


def _node(name: str, what: str) -> str:
    if not _NAME.match(name):
        raise FaultSpecError(f"{what} {name!r} is not a node name (lower-case letters, digits, '-', '.')")
    return name


def parse_fault(spec: str) -> Fault:
    """One ``--fault`` value as a :class:`Fault`; :class:`FaultSpecError` names what is wrong."""
    body, at, delay_text = spec.partition("@")
    delay = parse_delay(delay_text) if at else 0.0
    if body.startswith("link:"):
        rest = body[len("link:") :]
        pair, colon, fraction = rest.rpartition(":")
        if not colon or "," not in pair:
            raise FaultSpecError(f"{spec!r}: link needs link:<A>,<B>:<fraction>")
        a, _, b = pair.partition(",")
        a, b = _node(a, "link end"), _node(b, "link end")
        if a == b:
            raise FaultSpecError(f"{spec!r}: a link needs two different ends, got {a!r} twice")
        return Fault("link", a, KINDS["link"].parse_arg(fraction), peer=b, delay_s=delay)
    node, eq, rest = body.partition("=")
    if not eq:
        raise FaultSpecError(f"{spec!r}: expected NODE=KIND[:ARG][@DELAY] or link:A,B:FRACTION")
    _node(node, "node")
    name, colon, arg = rest.partition(":")
    kind = KINDS.get(name)
    if kind is None or name == "link":
        raise FaultSpecError(f"{spec!r}: unknown fault kind {name!r}; known: {', '.join(sorted(KINDS))}")
    try:
        value = kind.parse_arg(arg if colon else None)
    except FaultSpecError as err:
        raise FaultSpecError(f"{spec!r}: {name} {err}") from None
    return Fault(name, node, value, delay_s=delay)


def parse_faults(specs: Iterable[str]) -> tuple[Fault, ...]:
    """Every spec parsed, in order."""
    return tuple(parse_fault(s) for s in specs)


def on_node(faults: Iterable[Fault], node: str) -> list[Fault]:
    """The faults that belong to ``node`` (``link`` faults excluded)."""
    return [f for f in faults if f.node == node and f.peer is None]


def factor(
    faults: Iterable[Fault], node: str, hook: Literal["network", "nvlink", "step_time"], at_s: float
) -> float:
    """The product of ``hook`` over ``node``'s faults in force ``at_s`` into the run."""
    result = 1.0
    for f in on_node(faults, node):
        if f.active(at_s):
            result *= getattr(KINDS[f.kind], hook)(f)
    return result


def fallback_fabric(faults: Iterable[Fault], node: str, at_s: float) -> str | None:
    """The fabric ``node``'s NCCL falls back to ``at_s`` into the run, ``None`` if it uses its own."""
    return next(
        (KINDS[f.kind].fabric for f in on_node(faults, node) if KINDS[f.kind].fabric and f.active(at_s)), None
    )


def wrong_elements(faults: Iterable[Fault], node: str, at_s: float) -> int:
    """How many elements per rank ``node``'s GPUs get wrong in a result ``at_s`` into the run."""
    return max((KINDS[f.kind].wrong(f) for f in on_node(faults, node) if f.active(at_s)), default=0)


def log_cut(faults: Iterable[Fault], nodes: Iterable[str]) -> Fault | None:
    """The fault that cuts the launcher's log of a group of ``nodes`` short, if one does."""
    names = set(nodes)
    return next((f for f in faults if f.node in names and f.peer is None and KINDS[f.kind].log_cut), None)


def log_served(faults: Iterable[Fault], nodes: Iterable[str]) -> bool:
    """Whether the logs of a group of ``nodes`` are served through the API."""
    names = set(nodes)
    return not any(f.node in names and f.peer is None and not KINDS[f.kind].log_served for f in faults)


def node_change(faults: Iterable[Fault], node: str, *, at_s: float | None = None) -> NodeChange:
    """The combined Node change of ``node``'s faults (only those active ``at_s``, if given)."""
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    conditions: list[Condition] = []
    missing = 0
    for f in on_node(faults, node):
        change = KINDS[f.kind].node_change(f)
        if change is None or (at_s is not None and not f.active(at_s)):
            continue
        labels.update(change.labels)
        taints += [t for t in change.taints if t not in taints]
        conditions += change.conditions
        missing += change.missing_gpus
    return NodeChange(labels, tuple(taints), tuple(conditions), missing)


def link_factor(faults: Iterable[Fault], sides: Sequence[tuple[str, str | None]], at_s: float) -> float:
    """The worst ``link`` fraction between two of ``sides`` ((node, domain) pairs) ``at_s``."""

    def matches(end: str, side: tuple[str, str | None]) -> bool:
        return end in side

    worst = 1.0
    for f in faults:
        if f.peer is None or not f.active(at_s):
            continue
        peer = f.peer
        a = [i for i, s in enumerate(sides) if matches(f.node, s)]
        b = [i for i, s in enumerate(sides) if matches(peer, s)]
        if any(i != j for i in a for j in b):
            worst = min(worst, _value(f))
    return worst


def apply_node_change(node: Mapping[str, Any], change: NodeChange, *, now: str) -> dict[str, Any]:
    """A copy of the Node object ``node`` (a dict) with ``change`` applied; ``now`` is RFC 3339.

    Labels are set, taints added once, conditions replaced by type, and ``nvidia.com/gpu``
    capacity, allocatable and the ``nvidia.com/gpu.count`` label lowered by the missing GPUs.
    """
    out: dict[str, Any] = copy.deepcopy(dict(node))
    labels = out.setdefault("metadata", {}).setdefault("labels", {})
    labels.update(change.labels)
    spec = out.setdefault("spec", {})
    taints = list(spec.get("taints") or [])
    for t in change.taints:
        if not any(x.get("key") == t.key and x.get("effect") == t.effect for x in taints):
            taints.append({"key": t.key, "value": t.value, "effect": t.effect})
    if taints:
        spec["taints"] = taints
    status = out.setdefault("status", {})
    if change.conditions:
        replaced = {c.type for c in change.conditions}
        kept = [c for c in status.get("conditions") or [] if c.get("type") not in replaced]
        status["conditions"] = kept + [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            for c in change.conditions
        ]
    if change.missing_gpus:
        for key in ("capacity", "allocatable"):
            resources = status.setdefault(key, {})
            have = int(resources.get(NodeLabel.GPU_RESOURCE, "0"))
            resources[NodeLabel.GPU_RESOURCE] = str(max(0, have - change.missing_gpus))
        if "nvidia.com/gpu.count" in labels:
            labels["nvidia.com/gpu.count"] = str(
                max(0, int(labels["nvidia.com/gpu.count"]) - change.missing_gpus)
            )
    return out


#: The ``Ready`` condition a node gets back when the fault that changed it is cleared: what
#: kwok (and a kubelet) report for a healthy node.
READY = Condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")


def revert_node_change(node: Mapping[str, Any], change: NodeChange, *, now: str) -> dict[str, Any]:
    """A copy of the Node object ``node`` without what ``change`` wrote, as a health agent
    leaves a repaired node: its labels removed, its taints removed (by key and effect), its
    conditions removed but ``Ready``, which becomes ``True`` again (:data:`READY`), and the
    missing GPUs advertised again."""
    out: dict[str, Any] = copy.deepcopy(dict(node))
    labels = out.setdefault("metadata", {}).setdefault("labels", {})
    for key in change.labels:
        labels.pop(key, None)
    spec = out.setdefault("spec", {})
    gone = {(t.key, t.effect) for t in change.taints}
    taints = [t for t in spec.get("taints") or [] if (t.get("key"), t.get("effect")) not in gone]
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)
    status = out.setdefault("status", {})
    types = {c.type for c in change.conditions}
    if types:
        kept = [c for c in status.get("conditions") or [] if c.get("type") not in types]
        if READY.type in types:
            kept.append(
                {
                    "type": READY.type,
                    "status": READY.status,
                    "reason": READY.reason,
                    "message": READY.message,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            )
        status["conditions"] = kept
    if change.missing_gpus:
        for key in ("capacity", "allocatable"):
            resources = status.setdefault(key, {})
            have = int(resources.get(NodeLabel.GPU_RESOURCE, "0"))
            resources[NodeLabel.GPU_RESOURCE] = str(have + change.missing_gpus)
        if "nvidia.com/gpu.count" in labels:
            labels["nvidia.com/gpu.count"] = str(int(labels["nvidia.com/gpu.count"]) + change.missing_gpus)
    return out


__all__ = [
    "FATAL_XIDS",
    "HEALTH_CONDITION",
    "HEALTH_LABEL",
    "HEALTH_TAINT",
    "KINDS",
    "READY",
    "XID_DESCRIPTIONS",
    "Condition",
    "Fault",
    "FaultKind",
    "FaultSpecError",
    "NodeChange",
    "Outcome",
    "Taint",
    "apply_node_change",
    "factor",
    "fallback_fabric",
    "link_factor",
    "log_cut",
    "log_served",
    "node_change",
    "on_node",
    "parse_delay",
    "parse_fault",
    "parse_faults",
    "register",
    "revert_node_change",
    "wrong_elements",
]
