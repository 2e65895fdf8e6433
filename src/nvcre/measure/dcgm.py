"""``dcgmi diag`` output read into per-test, per-entity results (pure: text in, values out).

Every form ``dcgmi diag`` prints (NVIDIA/DCGM ``dcgmi/Diag.cpp``) is read:

* the JSON of ``--json``: DCGM 4.x's ``{"DCGM Diagnostic": {"test_categories": [{"category",
  "tests": [{"name", "results": [{"entity_group", "entity_id", "status", "warnings": [{"warning",
  "error_id", ...}], "info"}], "test_summary"}]}]}, "metadata": {"version"}}``; DCGM 3.x's
  ``{"DCGM GPU Diagnostic": ...}`` whose results carry ``gpu_id`` (3.2+, a string; the Deployment
  tests an integer, and only with an error, whose text is then under ``warnings``), or
  ``gpu_ids`` and a ``warnings`` string (up to 3.1); a ``runtime_error`` instead of results; the
  ``iterations`` wrapper of ``--iterations``. The document may sit among other log lines (their
  kubelet ``timestamps=true`` prefix is dropped) or have lost its beginning (a log tail): then
  every complete test object that remains is read and the report is not ``complete``;
* the text table: the old Deployment rows (``Blacklist``/``Denylist`` ... ``Inforom``, each
  ``Pass``/``Fail`` with ``Error`` rows), the per-GPU tests (``Pass - All``, ``Pass - GPUs: 1, 2``
  and ``Fail - GPU: 0`` on following rows, ``Warning`` rows), DCGM 4's ``software``/``memory``...
  rows with ``GPU0: Fail`` and ``Warning: GPU0`` rows; DCGM wraps a message every 45 characters,
  mid-word, and the pieces are joined back before whitespace is folded;
* the one-line failures dcgmi prints instead of any result (``Error: Unable to complete
  diagnostic ...``).

A result is ``Pass``, ``Fail``, ``Warn`` or ``Skip`` (DCGM's ``Not Run`` is a Skip); any other
status word is kept as written and counts as failed. Only a report read whole (a JSON document
parsed, a table to its closing border) with at least one result and no failure has ``passed``.

Exit status (``dcgmi/Diag.cpp``, ``Diag::GetFailureResult``, whose value ``main`` in
``dcgmi/main_dcgmi.cpp`` returns): ``DCGM_ST_NVVS_ERROR`` (-30, exit 226), or
``DCGM_ST_NVVS_ISOLATE_ERROR`` (-51, exit 205) for an error that asks for isolation. Up to DCGM
3.3 it follows the results: a Deployment or per-GPU test with status Fail (the CPU EUD test is not
looked at). Since DCGM 4.0 it follows DCGM's error entries instead: any error on a GPU, in a
software-category test, or global with a non-zero code, so a test that only warned can exit 226
and a test that fails with no such entry (on a CPU entity, say) exits 0. Either way the exit
status says neither which test nor which GPU, and an exit 0 can carry a failed test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

from nvcre.measure.nccl import strip_kubelet_prefix

PASS, FAIL, WARN, SKIP = "Pass", "Fail", "Warn", "Skip"
NOT_FAILED = frozenset({PASS, WARN, SKIP})
ALL = "all"
"""The entity of a result that covers every GPU (``Pass - All``, a Deployment test, a test's
summary)."""
MAX_SUMMARY = 600
"""The longest :func:`summary`, in characters (a condition message stays readable)."""
MAX_MESSAGE = 240
"""The longest message of one failed test quoted in :func:`summary`."""

_STATUS = {"pass": PASS, "fail": FAIL, "warn": WARN, "skip": SKIP, "not run": SKIP}
_TOP_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic", "iterations", "Overall Result")
_DOCUMENT = re.compile(r'\{\s*"(?:' + "|".join(re.escape(k) for k in _TOP_KEYS) + r')"\s*:')
_TEST_OBJECT = re.compile(r'\{\s*"name"\s*:')
_CATEGORY = re.compile(r'"(?:category|header)"\s*:\s*"([^"\\]*)"')
_VERSION = re.compile(r'"version"\s*:\s*"([^"\\]*)"')
_COMMAND = re.compile(r"\bdcgmi\s+diag\b([^\n]*)")
SUITES: Final = {"quick": 1, "short": 1, "medium": 2, "long": 3, "xlong": 4}
"""The suite names ``dcgmi diag -r`` takes for levels 1 to 4."""
_FAILURE_LINE = re.compile(
    r"^(Error: (?:Unable to complete diagnostic|Diagnostic (?:could not be run|can only be performed))"
    r"|Error: Unable to start an embedded host engine"
    r"|Aborting the iterative runs of the diagnostic).*"
)
_GPU = re.compile(r"\bGPU\s*(\d+)\b")


@dataclass(frozen=True)
class DiagResult:
    """One test's result on one entity, as DCGM reported it."""

    category: str  #: Deployment, Integration, Hardware, Stress ('' when the report lost it)
    test: str  #: DCGM's name for it: ``Persistence Mode``, ``GPU Memory``, ``memory``...
    entity: str  #: ``GPU 0``, ``CPU 1``, or :data:`ALL`
    status: str  #: Pass, Fail, Warn, Skip (or DCGM's word when it is none of these)
    message: str  #: DCGM's warning/error text, whitespace folded ('' when none)

    @property
    def failed(self) -> bool:
        return self.status not in NOT_FAILED


@dataclass(frozen=True)
class Diagnosis:
    """What a ``dcgmi diag`` report says."""

    results: tuple[DiagResult, ...]
    complete: bool  #: the whole report was read (a JSON document, or a table to its end)
    level: int | None  #: the run level, where the log or the caller says it
    version: str | None  #: DCGM's version, where the report states it

    @property
    def failed(self) -> tuple[DiagResult, ...]:
        """The results that did not pass, warn or skip."""
        return tuple(r for r in self.results if r.failed)

    @property
    def passed(self) -> bool:
        """The whole report was read, it has results and none of them failed."""
        return self.complete and bool(self.results) and not self.failed

    def tests(self) -> tuple[tuple[str, str], ...]:
        """Every (category, test) with a result, in report order."""
        return tuple(dict.fromkeys((r.category, r.test) for r in self.results))


def read_diag(text: str, *, level: int | None = None) -> Diagnosis | None:
    """The ``dcgmi diag`` report in ``text`` (a pod log, or part of one), or None when it holds
    none. ``level`` is the run level when the caller knows it (else it is read from a ``dcgmi
    diag -r N`` command line in the text, if any)."""
    lines = [strip_kubelet_prefix(line) for line in text.splitlines()]
    body = "\n".join(lines)
    if level is None:
        found = _COMMAND.search(body)
        level = run_level(found.group(1).split()) if found else None
    return _read_json(body, level) or _read_table(lines, level) or _read_failure(lines, level)


def run_level(flags: Sequence[str]) -> int | None:
    """The level ``dcgmi diag``'s ``flags`` (its words after ``diag``) ask for with ``-r`` or
    ``--run``: a number or a suite name; None when they name none."""
    for flag, value in pairwise(flags):
        if flag in ("-r", "--run"):
            if value.isdecimal():
                return int(value)
            return SUITES.get(value.lower())
    return None


def _fold(text: str) -> str:
    return " ".join(text.split())


def _status(word: Any) -> str:
    text = _fold(str(word)) if word is not None else ""
    return _STATUS.get(text.lower(), text or "(none)")


# --- JSON ---------------------------------------------------------------------------------------


def _read_json(body: str, level: int | None) -> Diagnosis | None:
    decoder = json.JSONDecoder()
    for found in _DOCUMENT.finditer(body):
        try:
            document, _end = decoder.raw_decode(body, found.start())
        except ValueError:
            continue
        if isinstance(document, dict):
            results = _document_results(document)
            return Diagnosis(tuple(results), True, level, _document_version(document))
    return _read_json_tests(body, level, decoder)


def _read_json_tests(body: str, level: int | None, decoder: json.JSONDecoder) -> Diagnosis | None:
    """The complete test objects of a JSON report that lost its beginning (or is broken)."""
    results: list[DiagResult] = []
    end = 0
    seen = False
    for found in _TEST_OBJECT.finditer(body):
        if found.start() < end:
            continue
        try:
            test, stop = decoder.raw_decode(body, found.start())
        except ValueError:
            continue
        if not (isinstance(test, dict) and isinstance(test.get("results"), list)):
            continue
        seen = True
        end = stop
        categories = _CATEGORY.findall(body, 0, found.start())
        results += _test_results(categories[-1] if categories else "", test)
    if not seen:
        return None
    versions = _VERSION.findall(body)
    return Diagnosis(tuple(results), False, level, versions[-1] if versions else None)


def _document_version(document: dict[str, Any]) -> str | None:
    for holder in (document.get("metadata"), document, document.get("DCGM GPU Diagnostic")):
        if isinstance(holder, dict) and isinstance(holder.get("version"), str):
            return str(holder["version"])
    iterations = document.get("iterations")
    if isinstance(iterations, list):
        for iteration in iterations:
            if isinstance(iteration, dict) and (version := _document_version(iteration)):
                return version
    return None


def _document_results(document: dict[str, Any]) -> list[DiagResult]:
    results: list[DiagResult] = []
    iterations = document.get("iterations")
    if isinstance(iterations, list):
        for iteration in iterations:
            if isinstance(iteration, dict):
                results += _document_results(iteration)
    for key in ("DCGM Diagnostic", "DCGM GPU Diagnostic"):
        diagnostic = document.get(key)
        if not isinstance(diagnostic, dict):
            continue
        if diagnostic.get("runtime_error"):
            results.append(
                DiagResult("", "runtime error", ALL, FAIL, _fold(str(diagnostic["runtime_error"])))
            )
        for category in _list(diagnostic.get("test_categories")):
            name = str(category.get("category", "")) if isinstance(category, dict) else ""
            for test in _list(category.get("tests") if isinstance(category, dict) else None):
                if isinstance(test, dict):
                    results += _test_results(name, test)
    overall = document.get("Overall Result")
    if overall is not None and _status(overall) != PASS and not any(r.failed for r in results):
        results.append(
            DiagResult("", "iterations", ALL, _status(overall), _fold(str(document.get("Warning", ""))))
        )
    return results


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _test_results(category: str, test: dict[str, Any]) -> list[DiagResult]:
    name = _fold(str(test.get("name", "")))
    results = [
        DiagResult(category, name, _entity(r), _status(r.get("status")), _message(r))
        for r in _list(test.get("results"))
        if isinstance(r, dict)
    ]
    summary = test.get("test_summary")
    if isinstance(summary, dict) and "status" in summary:
        status = _status(summary["status"])
        if status != PASS and status not in {r.status for r in results}:
            results.append(DiagResult(category, name, ALL, status, _message(summary)))
    return results


def _entity(result: dict[str, Any]) -> str:
    if "entity_group" in result and "entity_id" in result:
        return f"{result['entity_group']} {result['entity_id']}"
    for key in ("gpu_id", "gpu_ids"):
        if key in result and str(result[key]).strip():
            return f"GPU {str(result[key]).strip()}"
    return ALL


def _message(result: dict[str, Any]) -> str:
    """The warnings of a result (DCGM's error texts); for a skip without any, its info."""
    texts: list[str] = []
    warnings = result.get("warnings")
    for warning in warnings if isinstance(warnings, list) else [warnings]:
        if isinstance(warning, dict):
            warning = warning.get("warning", warning.get("warnings"))
        if isinstance(warning, str) and warning.strip():
            texts.append(_fold(warning))
    if not texts and _status(result.get("status")) == SKIP:
        info = result.get("info")
        texts += [
            _fold(i) for i in (info if isinstance(info, list) else [info]) if isinstance(i, str) and i.strip()
        ]
    return "; ".join(dict.fromkeys(texts))


# --- text table ---------------------------------------------------------------------------------

_BORDER = re.compile(r"^\+-{10,}\+-{10,}\+$")
_SECTION = re.compile(r"^[|+]-+\s+(\w[\w ]*?)\s+-+\+-+[|+]$")
_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>[^|]*)\|?\s*$")
_SPEC = re.compile(
    r"^(?P<status>Pass|Fail|Warn|Skip|Not Run)(?: - (?:(?P<all>All)|GPUs?: (?P<gpus>[\d, ]+)))?$"
)
_ENTITY = re.compile(r"^(?P<group>[A-Za-z_]+?)(?P<id>\d+): (?P<status>Pass|Fail|Warn|Skip|Not Run)$")
_MESSAGE = re.compile(r"^(?P<kind>Warning|Error|Info)(?:: (?P<group>[A-Za-z_]+?)(?P<id>\d+))?$")
_NAME_END, _VALUE_START, _VALUE_WIDTH = 27, 30, 45  # DCGM's stencil: '| ' name(25) ' | ' value(46) ' |'


@dataclass
class _Test:
    category: str
    name: str
    overall: str | None  # the status alone on the test's own row (a Deployment test's, DCGM 4's)
    entities: dict[str, str]  # entity -> status, in order
    messages: dict[str, list[str]]  # entity (or ALL) -> message texts


class _Table:
    def __init__(self) -> None:
        self.results: list[DiagResult] = []
        self.category = ""
        self.version: str | None = None
        self.test: _Test | None = None
        self.message: tuple[str, list[str]] | None = None  # (entity, pieces) being read
        self.info = False  # the rows being read continue an Info block (dropped)
        self.rows = 0
        self.closed = False

    def row(self, name: str, value: str, piece: str) -> None:
        """One ``| name | value |`` row (``piece``: the value as DCGM cut it, spaces kept)."""
        if name == "Diagnostic" and value == "Result":
            return
        if self.category == "Metadata":
            if name == "DCGM Version":
                self.version = value
            return
        kind = _MESSAGE.match(name)
        if kind:
            self._end_message()
            self.info = kind["kind"] == "Info"
            entity = f"{kind['group']} {kind['id']}" if kind["group"] else ALL
            self.message = None if self.info else (entity, [piece])
            return
        if not name:
            spec, entity_row = _SPEC.match(value), _ENTITY.match(value)
            if (spec or entity_row) and self.test is not None:
                self._end_message()
                self._status_row(spec, entity_row)
            elif self.message is not None:
                self.message[1].append(piece)
            return
        self._end_test()
        self.rows += 1
        self.test = _Test(self.category, name, None, {}, {})
        spec = _SPEC.match(value)
        if spec:
            self._status_row(spec, None)
        else:
            self.test.overall = value

    def _status_row(self, spec: re.Match[str] | None, entity_row: re.Match[str] | None) -> None:
        assert self.test is not None
        if entity_row:
            self.test.entities[f"{entity_row['group']} {entity_row['id']}"] = _status(entity_row["status"])
        elif spec and spec["gpus"]:
            for gpu in re.findall(r"\d+", spec["gpus"]):
                self.test.entities[f"GPU {gpu}"] = _status(spec["status"])
        elif spec and spec["all"]:
            self.test.entities[ALL] = _status(spec["status"])
        elif spec:
            self.test.overall = _status(spec["status"])

    def section(self, name: str) -> None:
        self._end_test()
        self.category = name

    def border(self) -> None:
        if self.rows:
            self._end_test()
            self.closed = True

    def _end_message(self) -> None:
        if self.message is not None and self.test is not None:
            entity, pieces = self.message
            self.test.messages.setdefault(entity, []).append(_fold("".join(pieces)))
        elif self.message is not None:  # an Error row before any test (old Deployment output)
            entity, pieces = self.message
            text = _fold("".join(pieces))
            gpu = _GPU.search(text)
            self.results.append(
                DiagResult(self.category, "Error", f"GPU {gpu[1]}" if gpu else ALL, FAIL, text)
            )
            self.rows += 1
        self.message = None
        self.info = False

    def _end_test(self) -> None:
        self._end_message()
        test, self.test = self.test, None
        if test is None:
            return
        entities = dict(test.entities)
        if test.overall is not None and (
            not entities or (test.overall != PASS and test.overall not in entities.values())
        ):
            entities = {ALL: _status(test.overall), **entities}
        general = test.messages.get(ALL, [])
        for entity, status in entities.items():
            texts = list(test.messages.get(entity, []))
            if entity == ALL or status not in NOT_FAILED or status == WARN:
                texts += [t for t in general if _mentions(t, entity) or entity == ALL or not _names_gpu(t)]
            self.results.append(
                DiagResult(test.category, test.name, entity, status, "; ".join(dict.fromkeys(texts)))
            )

    def finish(self) -> None:
        self._end_test()


def _names_gpu(text: str) -> bool:
    return _GPU.search(text) is not None


def _mentions(text: str, entity: str) -> bool:
    return entity.startswith("GPU ") and entity[4:] in {m[1] for m in _GPU.finditer(text)}


def _cells(line: str) -> tuple[str, str, str] | None:
    """(name, value, the value's piece as DCGM cut it) of a table row, or None."""
    row = _ROW.match(line)
    if not row:
        return None
    name, value = _fold(row["name"]), _fold(row["value"])
    standard = len(line) >= _VALUE_START + _VALUE_WIDTH and line[_NAME_END + 1] == "|"
    piece = line[_VALUE_START : _VALUE_START + _VALUE_WIDTH] if standard else row["value"].removeprefix(" ")
    return name, value, piece


def _read_table(lines: list[str], level: int | None) -> Diagnosis | None:
    table: _Table | None = None
    for raw in lines:
        line = raw.strip()  # a table indented in a document reads the same
        if _BORDER.match(line):
            if table is not None:
                table.border()
                if table.closed:
                    break
            continue
        if line.startswith("+==="):
            table = table or _Table()
            continue
        section = _SECTION.match(line)
        if section:
            table = table or _Table()
            table.section(section[1])
            continue
        cells = _cells(line)
        if cells is None:
            continue
        if table is None:
            if cells[:2] != ("Diagnostic", "Result") and not (
                _SPEC.match(cells[1]) or _MESSAGE.match(cells[0])
            ):
                continue
            table = _Table()
        table.row(*cells)
    if table is None:
        return None
    table.finish()
    if not table.results and not table.closed:
        return None
    return Diagnosis(tuple(table.results), table.closed and bool(table.results), level, table.version)


# --- a failure instead of a report --------------------------------------------------------------


def _read_failure(lines: list[str], level: int | None) -> Diagnosis | None:
    for line in lines:
        found = _FAILURE_LINE.match(line.strip())
        if found:
            return Diagnosis((DiagResult("", "dcgmi", ALL, FAIL, _fold(found[0])),), True, level, None)
    return None


# --- summary ------------------------------------------------------------------------------------


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def summary(d: Diagnosis) -> str:
    """One line a user reads: the failed tests with their GPUs and DCGM's words, or that all
    passed (never for a report that was not read whole)."""
    head = "dcgmi diag" + (f" level {d.level}" if d.level is not None else "")
    tests = d.tests()
    failed = [t for t in tests if any(r.failed for r in d.results if (r.category, r.test) == t)]
    if not d.results:
        text = f"{head}: no test result in the report" + ("" if d.complete else " (report cut short)")
        return _cut(text, MAX_SUMMARY)
    if failed:
        parts = []
        for key in failed:
            bad = [r for r in d.results if (r.category, r.test) == key and r.failed]
            where = ", ".join(r.entity for r in bad if r.entity != ALL)
            why = " / ".join(dict.fromkeys(r.message for r in bad if r.message))
            parts.append(
                f"{key[1]}"
                + (f" on {where}" if where else "")
                + (f" ({_cut(why, MAX_MESSAGE)})" if why else "")
            )
        text = f"{head}: {len(failed)} of {len(tests)} tests failed: " + "; ".join(parts)
        if not d.complete:
            text = (
                f"{head}: report cut short; {len(failed)} of the {len(tests)} tests read failed: "
                + "; ".join(parts)
            )
        return _cut(text, MAX_SUMMARY)
    warned = sorted({r.test for r in d.results if r.status == WARN}, key=[t for _c, t in tests].index)
    skipped = [t for t in tests if all(r.status == SKIP for r in d.results if (r.category, r.test) == t)]
    tail = f" (warnings from {', '.join(warned)})" if warned else ""
    if not d.complete:
        return _cut(
            f"{head}: report cut short; none of the {len(tests)} tests read failed{tail}", MAX_SUMMARY
        )
    if skipped:
        ran = len(tests) - len(skipped)
        return _cut(
            f"{head}: no test failed: {ran} of {len(tests)} passed, {len(skipped)} skipped{tail}", MAX_SUMMARY
        )
    return _cut(f"{head}: all {len(tests)} tests passed{tail}", MAX_SUMMARY)
