"""Worst-case evaluation time of adversarial CEL expressions, before and after their limits.

Run: ``python benchmarks/cel_budget.py [--repeat N] [--cap SECONDS]``. For each expression,
``before`` evaluates it as nvcre did without limits (cel-python's own evaluator, with nvcre's
functions), in a child process stopped after ``--cap`` seconds; ``after`` evaluates it through
``nvcre.cel`` (the compile-time limits and the step budget its kind gets: thresholds 2,000,
node health 10,000): the median of ``--repeat`` runs of
compiling (once per expression in the manager, then cached) and of evaluating. The last rows are
ordinary expressions, for scale. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from typing import Any

from nvcre.api.v1alpha1.limits import EXPRESSION_MAX_STEPS, HEALTH_EXPRESSION_MAX_STEPS

TEN = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]"


def node_with(conditions: int) -> dict[str, Any]:
    return {
        "status": {"conditions": [{"type": f"Condition{i}", "status": "True"} for i in range(conditions)]}
    }


BIG = {"metadata": {"name": "n", "annotations": {"big": "x" * 1_000_000}}}


def ones(count: int) -> str:
    return "[" + ",".join(["1"] * count) + "]"


def nested_all(depth: int, items: str) -> str:
    expression = "value > 0.0"
    for level in range(depth):
        expression = f"{items}.all(x{level}, {expression})"
    return expression


def eight_exists(over: str) -> str:
    return " || ".join(f"{over}.exists(c, c.type == 'Check{i}' && c.status == 'False')" for i in range(8))


THRESHOLD, HEALTH = EXPRESSION_MAX_STEPS, HEALTH_EXPRESSION_MAX_STEPS
CASES: list[tuple[str, str, dict[str, Any], int]] = [
    # (name, expression, variables, the budget nvcre evaluates it with)
    ("3 nested .all() over 10 (threshold)", nested_all(3, TEN), {"value": 1.0}, THRESHOLD),
    ("4 nested .all() over 10 (threshold)", nested_all(4, TEN), {"value": 1.0}, THRESHOLD),
    (
        "6 nested .all() over 9 (threshold, 185 chars)",
        nested_all(6, "[1,2,3,4,5,6,7,8,9]"),
        {"value": 1.0},
        THRESHOLD,
    ),
    (
        "2 nested .all() over 30 (threshold within every compile limit)",
        f"{ones(30)}.all(a, {ones(30)}.all(b, a == b && value > 0.0))",
        {"value": 1.0},
        THRESHOLD,
    ),
    (
        "2 nested .all() over 300 (node health, 1.2 KB)",
        f"{ones(300)}.all(a, {ones(300)}.all(b, a == b))",
        {"node": {}},
        HEALTH,
    ),
    (
        "8 exists over a node's 1,000 conditions (node health)",
        eight_exists("node.status.conditions"),
        {"node": node_with(1000)},
        HEALTH,
    ),
    (
        "1 MB annotation doubled 10 times (node health)",
        f"{TEN}.map(i, node.metadata.annotations.big + node.metadata.annotations.big).size() > 0",
        {"node": BIG},
        HEALTH,
    ),
    ("a 2 KB list literal (the slowest parse to compile)", ones(1000) + ".size() > 0", {}, HEALTH),
    ("ordinary: value >= 487.7", "value >= 487.7", {"value": 490.0}, THRESHOLD),
    (
        "ordinary: 8 exists over a node's 20 conditions",
        eight_exists("node.status.conditions"),
        {"node": node_with(20)},
        HEALTH,
    ),
]


def _unbounded(expression: str, variables: dict[str, Any], started: Any, took: Any) -> None:
    """What nvcre ran before: cel-python's evaluator, no limit (compile and evaluate timed)."""
    import celpy

    from nvcre import cel

    environment = celpy.Environment()
    environment.compile("1")  # cel-python builds its parser on first use: not part of the timing
    started.set()
    start = time.perf_counter()
    try:
        program = environment.program(environment.compile(expression), functions=cel._EXTENSIONS)
        program.evaluate({name: cel.to_cel(value) for name, value in variables.items()})
    except Exception:  # an error ends the evaluation too: its time is what counts
        pass
    took.put(time.perf_counter() - start)


def before(expression: str, variables: dict[str, Any], cap: float) -> str:
    """The unbounded evaluation in a child process, stopped ``cap`` seconds after it started."""
    context = multiprocessing.get_context("spawn")
    started, took = context.Event(), context.Queue()
    process = context.Process(target=_unbounded, args=(expression, variables, started, took))
    process.start()
    started.wait()
    process.join(cap)
    if process.is_alive():
        process.kill()
        process.join()
        return f"> {cap:g} s (stopped)"
    return f"{took.get() * 1000:,.1f} ms"


def after(expression: str, variables: dict[str, Any], steps: int, repeat: int) -> tuple[str, str, str]:
    """Median compile and evaluate times through ``nvcre.cel``, and how the evaluation ended."""
    from nvcre import cel

    compiling, evaluating, outcome = [], [], ""
    for _ in range(repeat):
        cel._compile.cache_clear()
        start = time.perf_counter()
        try:
            program = cel.compile_expression(expression)
        except cel.CELError as error:
            compiling.append(time.perf_counter() - start)
            outcome = f"refused: {error.error}"
            continue
        compiled = time.perf_counter()
        compiling.append(compiled - start)
        try:
            outcome = f"= {program.evaluate(variables, steps=steps)}"
        except cel.CELError as error:
            outcome = f"{error.kind}: {error.error}"
        evaluating.append(time.perf_counter() - compiled)
    evaluate = f"{statistics.median(evaluating) * 1000:.1f} ms" if evaluating else "-"
    return f"{statistics.median(compiling) * 1000:.1f} ms", evaluate, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cap", type=float, default=60.0, help="stop an unbounded evaluation after this")
    args = parser.parse_args()
    from nvcre import cel

    cel.evaluate("1 == 1")  # imports and first compile out of the timings
    print(
        "| expression | chars | before: compile + evaluate | after: compile | after: evaluate | after: outcome |"
    )
    print("|---|---|---|---|---|---|")
    for name, expression, variables, steps in CASES:
        unbounded = before(expression, variables, args.cap)
        compiling, evaluating, outcome = after(expression, variables, steps, args.repeat)
        print(
            f"| {name} | {len(expression)} | {unbounded} | {compiling} | {evaluating} | {outcome} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
