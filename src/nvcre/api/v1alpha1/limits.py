"""The bounds on what a user writes, in one place: CEL expressions and measurement sampling.

Each limit is checked as early as something can check it: the API server (the CRDs carry the
lengths, the macro count and the sampling minimum), ``nvcrectl validate`` and the renders
(everything, offline), and nvcre when it compiles and evaluates an expression (the nesting, the
parse-tree depth and the evaluation budget, which the API server cannot measure).
docs/api.md ("Expression limits") explains each to users.
"""

from __future__ import annotations

import re
from typing import Final

EXPRESSION_MAX_LENGTH: Final = 2048
"""Characters of a node-health (``nodeHealthMonitor.cel.expression``) or override
(``overrides[].when.expression``) expression; the reference's bound on the node-health one."""

THRESHOLD_EXPRESSION_MAX_LENGTH: Final = 256
"""Characters of a threshold expression: a comparison over one double needs a few dozen."""

EXPRESSION_MAX_MACROS: Final = 8
"""Comprehension macro calls (``.all(``, ``.exists(``, ``.exists_one(``, ``.map(``,
``.filter(``) in an expression's text, counted as :data:`MACRO_CALL` finds them."""

EXPRESSION_MAX_MACRO_NESTING: Final = 2
"""Comprehensions inside a comprehension's arguments: each level multiplies the work by the
size of a list, so three levels of ten-element lists already take seconds."""

EXPRESSION_MAX_DEPTH: Final = 200
"""Levels of the parsed expression (each operator, member access, call and bracket adds some;
the documented node-health examples need 25 to 55). Deeper ones exhaust the evaluator's stack."""

EXPRESSION_MAX_STEPS: Final = 2_000
"""Evaluation steps one evaluation of a threshold or override expression may take (they run on
the manager's event loop); past it the evaluation stops with an error. A step is a node of the
expression visited (once per element inside a comprehension), plus one for every
:data:`EXPRESSION_STEP_SIZE` characters, items or entries of each value it produces, so big
values cost what copying them costs. 2,000 steps take about 30 ms in cel-python on a shared
2-core machine (docs/benchmarks.md, ``cel_budget``); ``value >= 487.7`` takes 17."""

HEALTH_EXPRESSION_MAX_STEPS: Final = 10_000
"""The same for one node-health evaluation (one node; evaluated outside the event loop, as
iterating a node's conditions costs more): 10,000 steps take 120 to 400 ms there; eight
``exists`` over twenty node conditions take about 6,000."""

EXPRESSION_STEP_SIZE: Final = 1_000

EXPRESSION_MAX_SECONDS: Final = 1.0
"""A backstop in wall-clock time for the steps whose own work grows with their operands beyond
what their size says (comparing two deep maps): no expression of the documented kinds gets near
it, so a verdict does not depend on the machine."""

MACRO_CALL: Final = r"[.][[:space:]]*(all|exists|exists_one|map|filter)[[:space:]]*[(]"
"""The macro calls :data:`EXPRESSION_MAX_MACROS` counts, as an RE2 pattern (the API server's
``findAll``); :data:`MACRO_CALL_PYTHON` is the same pattern for Python's ``re``."""

MACRO_CALL_PYTHON: Final = re.compile(MACRO_CALL.replace("[[:space:]]", r"[ \t\n\v\f\r]"), re.ASCII)

MIN_SAMPLE_INTERVAL_SECONDS: Final = 5
"""The shortest ``sampleInterval`` of a measurement: each sample reads the pods' logs again."""

MIN_SAMPLE_INTERVAL: Final = f"{MIN_SAMPLE_INTERVAL_SECONDS}s"

GO_DURATION_PATTERN: Final = r"^(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+$"
"""An unsigned Go duration (``time.ParseDuration``): ``30s``, ``1m30s``, ``1.5h``."""


def macro_calls(expression: str) -> int:
    """How many comprehension macros the expression's text calls (the admission count)."""
    return len(MACRO_CALL_PYTHON.findall(expression))


MACROS_MESSAGE: Final = (
    f"may call at most {EXPRESSION_MAX_MACROS} comprehension macros (all, exists, exists_one, map, filter)"
)
SAMPLE_INTERVAL_MESSAGE: Final = f"sampleInterval must be at least {MIN_SAMPLE_INTERVAL}"
MAX_IMAGES: Final = 16
"""Images a Job's status (and each NodeRecord result) keeps: a workload runs a few (launcher,
workers, init containers)."""
