"""Every audit entry comes from the constructor of its outcome, and docs/audit.md's table of outcomes is the code's
(as the README's troubleshooting table is the error codes')."""

from __future__ import annotations

import ast
import inspect

from gateway.audit import entries
from gateway.errors import Code, ToolError
from gateway.records import Approval, AuditEntry, KeyRecord, Passkey, Task
from tests.support.processes import ROOT

FACTS = entries.Facts("agent", "reset_tenant", plan_id="pl_x", idempotency_key="key-0001", target="tn_a")
APPROVAL = Approval("ap_x", "pl_x", "agent", None, "reset_tenant", "tn_a", 3, {}, {}, "Reset?", 1.0, 9.0, 1, False)
PASSKEY = Passkey("cred", "cose", '["static","bob"]', "bob", "laptop", 1.0)
TASK = Task("tk_x", "agent", "reset_tenant", "key-0001", {}, "pl_x", "ap_x", 1.0, 1.0, 9.0)


def made_by_each_constructor() -> dict[str, list[AuditEntry]]:
    """Every entry each constructor can make (``refusal`` once for each constructor it picks)."""
    first = entries.refused(FACTS, 60.0, "plan_not_found")
    return {
        "applied": [entries.applied(FACTS, 1.0)],
        "replayed": [entries.replayed(FACTS, 1.0)],
        "unknown": [entries.unknown(FACTS, 1.0)],
        "backend_error": [entries.backend_error(FACTS, 1.0)],
        "refused": [first],
        "refusal": [
            entries.refusal(FACTS, 1.0, ToolError(Code.OUTCOME_UNKNOWN, "?")),
            entries.refusal(FACTS, 1.0, ToolError(Code.BACKEND_ERROR, "no")),
            entries.refusal(FACTS, 1.0, ToolError(Code.PLAN_STALE, "moved")),
        ],
        "recovered": [entries.recovered(KeyRecord("agent", "key-0001", "pl_x", "tn_a", "in_flight"), 1.0)],
        "repeated": [entries.repeated(first, 3, 1)],
        "denied": [entries.denied(1.0, "agent", "reset_tenant", "tn_a", "spent")],
        "approval": [entries.approval(APPROVAL, 1.0, {"issuer": "static", "subject": "bob"}, "approve")],
        "proposed": [entries.proposed(APPROVAL, 1.0)],
        "returned": [entries.returned(FACTS, 1.0, None), entries.returned(FACTS, 1.0, "outcome_unknown")],
        "cancelled": [entries.cancelled(TASK, 1.0, "cancelled by the caller", "tn_a")],
        "trimmed": [entries.trimmed(first, 4, 1.0, 2.0)],
        "passkey": [entries.passkey(PASSKEY, 1.0, "enrolled", {"issuer": "static", "subject": "bob"})],
    }


def test_every_constructor_is_exercised_here() -> None:
    constructors = {
        name
        for name, function in inspect.getmembers(entries, inspect.isfunction)
        if not name.startswith("_")
        and function.__module__ == entries.__name__
        and "AuditEntry" in str(function.__annotations__.get("return"))
    }
    assert constructors == set(made_by_each_constructor())


def test_the_constructors_make_exactly_the_documented_outcomes() -> None:
    made = {entry.outcome for made in made_by_each_constructor().values() for entry in made}
    assert made == set(entries.OUTCOMES)


def test_a_refusal_is_audited_with_the_code_the_caller_saw() -> None:
    made = made_by_each_constructor()["refusal"]
    assert [(entry.outcome, entry.code) for entry in made] == [
        ("unknown", "outcome_unknown"),
        ("backend_error", "backend_error"),
        ("refused", "plan_stale"),
    ]
    noun = entries.refusal(FACTS, 1.0, ToolError(Code.TARGET_PROTECTED, "no", noun="database"))
    assert (noun.outcome, noun.code) == ("refused", "database_protected")


def test_the_cancel_of_a_task_names_its_target() -> None:
    entry = made_by_each_constructor()["cancelled"][0]
    assert (entry.outcome, entry.target, entry.idempotency_key, entry.extra["task"]) == (
        "cancelled",
        "tn_a",
        "key-0001",
        "tk_x",
    )


def test_docs_audit_md_holds_the_table_of_outcomes() -> None:
    docs = (ROOT / "docs" / "audit.md").read_text()
    assert entries.markdown_table() in docs, "regenerate the table: .venv/bin/python -m gateway.audit.entries"


def hand_built(source: str) -> list[int]:
    """The lines of a module that call ``AuditEntry(...)`` itself."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "AuditEntry")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "AuditEntry")
        )
    ]


def test_no_module_but_the_constructors_builds_an_entry_by_hand() -> None:
    assert hand_built("AuditEntry(at=0, caller='c', tool='t', outcome='applied')\nrecords.AuditEntry(**x)") == [1, 2]
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "gateway").rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "gateway/audit/entries.py"
        for line in hand_built(path.read_text())
    ]
    assert found == [], "make the entry with a constructor of gateway/audit/entries.py"
    assert hand_built((ROOT / "gateway" / "audit" / "entries.py").read_text())
