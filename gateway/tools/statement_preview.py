"""A statement preview tool: the first step of a statement write. It analyses one write, measures its effect
through the server's own tool, and issues a plan.

The statement is held to its ``[statements.NAME]`` rules and its execute tool's classes (gateway.backend.sql), so a
refused statement gets no plan and nothing is sent. Its measure (gateway.statements: the rows ``INSERT ... VALUES``
gives, or a read counting the rows ``UPDATE``/``DELETE ... WHERE p`` matches, or a table's rows for ``TRUNCATE`` and
``DROP``, with a fingerprint of their identities in PostgreSQL) runs through the source's read tool. The plan
(gateway.write.statement says what it holds) is bound to the caller and the execute tool, and expires.

Its mode is decided here, as a planned write's is (gateway.write.choice.at_preview), by the execute tool's rules
reading ``statement`` too, and raised to four eyes on the approval page for a class in ``four_eyes_classes``.
Nothing changes in the database.
"""

from __future__ import annotations

from typing import Any

from gateway.approvals.policy import decided_by
from gateway.backend.sql import analysed, measured
from gateway.config import StatementExecuteTool, StatementPreviewTool
from gateway.records import Plan
from gateway.runtime import Gateway
from gateway.text import rfc3339
from gateway.tools.preview import issued
from gateway.write.choice import at_preview
from gateway.write.statement import STATEMENT, at_least_four_eyes, facts_of, plan_fields, summary_of, target_of


async def preview_statement(
    gw: Gateway,
    name: str,
    config: StatementPreviewTool,
    write: tuple[str, StatementExecuteTool],
    args: dict[str, Any],
    caller: str,
) -> dict[str, Any]:
    """Analyse and measure one write, and store a caller-bound, expiring plan for it. Changes nothing."""
    write_name, tool = write
    source = gw.config.statements[config.statements]
    statement = analysed(source, config.statements, tool.allowed(), args["sql"], "write")
    measure = await measured(gw.backend_for(name), gw.config.backend_of(name), source, statement)
    target, summary, arguments = target_of(statement), summary_of(statement, measure.rows), {STATEMENT: statement.text}
    facts = facts_of(statement, measure.rows)
    choice = await at_preview(gw, write_name, tool, caller, target, {}, summary, arguments, facts)
    choice = at_least_four_eyes(choice, statement, tool)
    unissued = Plan("", caller, write_name, target, measure.fingerprint, arguments, summary, config.plan_ttl_seconds)
    plan = await issued(gw, unissued, choice)
    return {**plan_fields(plan, statement), "expiresAt": rfc3339(plan.expires_at), "approval": decided_by(choice)}
