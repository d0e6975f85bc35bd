"""Choosing a CEL implementation for approval rules: the two maintained ones on PyPI, side by side, in one run.

    bench/.venv-tools/bin/python bench/cel.py      (bench/run creates that venv with both packages)

``common-expression-language`` (``import cel``, Rust bindings) and ``cel-python`` (``import celpy``, pure
Python) each compile and evaluate the same rule conditions over the same activation (a caller, a target, a plan's
numbers, write counters) many times. It prints evaluations per second, compile time, and what each says about
a syntax error and a missing field, because an operator reads those messages when ``check`` refuses a rule.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

RULES = [
    'summary.rowsDeleted > 1000 || target.id.startsWith("tn_prod")',
    'writes.caller.hour > 5 && tool == "reset_tenant"',
    '"tenants:admin" in caller.scopes',
]
ACTIVATION: dict[str, Any] = {
    "caller": {"id": "agent-app/alice", "client": "agent-app", "subject": "alice", "scopes": ["tenants:read"]},
    "tool": "reset_tenant",
    "target": {"id": "tn_checkout01", "name": "Checkout", "rows": 812, "version": 3, "protected": False},
    "summary": {"rowsDeleted": 812, "rowsInserted": 0},
    "arguments": {"tenantId": "tn_checkout01", "fixture": "empty"},
    "writes": {"caller": {"minute": 0, "hour": 3, "day": 9}, "tool": {"minute": 0, "hour": 7, "day": 40}},
}
SECONDS = 1.5


def rust() -> dict[str, Any]:
    import cel

    started = time.perf_counter()
    programs = [cel.compile(rule) for rule in RULES]
    compiled = time.perf_counter() - started
    context = cel.Context(ACTIVATION)
    rate = _rate(lambda: [program.execute(context) for program in programs])
    return {
        "package": "common-expression-language",
        "compile_ms_per_rule": round(compiled * 1000 / len(RULES), 3),
        "evaluations_per_s": round(rate * len(RULES)),
        "syntax_error": _error(lambda: cel.compile("summary.rowsDeleted >")),
        "missing_field": _error(lambda: cel.compile("summary.nope > 1").execute(ACTIVATION)),
    }


def pure() -> dict[str, Any]:
    celpy: Any = importlib.import_module("celpy")  # in bench/.venv-tools only: typed as Any on purpose

    environment = celpy.Environment(runner_class=celpy.CompiledRunner)
    started = time.perf_counter()
    programs = [environment.program(environment.compile(rule)) for rule in RULES]
    compiled = time.perf_counter() - started
    activation: Any = celpy.json_to_cel(ACTIVATION)
    rate = _rate(lambda: [program.evaluate(activation) for program in programs])
    return {
        "package": "cel-python",
        "compile_ms_per_rule": round(compiled * 1000 / len(RULES), 3),
        "evaluations_per_s": round(rate * len(RULES)),
        "syntax_error": _error(lambda: environment.compile("summary.rowsDeleted >")),
        "missing_field": _error(
            lambda: environment.program(environment.compile("summary.nope > 1")).evaluate(activation)
        ),
    }


def _rate(work: Any) -> float:
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < SECONDS:
        work()
        count += 1
    return count / (time.perf_counter() - started)


def _error(work: Any) -> str:
    try:
        result = work()
    except Exception as exc:  # the message is what this bench reports
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    return f"no exception, result {result!r}"


def main() -> None:
    results = [rust(), pure()]
    for result in results:
        print(result["package"])
        for key, value in result.items():
            if key != "package":
                print(f"  {key:22} {value}")
    print(f"ratio evaluations/s: {results[0]['evaluations_per_s'] / results[1]['evaluations_per_s']:.1f}x")


if __name__ == "__main__":
    main()
