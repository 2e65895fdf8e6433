"""``dcgmi diag`` (DCGM 4.5) on a simulated node: the command line as dcgmi parses it, the tests
each run level runs, and the JSON document ``--json`` prints at the end, with the exit status.

Everything here follows DCGM 4.5.2's source (github.com/NVIDIA/DCGM, tag ``v4.5.2``):

- the command line is ``CommandLineParser::ProcessDiagCommandLine`` (``dcgmi/CommandLineParser.cpp``),
  parsed by TCLAP: an unknown or repeated flag, or a flag without its value, prints ``PARSE
  ERROR: ...`` and exits 1 (``DCGMOutput::failure``, ``dcgmi/NvcmTCLAP.h``); a value refused after
  parsing (``-r 7``, ``--iterations 0``, a ``-p`` without ``=``) prints ``Error: ...`` and ``An
  error occurred trying to parse the command line.`` and exits 254 (``main`` returns -2);
- the tests of a level are ``NvidiaValidationSuite::FillTestVectors`` (``nvvs/src/
  NvidiaValidationSuite.cpp``), run in ``TestFramework::Go``'s order (software, then the hardware,
  integration and performance classes), each category listed when its first test runs;
- the document is ``Diag::HelperJsonBuildOutput`` (``dcgmi/Diag.cpp``) with the key names of
  ``nvvs/include/NvvsJsonStrings.h``, written by jsoncpp 1.9.6's ``toStyledString`` (tabs, sorted
  keys, ``"key" : value``, every array on lines of its own);
- the exit status is ``Diag::GetFailureResult``: an error on a GPU (or in the software test) is
  ``DCGM_ST_NVVS_ERROR`` (-30, exit 226), or ``DCGM_ST_NVVS_ISOLATE_ERROR`` (-51, exit 205) when
  one error's priority (``dcgmlib/src/dcgm_errors.c``) is ISOLATE;
- messages are the ``DCGM_FR_*`` formats of ``dcgmlib/dcgm_errors.h`` followed by their next
  steps, as ``DcgmError::SetFullError`` joins them.

The faults a diag sees (:func:`findings`) are documented in docs/sandbox.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nvcre.sandbox.faults import Fault, on_node
from nvcre.sandbox.model import NodeModel, noise, unit

DCGM_VERSION = "4.5.2"
DRIVER_VERSION = "590.44.01"  #: the driver of CUDA 13.1 (the nccl-tests logs' cudaDriverVersion 13010)

#: ``main`` returns the ``dcgmReturn_t``; the shell sees it modulo 256.
EXIT_PARSE = 1  #: TCLAP's ``failure``: ``ExitException(1)``
EXIT_BAD_ARGUMENT = 254  #: a ``CmdLineParseException`` after parsing: ``main`` returns -2
EXIT_BADPARAM = 255  #: ``DCGM_ST_BADPARAM`` (-1)
EXIT_NVVS_ERROR = 226  #: ``DCGM_ST_NVVS_ERROR`` (-30): a test failed
EXIT_ISOLATE = 205  #: ``DCGM_ST_NVVS_ISOLATE_ERROR`` (-51): a failure that says to isolate the GPU
EXIT_NO_TEST = 198  #: ``DCGM_ST_NVVS_NO_AVAILABLE_TEST`` (-58)

#: ``DcgmFieldsGetEntityGroupString(DCGM_FE_GPU)`` and ``DCGM_FE_GPU``.
GPU_GROUP, GPU_GROUP_ID = "GPU", 1

DEPLOYMENT, HARDWARE, INTEGRATION, STRESS = "Deployment", "Hardware", "Integration", "Stress"


@dataclass(frozen=True)
class Plugin:
    """One diagnostic test: its category (``nvvs/include/PluginStrings.h``) and how long it runs
    on the simulated node: ``seconds``, or its ``test_duration`` parameter (the plugin's default
    ``duration``) plus ``seconds`` of set-up."""

    name: str
    category: str
    seconds: float
    duration: float | None = None


#: The ``test_duration`` defaults are the plugins' own (diagnostic 180 s, memtest 600 s, targeted
#: stress 30 s, targeted power 120 s); the other times are estimates that make level 2 last about
#: two minutes and level 3 about a quarter of an hour, as ``dcgmi diag --help`` says of them.
PLUGINS: dict[str, Plugin] = {
    p.name: p
    for p in (
        Plugin("software", DEPLOYMENT, 8.0),
        Plugin("memory", HARDWARE, 35.0),
        Plugin("diagnostic", HARDWARE, 15.0, 180.0),
        Plugin("nvbandwidth", HARDWARE, 120.0),
        Plugin("memtest", STRESS, 10.0, 600.0),
        Plugin("pulse_test", HARDWARE, 60.0),
        Plugin("pcie", INTEGRATION, 90.0),
        Plugin("memory_bandwidth", STRESS, 60.0),
        Plugin("targeted_stress", STRESS, 15.0, 30.0),
        Plugin("targeted_power", STRESS, 30.0, 120.0),
    )
}

#: The tests after ``software`` at each level, in the order NVVS runs them: the hardware class
#: (memory; diagnostic and nvbandwidth from 3; memtest and pulse_test at 4), the integration class
#: (pcie), the performance class (memory_bandwidth, targeted_stress, targeted_power from 3). EUD
#: (root and its package) and nccl_tests (``DCGM_NCCL_TESTS_BIN_PATH`` on the host engine) are not
#: installed on the simulated nodes, so they are not run, as on a host without them.
LEVELS: dict[int, tuple[str, ...]] = {
    1: (),
    2: ("memory", "pcie"),
    3: (
        "memory",
        "diagnostic",
        "nvbandwidth",
        "pcie",
        "memory_bandwidth",
        "targeted_stress",
        "targeted_power",
    ),
    4: (
        "memory",
        "diagnostic",
        "nvbandwidth",
        "memtest",
        "pulse_test",
        "pcie",
        "memory_bandwidth",
        "targeted_stress",
        "targeted_power",
    ),
}
SUITES = {"quick": 1, "short": 1, "medium": 2, "long": 3, "xlong": 4}

#: The fault kinds that stop a diag: it makes no more progress, prints nothing and runs until
#: killed (any other kind's outcome is an NCCL failure, which a diag never meets, or an XID, which
#: it reports).
STOPPED_BY = frozenset({"hang", "not-ready"})

#: The seconds before the first test: the host engine starts NVVS, which loads its plugins.
STARTUP_S = 6.0


@dataclass(frozen=True)
class Sku:
    """What DCGM's ``nvvs/diag-skus.yaml`` says of a GPU: its PCI device id and the targeted
    stress level (GFLOP/s) a healthy one reaches."""

    device_id: str
    target_stress: float


SKUS: dict[str, Sku] = {
    "NVIDIA-H100-80GB-HBM3": Sku("2330", 29250.0),
    "NVIDIA-H200": Sku("2335", 37500.0),
    "NVIDIA-A100-SXM4-80GB": Sku("20b2", 6975.0),
    "NVIDIA-B200": Sku("2901", 36949.0),
    "NVIDIA-B300-SXM6-AC": Sku("3182", 36825.0),
    "NVIDIA-GB200": Sku("2941", 15225.0),
    "NVIDIA-GB300": Sku("31c2", 48750.0),
    "NVIDIA-L40S": Sku("26b9", 30000.0),
    "NVIDIA-L40": Sku("26b5", 30000.0),
    "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition": Sku("2bb5", 54543.0),
}
#: ``targeted_stress.target_perf_min_ratio``'s default: a GPU fails below this share of its target.
TARGET_PERF_MIN_RATIO = 0.95

#: XIDs of an uncorrectable ECC error: the row remapper has a remapping pending afterwards.
ECC_XIDS = frozenset({48, 63, 64, 94, 95, 140})

SYSTEM_TRIAGE_MSG = "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
CONFIG_MSG = (
    "Check DCGM and system configuration. This error may be eliminated with an updated configuration."
)

# dcgmErrorSeverity_t and dcgmErrorCategory_t (dcgmlib/dcgm_errors.h).
MONITOR, ISOLATE, TRIAGE, CONFIG, RESET = 1, 2, 4, 5, 6
EC_PERF_THRESHOLD, EC_SOFTWARE_CONFIG, EC_SOFTWARE_XID, EC_HARDWARE_MEMORY = 1, 3, 5, 10


@dataclass(frozen=True)
class DiagError:
    """One ``DcgmError`` as the response carries it: ``gpu`` ``None`` for one on no entity."""

    code: int  #: ``DCGM_FR_*``: the JSON's ``error_id``
    category: int
    severity: int
    message: str  #: the message and its next steps
    gpu: int | None = 0


def xid_error(code: int, gpu: int = 0) -> DiagError:
    """``DcgmRecorder::FormatFieldViolationError`` for an XID a test saw: XID 95 has its own
    ``DCGM_FR_UNCONTAINED_ERROR`` (81, ISOLATE), any other ``DCGM_FR_XID_ERROR`` (101, TRIAGE)."""
    if code == 95:
        return DiagError(
            81,
            EC_SOFTWARE_XID,
            ISOLATE,
            "GPU had an uncontained error (XID 95) Drain the GPU and reset it or reboot the node.",
            gpu,
        )
    return DiagError(
        101,
        EC_SOFTWARE_XID,
        TRIAGE,
        f"Detected XID {code} for GPU {gpu} Please consult the documentation for details of this XID.",
        gpu,
    )


def pending_row_remap(gpu: int = 0) -> DiagError:
    """The software test's Page Retirement/Row Remap check (``Software::checkRowRemapping``)."""
    return DiagError(
        85,
        EC_HARDWARE_MEMORY,
        RESET,
        f"GPU {gpu} had memory errors and row remappings are pending {SYSTEM_TRIAGE_MSG}",
        gpu,
    )


def stress_level(achieved: float, target: float, gpu: int = 0) -> DiagError:
    """``DCGM_FR_STRESS_LEVEL`` (50): targeted stress below its target (``TargetedStress_wrapper.cpp``)."""
    return DiagError(
        50,
        EC_PERF_THRESHOLD,
        TRIAGE,
        f"Max stress level of {achieved:.1f} did not reach desired stress level of {target:.1f} for GPU {gpu} "
        f"{SYSTEM_TRIAGE_MSG}",
        gpu,
    )


#: ``DCGM_FR_TEST_DISABLED`` as nvbandwidth adds it as information when it is not allowed.
NVBANDWIDTH_DISABLED = f"The nvbandwidth test is skipped. {CONFIG_MSG}"

# --- the command line -----------------------------------------------------------------------


class DiagCommandError(ValueError):
    """dcgmi refused the command line: what it printed on stderr and its exit status."""

    def __init__(self, lines: Sequence[str], exit_code: int) -> None:
        super().__init__("\n".join(lines))
        self.lines = tuple(lines)
        self.exit_code = exit_code


@dataclass(frozen=True)
class _Flag:
    short: str  #: '' for a long-only flag
    long: str
    kind: str  #: ``switch``, ``value``, ``uint``, ``multi``


_FLAGS = (
    _Flag("r", "run", "value"),
    _Flag("g", "group", "uint"),
    _Flag("", "host", "value"),
    _Flag("p", "parameters", "multi"),
    _Flag("c", "configfile", "value"),
    _Flag("f", "fakeGpuList", "value"),
    _Flag("", "gpuList", "value"),
    _Flag("n", "expectedNumEntities", "value"),
    _Flag("v", "verbose", "switch"),
    _Flag("", "statsonfail", "switch"),
    _Flag("", "debugLogFile", "value"),
    _Flag("", "statspath", "value"),
    _Flag("d", "debugLevel", "value"),
    _Flag("j", "json", "switch"),
    _Flag("", "train", "switch"),
    _Flag("", "throttle-mask", "value"),
    _Flag("", "clocksevent-mask", "value"),
    _Flag("", "fail-early", "switch"),
    _Flag("", "check-interval", "uint"),
    _Flag("", "iterations", "uint"),
    _Flag("i", "entity-id", "value"),
    _Flag("t", "timeout", "uint"),
    _Flag("", "watch-frequency", "uint"),
    _Flag("", "ignoreErrorCodes", "value"),
    _Flag("", "enable-heartbeat", "switch"),
    _Flag("h", "help", "switch"),
)
_BY_SHORT = {f"-{f.short}": f for f in _FLAGS if f.short}
_BY_LONG = {f"--{f.long}": f for f in _FLAGS}


@dataclass(frozen=True)
class Diag:
    """A ``dcgmi diag`` command line as dcgmi reads it."""

    tests: tuple[str, ...]  #: the tests after ``software``, in the order NVVS runs them
    level: int | None  #: 1-4 for a run level or suite, ``None`` for named tests
    json: bool = False
    verbose: bool = False
    host: str = "localhost"
    params: Mapping[str, str] = field(default_factory=dict)  #: ``test.name`` -> value
    entity_ids: str = "*,cpu:*"
    iterations: int = 1
    help: bool = False
    unknown: tuple[str, ...] = ()  #: requested test names NVVS does not have

    def param(self, test: str, name: str) -> str | None:
        return self.params.get(f"{test}.{name}")


def _arg_id(flag: _Flag) -> str:
    """TCLAP's ``Arg::toString``: ``-r (--run)``, or ``(--host)``."""
    return (f"-{flag.short} " if flag.short else "") + f"(--{flag.long})"


def _parse_error(arg_id: str, message: str) -> DiagCommandError:
    """``DCGMOutput::failure``: the error, then the usage pointer (the short usage lines between
    are left out), exit 1."""
    return DiagCommandError(
        [
            f"PARSE ERROR: {arg_id}",
            f"             {message}",
            "",
            "Usage: ",
            "",
            "For complete USAGE and HELP type: ",
            "   dcgmi diag --help",
            "",
        ],
        EXIT_PARSE,
    )


def _refused(message: str, arg: str = "") -> DiagCommandError:
    """A ``CmdLineParseException`` after parsing, as ``ProcessCommandLine`` and ``main`` print it."""
    where = f" for arg {arg}" if arg else ""
    return DiagCommandError(
        [f"Error: {message}{where}.", "An error occurred trying to parse the command line."],
        EXIT_BAD_ARGUMENT,
    )


def _compare_name(name: str) -> str:
    """``TestFramework::GetCompareName``: lower case, spaces as underscores."""
    return name.lower().replace(" ", "_")


def _tests(run: str) -> tuple[tuple[str, ...], int | None, tuple[str, ...]]:
    """(tests, level, unknown names) of ``-r``'s value (``dcgm_diag_common_populate_run_diag``
    and ``NvidiaValidationSuite::DistributeTests``)."""
    if len(run) <= 1:
        if run not in ("1", "2", "3", "4"):
            raise _refused(f"Invalid value '{run}' specified for -r.")
        return LEVELS[int(run)], int(run), ()
    names = sorted({n for n in run.split(",") if n})  # NVVS keeps the requested names in a std::set
    levels = [SUITES[n.lower()] for n in names if n.lower() in SUITES]
    if levels:
        return LEVELS[max(levels)], max(levels), ()
    known = [n for n in names if _compare_name(n) in PLUGINS and _compare_name(n) != "software"]
    unknown = tuple(n for n in names if n not in known)
    return tuple(dict.fromkeys(_compare_name(n) for n in known)), None, unknown


def parse_diag(argv: Sequence[str]) -> Diag | None:
    """The ``dcgmi diag`` run ``argv`` starts, ``None`` if ``argv`` is not ``dcgmi diag``;
    :class:`DiagCommandError` for a command line dcgmi refuses."""
    if not argv or argv[0].rsplit("/", 1)[-1] != "dcgmi" or len(argv) < 2 or argv[1] != "diag":
        return None
    values: dict[str, str] = {}
    multi: list[str] = []
    switches: set[str] = set()
    i = 2
    while i < len(argv):
        word = argv[i]
        if word == "--":
            break
        flag = _BY_LONG.get(word) or _BY_SHORT.get(word)
        if flag is None and re.fullmatch(r"-[vjh]{2,}", word):  # TCLAP's combined switches
            for char in word[1:]:
                switch = _BY_SHORT[f"-{char}"]
                if switch.long in switches:
                    raise _parse_error(f"Argument: {_arg_id(switch)}", "Argument already set!")
                switches.add(switch.long)
            i += 1
            continue
        if flag is None:
            raise _parse_error(f"Argument: {word}", "Couldn't find match for argument")
        if flag.kind == "switch":
            if flag.long in switches:
                raise _parse_error(f"Argument: {_arg_id(flag)}", "Argument already set!")
            switches.add(flag.long)
            i += 1
            continue
        if i + 1 >= len(argv):
            raise _parse_error(f"Argument: {_arg_id(flag)}", "Missing a value for this argument!")
        value = argv[i + 1]
        if flag.kind == "multi":
            multi.append(value)
        elif flag.long in values:
            raise _parse_error(f"Argument: {_arg_id(flag)}", "Argument already set!")
        elif flag.kind == "uint" and not re.fullmatch(r"\s*[+-]?\d+.*", value):
            raise _parse_error(
                f"Argument: {_arg_id(flag)}", f"Couldn't read argument value from string '{value}'"
            )
        else:
            values[flag.long] = value
        i += 2
    if "help" in switches:
        return Diag((), None, help=True)
    if "train" in switches:
        raise _refused("Specifying training is no longer supported and this code has been removed.")
    run = values.get("run", "1")
    if re.match(r"\s*-\d", run):
        raise _refused("Positive value expected, negative value found", "run")
    if "gpuList" in values and "group" in values:
        raise _refused("Specifying a group id and a gpu list are mutually exclusive")
    if "gpuList" in values and "entity-id" in values:
        raise _refused("Specifying a entity id and a gpu list are mutually exclusive")
    if "entity-id" in values and "group" in values:
        raise _refused("Specifying a group id and a entity id are mutually exclusive")
    iterations = int(_number(values.get("iterations"), 1))  # a number: TCLAP read it
    if iterations == 0:
        raise _refused("The value for iterations cannot be 0.")
    if "check-interval" in values and "fail-early" not in switches:
        raise _refused("The --fail-early option must be enabled", "check-interval")
    tests, level, unknown = _tests(run)
    params: dict[str, str] = {}
    tokens = [t for p in multi for t in p.split(";") if t]
    for token in tokens:
        if "=" not in token:
            raise _refused(
                f"Improperly formatted parameters argument: '{';'.join(multi)}'. Argument must follow the format: "
                "test_name.attr_name=attr_value[;...]"
            )
        key, _, value = token.partition("=")
        test, dot, name = key.partition(".")
        params[f"{_compare_name(test)}{dot}{name}"] = value
    return Diag(
        tests=tests,
        level=level,
        json="json" in switches,
        verbose="verbose" in switches,
        host=values.get("host", "localhost"),
        params=params,
        entity_ids=values.get("gpuList") or values.get("entity-id", "*,cpu:*"),
        iterations=iterations,
        unknown=unknown,
    )


# --- the run --------------------------------------------------------------------------------


def _number(text: str | None, default: float) -> float:
    """``std::stof``: the number the text starts with (``1200s`` is 1200)."""
    match = re.match(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", text or "")
    return float(match.group()) if match else default


@dataclass(frozen=True)
class Step:
    """One test of the run: when it starts and ends (simulated seconds after dcgmi started)."""

    name: str
    start_s: float
    end_s: float


def timeline(diag: Diag, node: NodeModel, seed: int) -> list[Step]:
    """The tests of one diag on ``node`` with their times: software from the start (NVVS starting
    up included), then each test for its ``test_duration`` (``-p`` overrides it) plus set-up, or
    its own run time, within a few percent (a hash of seed, node and test)."""
    steps: list[Step] = []
    clock = 0.0
    for name in ("software", *diag.tests):
        plugin = PLUGINS[name]
        seconds = plugin.seconds * noise(0.05, seed, "dcgm", node.name, name)
        if plugin.duration is not None:
            seconds += _number(diag.param(name, "test_duration"), plugin.duration)
        if name == "software":
            seconds += STARTUP_S
        elif name == "nvbandwidth" and not _allowed(diag, node):
            seconds = 0.5
        steps.append(Step(name, clock, clock + seconds))
        clock += seconds
    return steps


def _allowed(diag: Diag, node: NodeModel) -> bool:
    """nvbandwidth runs where ``-p nvbandwidth.is_allowed=true`` (or the SKU file) allows it; the
    plugin's default is false and the SKU file allows it on H100."""
    value = diag.param("nvbandwidth", "is_allowed")
    if value is None:
        return node.gpu.product == "NVIDIA-H100-80GB-HBM3"
    return value.strip().lower() in ("true", "1", "yes")


def gpu_ids(diag: Diag, gpus: int) -> list[int] | str:
    """The GPUs ``-i`` selects of the node's ``gpus`` (``cpu:`` entities are ignored: the
    simulated nodes have no CPU the diag tests), or the parser's error."""
    chosen: list[int] = []
    for item in (t.strip() for t in diag.entity_ids.split(",")):
        kind, colon, ident = item.rpartition(":")
        if colon and kind.lower() == "cpu":
            continue
        if colon and kind.lower() != "gpu":
            return f"Error: Expected numerical entityId instead of {item}"
        if ident == "*":
            chosen += range(gpus)
        elif ident.isdigit():
            chosen.append(int(ident))
        else:
            return f"Error: Expected numerical entityId instead of {ident}"
    return sorted(set(chosen))


def findings(
    diag: Diag,
    node: NodeModel,
    faults: Sequence[Fault],
    steps: Sequence[Step],
    seed: int,
    strike: Callable[[Fault], float],
) -> dict[str, list[DiagError]]:
    """The errors each test reports on the node under ``faults`` (``strike``: when an event fault
    strikes, in seconds after dcgmi started):

    - ``xid:CODE``: the test running when it strikes reports it on GPU 0, since each test checks
      the XIDs logged since it started (``DcgmRecorder::CheckXIDs``): ``Detected XID CODE for GPU
      0`` (101), or for XID 95 ``GPU had an uncontained error (XID 95)`` (81, ISOLATE). The software
      test watches no XID; an ECC XID (48, 63, 64, 94, 95, 140) during it leaves a row remapping
      pending, which its Page Retirement/Row Remap check reports (85);
    - ``slow-gpu:F``: targeted_stress reaches 1/F of its healthy stress level on GPU 0 and fails
      below ``target_perf_min_ratio`` (0.95) of the SKU's target (50). The diagnostic test's GFLOP/s
      check compares GPUs only with ``diagnostic.gflops_tolerance_pcnt`` set (default 0: off).

    Other kinds change nothing a single-node diag measures (``missing-gpus`` lowers the GPUs it
    sees; ``hang`` and ``not-ready`` stop it, see :mod:`nvcre.sandbox.simulate`).
    """
    found: dict[str, list[DiagError]] = {}
    by_name = {s.name: s for s in steps}
    for f in on_node(faults, node.name):
        if f.kind == "xid" and f.value is not None:
            code, at = int(f.value), strike(f)
            step = next((s for s in steps if s.start_s <= at < s.end_s), None)
            if step is None:
                continue
            if step.name != "software":
                found.setdefault(step.name, []).append(xid_error(code))
            elif code in ECC_XIDS:
                found.setdefault("software", []).append(pending_row_remap())
        elif f.kind == "slow-gpu" and f.value is not None and "targeted_stress" in by_name:
            step = by_name["targeted_stress"]
            if not f.active(step.start_s):
                continue
            sku = SKUS.get(node.gpu.product, SKUS["NVIDIA-H100-80GB-HBM3"])
            target = _number(diag.param("targeted_stress", "target_stress"), sku.target_stress)
            ratio = _number(diag.param("targeted_stress", "target_perf_min_ratio"), TARGET_PERF_MIN_RATIO)
            achieved = target * (1.01 + 0.03 * unit(seed, "dcgm-stress", node.name)) / f.value
            if achieved < ratio * target:
                found.setdefault("targeted_stress", []).append(stress_level(achieved, target))
    return found


@dataclass(frozen=True)
class DiagRun:
    """What one ``dcgmi diag`` prints and how it ends."""

    lines: tuple[tuple[str, str], ...]  #: (stream, text), all printed at ``end_s``
    end_s: float
    exit_code: int
    first_s: float  #: when the first test after software starts
    errors: Mapping[str, tuple[DiagError, ...]] = field(default_factory=dict)


def _status(errors: Sequence[DiagError], gpu: int) -> str:
    return "Fail" if any(e.gpu == gpu for e in errors) else "Pass"


def _warnings(errors: Sequence[DiagError]) -> list[dict[str, object]]:
    return [
        {"error_category": e.category, "error_id": e.code, "error_severity": e.severity, "warning": e.message}
        for e in errors
    ]


def document(
    diag: Diag, node: NodeModel, gpus: Sequence[int], found: Mapping[str, Sequence[DiagError]], seed: int
) -> dict[str, Any]:
    """The JSON document ``Diag::HelperJsonBuildOutput`` builds for one run."""
    sku = SKUS.get(node.gpu.product, SKUS["NVIDIA-H100-80GB-HBM3"])
    categories: dict[str, list[dict[str, object]]] = {}
    for name in ("software", *diag.tests):
        errors = [e for e in found.get(name, ()) if e.gpu is None or e.gpu in gpus]
        skipped = name == "nvbandwidth" and not _allowed(diag, node)
        results: list[dict[str, object]] = []
        for gpu in gpus:
            result: dict[str, object] = {
                "entity_group": GPU_GROUP,
                "entity_group_id": GPU_GROUP_ID,
                "entity_id": gpu,
                "status": "Skip" if skipped else _status(errors, gpu),
            }
            mine = [e for e in errors if e.gpu == gpu]
            if mine:
                result["warnings"] = _warnings(mine)
            results.append(result)
        summary: dict[str, object] = {"status": "Skip" if skipped else ("Fail" if errors else "Pass")}
        if errors:
            summary["warnings"] = _warnings(errors)
        if skipped:
            summary["info"] = [NVBANDWIDTH_DISABLED]
        categories.setdefault(PLUGINS[name].category, []).append(
            {"name": name, "results": results, "test_summary": summary}
        )
    return {
        "DCGM Diagnostic": {
            "test_categories": [{"category": c, "tests": tests} for c, tests in categories.items()],
        },
        "entity_groups": [
            {
                "entities": [
                    {
                        "device_id": sku.device_id,
                        "entity_id": gpu,
                        "serial_num": _serial(seed, node.name, gpu),
                    }
                    for gpu in gpus
                ],
                "entity_group": GPU_GROUP,
                "entity_group_id": GPU_GROUP_ID,
            }
        ],
        "metadata": {"Driver Version Detected": DRIVER_VERSION, "version": DCGM_VERSION},
    }


def _serial(seed: int, node: str, gpu: int) -> str:
    return f"1{int(unit(seed, 'serial', node, gpu) * 1e12):012d}"


def exit_status(found: Mapping[str, Sequence[DiagError]]) -> int:
    """``Diag::GetFailureResult``: 205 when an error's priority is ISOLATE, 226 for any other
    error on a GPU or in the software test, 0 without one."""
    errors = [e for errs in found.values() for e in errs]
    if any(e.severity == ISOLATE for e in errors):
        return EXIT_ISOLATE
    return EXIT_NVVS_ERROR if errors else 0


def _failure_document(message: str) -> dict[str, Any]:
    """``Diag::HelperDisplayFailureMessage`` with ``--json``."""
    return {"DCGM Diagnostic": {"runtime_error": message, "version": DCGM_VERSION}}


def run_diag(
    diag: Diag,
    node: NodeModel,
    gpus: int,
    faults: Sequence[Fault],
    seed: int,
    strike: Callable[[Fault, float, float], float],
) -> DiagRun:
    """The diag on ``node`` (``gpus`` it sees) under ``faults``: ``strike(fault, first, end)`` says
    when an event fault strikes in a run whose first test after software starts at ``first`` and
    which ends at ``end`` (as every simulated workload decides it)."""
    if diag.help:
        return DiagRun((("stdout", "diag -- Used to run diagnostics on the system."),), 0.2, 0, 0.0)
    ids = gpu_ids(diag, gpus)
    if isinstance(ids, str):
        return _refusal(diag, f"Error: {ids}\n", EXIT_BADPARAM, 0.5)
    if any(i >= gpus for i in ids):
        missing = ",".join(str(i) for i in ids if i >= gpus)
        message = (
            f"Error: Unable to complete diagnostic for entities {missing}. "
            "Return: (-1) : Bad parameter passed to function\n"
        )
        return _refusal(diag, message, EXIT_BADPARAM, 2.0)
    if diag.unknown:
        message = (
            f"Error: Unable to complete diagnostic for entities {diag.entity_ids}. Return: (-58) : "
            "Requested tests were not found among possible test choices.\n"
        )
        return _refusal(diag, message, EXIT_NO_TEST, STARTUP_S)
    steps = timeline(diag, node, seed)
    end = steps[-1].end_s
    first = steps[1].start_s if len(steps) > 1 else steps[0].start_s
    found = findings(diag, node, faults, steps, seed, lambda f: strike(f, first, end))
    doc = document(diag, node, ids, found, seed)
    code = exit_status(found)
    runs = 1 if diag.iterations == 1 or code else diag.iterations  # a failure ends the loop
    text = _output(diag, doc, code, runs)
    end *= runs
    lines = tuple(("stdout", line) for line in text.split("\n")[:-1])
    return DiagRun(lines, end, code, first, {k: tuple(v) for k, v in found.items()})


#: ``errorString`` of the statuses a diag ends with.
_ERROR_STRINGS = {
    EXIT_NVVS_ERROR: "DCGM GPU Diagnostic returned an error",
    EXIT_ISOLATE: "The diagnostic returned an error that indicates the need to drain the GPU",
}


def _output(diag: Diag, doc: Mapping[str, Any], code: int, runs: int) -> str:
    """What dcgmi prints for ``runs`` iterations of ``doc`` (``Diag::RunStartDiag``): one document
    (or table); with ``--iterations`` the documents under ``iterations`` and the overall result,
    or each table after ``Running iteration i of n...`` and the verdict."""
    if diag.iterations == 1:
        return styled(doc) if diag.json else table(doc, diag.verbose)
    if diag.json:
        wrapper: dict[str, Any] = {"iterations": [doc] * runs, "Overall Result": "Fail" if code else "Pass"}
        if code:
            wrapper["warning"] = _ERROR_STRINGS[code]
        return styled(wrapper) + "\n"
    text = "".join(
        f"\nRunning iteration {i + 1} of {diag.iterations}...\n" + table(doc, diag.verbose)
        for i in range(runs)
    )
    if code:
        return (
            text + f"Aborting the iterative runs of the diagnostic due to failure: {_ERROR_STRINGS[code]}\n"
        )
    return text + f"Passed all {diag.iterations} runs of the diagnostic\n"


def _refusal(diag: Diag, message: str, code: int, at: float) -> DiagRun:
    text = styled(_failure_document(message)) if diag.json else message + "\n"
    return DiagRun(tuple(("stdout", line) for line in text.split("\n")[:-1]), at, code, at)


# --- output ---------------------------------------------------------------------------------


def styled(value: object) -> str:
    """``Json::Value::toStyledString`` of jsoncpp 1.9.6: ``BuiltStyledStreamWriter`` with a tab
    for indentation and comments kept (so every non-empty array is written over several lines),
    members in key order, ``" : "`` after a key, then a newline."""
    out: list[str] = []
    _write(value, out, "", indented=True)
    return "".join(out) + "\n"


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _write(value: object, out: list[str], indent: str, *, indented: bool) -> None:
    """One value; ``indented``: the writer's ``indented_`` (a container's opening bracket then
    goes on the current line)."""
    if isinstance(value, Mapping) and value:
        out.append("{" if indented else f"\n{indent}{{")
        inner = indent + "\t"
        for key in sorted(value):
            out.append(f"\n{inner}{_scalar(str(key))} : ")
            _write(value[key], out, inner, indented=False)
            out.append(",")
        out.pop()
        out.append(f"\n{indent}}}")
    elif isinstance(value, list) and value:
        out.append("[" if indented else f"\n{indent}[")
        inner = indent + "\t"
        for item in value:
            out.append(f"\n{inner}")
            _write(item, out, inner, indented=True)
            out.append(",")
        out.pop()
        out.append(f"\n{indent}]")
    elif isinstance(value, Mapping):
        out.append("{}")
    elif isinstance(value, list):
        out.append("[]")
    else:
        out.append(_scalar(value))


_RULE = "+---------------------------+------------------------------------------------+"
_HEADER = (
    _RULE,
    "| Diagnostic                | Result                                         |",
    _RULE.replace("-", "="),
)
_SECTIONS = {
    "Metadata": "|-----  Metadata  ----------+------------------------------------------------|",
    DEPLOYMENT: "|-----  Deployment  --------+------------------------------------------------|",
    HARDWARE: "+-----  Hardware  ----------+------------------------------------------------+",
    INTEGRATION: "+-----  Integration  -------+------------------------------------------------+",
    STRESS: "+-----  Stress  ------------+------------------------------------------------+",
}


def _cell(text: str, width: int) -> str:
    """``CommandOutputController::ReplaceTag``: padded to the tag's width, or cut with ``...``."""
    return text.ljust(width) if len(text) <= width else text[: width - 3] + "..."


def _row(name: str, info: str) -> str:
    return f"| {_cell(name, 25)} | {_cell(info, 46)} |"


def _wrapped(name: str, message: str) -> list[str]:
    """``Diag::DisplayVerboseInfo``: the message in pieces of 45 characters, the name on the first."""
    text = message.strip()
    return [_row(name if i == 0 else "", text[i : i + 45]) for i in range(0, len(text), 45)]


def table(doc: Mapping[str, Any], verbose: bool = False) -> str:
    """What dcgmi prints without ``--json`` (``Diag::HelperDisplayAsCli``): the header, the
    metadata, then the Deployment, Hardware, Integration and Stress categories (in that order),
    each test's result, the global warnings (and with ``--verbose`` the information), then one
    row per entity with its warnings."""
    meta = doc["metadata"]
    lines = ["Successfully ran diagnostic for group.", *_HEADER, _SECTIONS["Metadata"]]
    lines.append(_row("DCGM Version", meta["version"]))
    lines.append(_row("Driver Version Detected", meta["Driver Version Detected"]))
    for group in doc["entity_groups"]:
        ids = ", ".join(e["device_id"] for e in group["entities"])
        lines.append(_row(f"{group['entity_group']} Device IDs Detected", ids))
    categories = {c["category"]: c["tests"] for c in doc["DCGM Diagnostic"]["test_categories"]}
    for category in (DEPLOYMENT, HARDWARE, INTEGRATION, STRESS):
        if category not in categories:
            continue
        lines.append(_SECTIONS[category])
        for test in categories[category]:
            summary = test["test_summary"]
            lines.append(_row(test["name"], summary["status"]))
            if verbose:
                lines += [row for info in summary.get("info", ()) for row in _wrapped("Info", info)]
            for result in test["results"]:
                entity = f"{result['entity_group']}{result['entity_id']}"
                lines.append(_row("", f"{entity}: {result['status']}"))
                for warning in result.get("warnings", ()):
                    lines += _wrapped(f"Warning: {entity}", warning["warning"])
    lines.append(_RULE)
    return "\n".join(lines) + "\n"


__all__ = [
    "DCGM_VERSION",
    "EXIT_BADPARAM",
    "EXIT_BAD_ARGUMENT",
    "EXIT_ISOLATE",
    "EXIT_NO_TEST",
    "EXIT_NVVS_ERROR",
    "EXIT_PARSE",
    "LEVELS",
    "PLUGINS",
    "SKUS",
    "STOPPED_BY",
    "Diag",
    "DiagCommandError",
    "DiagError",
    "DiagRun",
    "Step",
    "document",
    "exit_status",
    "findings",
    "parse_diag",
    "run_diag",
    "styled",
    "table",
    "timeline",
]
