"""A statement write: exactly the statement a statement preview planned, run once per key after a person's yes.

It writes through the driver every write shares (gateway.write.driver: the key first, then claim -> send ->
settle), with the planned write's steps in its own terms:

    4   the plan: exists, live, this caller's, this tool's              plan_not_found, plan_expired
    4a  the planned statement, analysed again under today's rules       statement_refused, request_too_large
        (a table or class allowed no longer is refused; never loosened)
    4b  the rules (CEL) once more, reading ``statement``                denied
    6   a fresh measure equals the plan's: count, and the fingerprint   plan_stale
        of the rows' identities where the dialect has one
    7   the person's yes (form, typed, url, a task)                     not_confirmed, approval_pending, ...
    8   under the target's lock: the rules, the claim, a fresh measure  plan_stale
        once more (``prepared``), then the statement sent once
    9   the server's answer                                             applied (with the count it reports),
                                                                        backend_error, outcome_unknown

The plan a statement preview issues (gateway.tools.statement_preview) holds the normalised statement as its one
argument, ``statement``; its target is the tables the statement writes (the lock, the typed confirmation and the
audit name them); its version is the fingerprint (None where the dialect has none, SQLite); its summary is the
class, the tables and the measured rows, which the page shows beside the statement.

What the server reports it changed is reported back (``rowsReported``) beside the measure, never in its place:
``countsAgree`` is false when they differ (the audit entry says so too), and null for DDL and TRUNCATE, whose
rows a server does not count. The audit entry keeps the statement, its digest, the measured and the reported
count (``extra``). The question, the page and the terminal show the normalised statement, escaped, under the
gateway's own words: ``Delete 812 rows from tenants?``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.approvals.policy import Choice, from_plan
from gateway.backend.sql import Measured, analysed, measured, write_call
from gateway.backend.sql_answers import PARSERS
from gateway.config import StatementExecuteTool, StatementPreviewTool, StatementSource
from gateway.errors import Code, ToolError
from gateway.records import Plan, Reply
from gateway.statements.model import DDL, TRUNCATE, Statement
from gateway.text import printable
from gateway.write.ask.yes import ask
from gateway.write.audited import Answer, Interim
from gateway.write.driver import ClaimedWrite, Sender, carry_out
from gateway.write.steps import LOST, Settlement, live_plan, outcome_unknown_body

STATEMENT = "statement"
"""The plan's one argument: the normalised statement."""
FLOOR_RULE = "four_eyes_classes"
"""The name a plan's choice gives when its class alone asked for four eyes (``four_eyes_classes``)."""
QUESTIONS = {
    "delete": "Delete {rows} from {tables}?",
    "update": "Update {rows} in {tables}?",
    "insert": "Insert {rows} into {tables}?",
    "truncate": "Empty {tables}, removing {rows}?",
    "ddl": "Change the schema with {keyword} on {tables} ({rows})?",
}
UNCOUNTED = frozenset({DDL, TRUNCATE})
"""Classes whose rows a server does not report (its count says nothing of what DROP or TRUNCATE removed)."""

log = logging.getLogger(__name__)


def target_of(statement: Statement) -> str:
    """What a statement's plan targets: the tables it writes (for the lock, the typed confirmation, the audit)."""
    return ", ".join(str(table) for table in statement.written or statement.tables)


def summary_of(statement: Statement, rows: int) -> dict[str, Any]:
    """The plan's summary: the numbers and names the page shows beside the statement."""
    return {"class": str(statement.kind), "tables": target_of(statement), "rows": rows}


def facts_of(statement: Statement, rows: int) -> dict[str, Any]:
    """What the approval rules read as ``statement``."""
    return {
        "class": str(statement.kind),
        "keyword": statement.keyword,
        "text": statement.text,
        "digest": statement.digest,
        "tables": [str(table) for table in statement.tables],
        "written": [str(table) for table in statement.written],
        "functions": list(statement.functions),
        "rows": rows,
    }


def plan_fields(plan: Plan, statement: Statement) -> dict[str, Any]:
    """A plan as a client sees it (the preview's output and the execute tool's share these fields)."""
    assert statement.measure is not None
    fields = {
        "planId": plan.plan_id,
        "statement": statement.text,
        "class": str(statement.kind),
        "tables": [str(table) for table in statement.tables],
        "written": [str(table) for table in statement.written],
        "rows": plan.summary["rows"],
        "unit": statement.measure.unit,
        "digest": statement.digest,
    }
    return fields if plan.version is None else {**fields, "fingerprint": plan.version}


def at_least_four_eyes(choice: Choice, statement: Statement, tool: StatementExecuteTool) -> Choice:
    """The plan's choice, raised to people on the approval page with four eyes when its class asks for them
    (``four_eyes_classes``): a rule may ask for more (more approvers, a deny), never for less."""
    if str(statement.kind) not in tool.four_eyes_for() or choice.mode == "deny":
        return choice
    if choice.mode == "url":
        return replace(choice, four_eyes=True)
    return Choice("url", FLOOR_RULE, 1, True, unevaluable=choice.unevaluable)


def question(statement: Statement, rows: int) -> str:
    """The gateway's own words for the change, then the statement as it will run (escaped)."""
    assert statement.measure is not None
    counted = f"{rows} {'row' if rows == 1 else 'rows'}"
    if statement.kind is DDL:
        counted = f"{rows} {statement.measure.unit}"
    words = QUESTIONS[str(statement.kind)].format(rows=counted, tables=target_of(statement), keyword=statement.keyword)
    return f"{printable(words)}\nThe statement, as it will run:\n{printable(statement.text)}"


@dataclass
class StatementCall(ClaimedWrite[StatementExecuteTool]):
    """One call of a statement execute tool, with its preview and the ``[statements.NAME]`` it holds to."""

    preview: StatementPreviewTool = field(kw_only=True)
    source: StatementSource = field(kw_only=True)
    statement: Statement | None = field(default=None, init=False)
    shown: dict[str, Any] = field(default_factory=dict, init=False)
    """What every audit entry of this call keeps beside the facts of its decision: the statement and its numbers."""
    reports_version: ClassVar[bool] = False

    @property
    def start_over(self) -> str:
        return self.config.preview

    def note(self, **facts: Any) -> None:
        """As any call notes its facts, with the statement's own kept in ``extra`` whatever else is noted there."""
        if "extra" in facts:
            facts["extra"] = {**self.shown, **facts["extra"]}
        super().note(**facts)

    def keep(self, **shown: Any) -> None:
        """Keep more of the statement's facts in this call's audit entry."""
        self.shown = {**self.shown, **shown}
        self.note(extra={**self.facts.extra, **self.shown})

    async def current(self, target: str) -> None:
        """Nothing to read: a statement's target is tables, and its measure needs the statement."""
        return None

    def statement_facts(self, plan: Plan) -> dict[str, Any] | None:
        return facts_of(self.statement, plan.summary["rows"]) if self.statement is not None else None

    async def measure_now(self, plan: Plan) -> Measured:
        """The statement's measure as it reads now; plan_stale unless it is the plan's (count and fingerprint)."""
        assert self.statement is not None
        backend = self.gw.config.backend_of(self.name)
        now = await measured(self.gw.backend_for(self.name), backend, self.source, self.statement)
        planned = Measured(plan.summary["rows"], plan.version)
        if now != planned:
            what = "count" if now.rows != planned.rows else "rows' fingerprint"
            raise ToolError(
                Code.PLAN_STALE,
                f"The rows the statement touches changed since the preview ({what}: {planned.rows} rows then,"
                f" {now.rows} now). Nothing was run. Call {self.config.preview} again.",
                next_tool=self.config.preview,
                details={"rowsPlanned": planned.rows, "rowsNow": now.rows},
            )
        return now

    async def prepared(self, plan: Plan) -> Sender:
        """Step 8 under the claimed key: measured once more, then the call built (nothing sent yet)."""
        await self.measure_now(plan)
        assert self.statement is not None
        return write_call(self.gw.backend_for(self.name), self.source, self.statement)

    async def outcome(self, plan: Plan, reply: Reply | None) -> Settlement:
        """Step 9: the server's answer, its reported count kept beside the measure."""
        said = PARSERS[self.source.answers](reply) if reply is not LOST else None
        if said is not None and said.kind == "failed":
            message = f"The database refused the statement. Call {self.config.preview} again before retrying."
            body = {"code": Code.BACKEND_ERROR.value, "message": message, "next_tool": self.config.preview}
            return Settlement("error", {**body, "details": {"backendMessage": said.message[:500]}})
        if said is None or said.rows:  # no answer, or one a write never gives: it may have run
            return Settlement("unknown", outcome_unknown_body(None))
        assert self.statement is not None
        measured_rows = plan.summary["rows"]
        reported = None if self.statement.kind in UNCOUNTED else said.count
        agree = None if reported is None else reported == measured_rows
        if agree is False:
            log.warning("%s: the server reports %s rows changed, the measure %s", self.name, reported, measured_rows)
        self.keep(rowsReported=reported, countsAgree=agree)
        return Settlement(
            "applied", {**plan_fields(plan, self.statement), "rowsReported": reported, "countsAgree": agree}
        )


async def decide(
    call: StatementCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    args: dict[str, Any],
) -> Answer:
    """Steps 3 to 9 of an admitted call: its answer, or a request for input."""
    plan_id, key = args["planId"], args["idempotencyKey"]
    return await carry_out(call, key, plan_id, lambda: _confirmed(call, ctx, params, plan_id, key))


async def _confirmed(
    call: StatementCall,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
    plan_id: str,
    key: str,
) -> Plan | Interim:
    """Steps 4-7: the live plan, its statement analysed again, its mode (tightened), the measure unchanged, the
    yes; the plan to claim."""
    gw, preview_name = call.gw, call.config.preview
    plan = live_plan(await gw.store.get_plan(plan_id, gw.clock()), call.caller, call.name, preview_name)
    call.note(target=plan.target, version_before=plan.version)
    text = str(plan.arguments[STATEMENT])
    statement = analysed(call.source, call.preview.statements, call.config.allowed(), text, "write")
    if statement.text != text:  # the normalised text reads back as itself: a plan that does not was not ours
        raise ToolError(Code.PLAN_NOT_FOUND, f"This plan states no statement of ours. Call {preview_name} again.")
    call.statement = statement
    call.keep(statement=statement.text, digest=statement.digest, rowsMeasured=plan.summary["rows"])
    # The plan was counted when it was issued, so the counters are read without it.
    call.counted_at = plan.expires_at - call.preview.plan_ttl_seconds
    choice = await call.tightened(plan, from_plan(plan.approval, call.config))
    asked = await ask(
        call,
        ctx,
        params,
        plan,
        key,
        question(statement, plan.summary["rows"]),
        choice,
        call.config.prompt_timeout_seconds,
        ready=lambda: _unchanged(call, plan),
        start_over=preview_name,
        policy=call.config.policy_of(choice.rule),
    )
    if asked is not None:
        return asked
    call.choice = choice
    return plan


async def _unchanged(call: StatementCall, plan: Plan) -> None:
    """Right before asking: the measure still the plan's (plan_stale otherwise). No name to show the page."""
    await call.measure_now(plan)
