"""Statement-executing backend tools: a server whose one tool runs whatever SQL it is given (dbhub's
``execute_sql``, mcp-alchemy's ``execute_query``), wrapped from TOML alone by three tool kinds.

    StatementSource        ``[statements.NAME]``: the backend's tool that runs statements, its SQL argument, the
                           dialect, how the server answers, an optional read-only tool for reads and measures, and
                           the tables and functions every statement is held to (gateway.statements.rules)
    StatementQueryTool     ``kind = "statement_query"``: relays reads only, bounded in rows and bytes
    StatementPreviewTool   ``kind = "statement_preview"``: classifies one write, measures it through the backend's
                           own tool, issues a caller-bound, expiring plan
    StatementExecuteTool   ``kind = "statement_execute"``: runs exactly a previewed statement, once per key, after a
                           person's yes; names the classes it may write (DDL and TRUNCATE only when listed, and then
                           four eyes by default: ``four_eyes_classes``)

The published inputs are the gateway's own (``sql``; ``planId`` and ``idempotencyKey``), whatever the backend calls
its argument; the backend's listing is read only to confirm that its tool and argument exist (a tool that does not
fit is not published, and ``check`` names the key). What the calls do is the registry's
(gateway.tools.kinds.statement_query, statement_preview, statement_execute).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from gateway.config.face import IDEMPOTENCY_KEY, PLAN_ID, READ_ONLY, Face, Hints, Misfit, object_schema
from gateway.config.kinds import WRITE_SCOPES, ConfirmedTool, Sources, ToolKind, Whole
from gateway.config.risk import Recommendation
from gateway.config.sections import Model
from gateway.text import MAX_NAME, quoted

WriteClass = Literal["insert", "update", "delete", "ddl", "truncate"]
SQL_INPUT = {"type": "string", "minLength": 1}
CLASSES = ["insert", "update", "delete", "ddl", "truncate"]
"""The classes of write a statement may be (gateway.statements.model.StatementClass)."""
MAX_LENGTH = 20_000
"""The default size limit, in characters (gateway.statements.rules.MAX_LENGTH)."""
DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
NAMES = {"type": "array", "items": {"type": "string", "maxLength": 256}, "maxItems": 64}

QUERY_DESCRIPTION = (
    "Run one read-only SQL statement (SELECT, or WITH ... SELECT) and get its rows, at most {rows} of them and"
    " {bytes} bytes (truncated says when more were left out). Writes are refused here: preview them with {preview}."
)
PREVIEW_DESCRIPTION = (
    "Preview one SQL write (INSERT, UPDATE or DELETE; DDL or TRUNCATE only where allowed): the gateway classifies"
    " it, counts the rows it would change, and answers a plan (planId) with the exact statement that would run."
    " Changes nothing. Then call {write} with the planId to run it after the user confirms."
)
EXECUTE_DESCRIPTION = (
    "Run exactly the statement a {preview} plan states, once, after the user confirms. Takes only planId and"
    " idempotencyKey; a retry with the same key returns the first answer without running it again."
)


class StatementSource(Model):
    """A backend tool that executes statements, and the rules every statement sent to it is held to."""

    tool: str = Field(min_length=1)
    """The backend's tool that runs a statement (dbhub: ``execute_sql``; mcp-alchemy: ``execute_query``)."""
    argument: str = Field("sql", min_length=1)
    """Its argument holding the SQL (dbhub: ``sql``; mcp-alchemy: ``query``)."""
    read_tool: str | None = None
    """A tool of the same server that runs statements without write access (dbhub's read-only source,
    ``execute_sql_reader``): reads and measuring reads go there. Unset: they go to ``tool``."""
    dialect: Literal["postgres", "sqlite"]
    answers: Literal["dbhub", "mcp-alchemy"]
    """How the server answers: dbhub's JSON, or mcp-alchemy's text."""
    tables: list[str] = Field(min_length=1)
    """The tables a statement may touch (read or write), as the dialect names them."""
    writing_functions: list[str] = []
    """Functions refused on top of the dialect's built-in list (user-defined functions that write)."""
    max_length: int = Field(MAX_LENGTH, ge=1, le=100_000)
    timeout_seconds: float | None = Field(None, gt=0)

    @field_validator("tables")
    @classmethod
    def _distinct(cls, tables: list[str]) -> list[str]:
        if len(set(tables)) != len(tables):
            raise ValueError("a table is listed twice")
        return tables

    @model_validator(mode="after")
    def _tables_parse(self) -> StatementSource:
        # The parsers load only for a config that has statements (the write path's decisions import the config).
        from gateway.statements.analysis import allowed_tables
        from gateway.statements.model import Dialect

        allowed_tables(Dialect(self.dialect), self.tables)  # ValueError naming an entry that is no table name
        return self

    def read_through(self) -> str:
        """The backend tool reads and measures are sent to."""
        return self.read_tool or self.tool

    def fit(self, key: str, sources: Sources) -> None:
        """Misfit (naming ``key``) unless the backend lists the tools this source calls, with its argument."""
        listed = {tool.name: tool for tool in sources.listing}
        for tool in {self.tool, self.read_through()}:
            found = listed.get(tool)
            if found is None:
                raise Misfit(key, f"the backend has no tool {quoted(tool, MAX_NAME)}; it has {sorted(listed)}")
            properties = found.input_schema.get("properties", {})
            if self.argument not in properties:
                raise Misfit(
                    key,
                    f"{quoted(tool, MAX_NAME)} has no argument {quoted(self.argument, MAX_NAME)}; it has "
                    f"{sorted(properties)} (set argument)",
                )


class StatementTool(ToolKind):
    """What the query and the preview share: the statements they hold to, and their words."""

    statements: str
    title: str | None = None
    description: str | None = None
    timeout_seconds: float | None = Field(None, gt=0)

    @property
    def relays(self) -> bool:
        return True  # its face needs the backend's listing (its tool and argument must be there)

    def statements_named(self) -> str:
        return self.statements

    def backend_action(self, name: str) -> str:
        return f"statements {self.statements}"

    def check_references(self, name: str, whole: Whole) -> None:
        super().check_references(name, whole)
        if self.statements not in whole.statements:
            raise ValueError(f"tools.{name}.statements: no [statements.{self.statements}] table")

    def source(self, name: str, sources: Sources) -> StatementSource:
        """Its ``[statements.NAME]``, fit to the backend's listing (Misfit otherwise)."""
        source = sources.whole.statements.get(self.statements) if sources.whole is not None else None
        if not isinstance(source, StatementSource):
            raise Misfit(f"tools.{name}.statements", f"no [statements.{self.statements}] table")
        source.fit(f"statements.{self.statements}", sources)
        return source


def partner(sources: Sources, found: Callable[[ToolKind], bool], otherwise: str) -> str:
    """The name of the configured tool ``found`` picks (a query's preview, a preview's execute tool)."""
    tools = sources.whole.tools if sources.whole is not None else {}
    return next((name for name, tool in tools.items() if found(tool)), otherwise)


class StatementQueryTool(StatementTool):
    kind: Literal["statement_query"]
    max_rows: int = Field(100, ge=1, le=1000)
    max_bytes: int = Field(65_536, ge=256, le=4_194_304)

    def face(self, name: str, sources: Sources) -> Face:
        self.source(name, sources)
        preview = partner(
            sources,
            lambda tool: tool.statements_named() == self.statements and tool.template_names() is not None,
            "the statement preview tool",
        )
        description = self.description or QUERY_DESCRIPTION.format(
            rows=self.max_rows, bytes=self.max_bytes, preview=preview
        )
        rows = {"type": "array", "maxItems": self.max_rows, "items": {"type": "object"}}
        outputs = object_schema(
            {
                "statement": {"type": "string"},
                "rows": rows,
                "rowCount": {"type": "integer", "minimum": 0, "maximum": self.max_rows},
                "truncated": {"type": "boolean"},
            }
        )
        inputs = object_schema({"sql": {**SQL_INPUT, "description": "one SELECT statement, without ';'"}})
        return Face(self.title, description, inputs, outputs, READ_ONLY)


class StatementPreviewTool(StatementTool):
    kind: Literal["statement_preview"]
    plan_ttl_seconds: int = Field(600, ge=1)

    def schema_preview(self, name: str) -> str:
        return name

    def template_names(self) -> set[str]:
        return set()  # its plans hold a statement, never a payload template

    def plan_fields(self, enums: Mapping[str, list[str]]) -> tuple[dict[str, Any], list[str]]:
        """The fields a plan shows a client (the preview's output and its execute tool's share them)."""
        fields = {
            "planId": PLAN_ID,
            "statement": {"type": "string"},
            "class": {"enum": CLASSES},
            "tables": NAMES,
            "written": NAMES,
            "rows": {"type": "integer", "minimum": 0},
            "unit": {"type": "string"},
            "digest": DIGEST,
            "fingerprint": {"type": "string", "maxLength": 64},
        }
        return fields, [name for name in fields if name != "fingerprint"]

    def face(self, name: str, sources: Sources) -> Face:
        self.source(name, sources)
        write = partner(sources, lambda tool: tool.plans_from() == name, "the statement execute tool")
        description = self.description or PREVIEW_DESCRIPTION.format(write=write)
        fields, always = self.plan_fields({})
        approval = object_schema(
            {"mode": {"enum": ["form", "typed", "url"]}, "rule": {"type": "string"}, "unevaluable": {"type": "string"}},
            required=["mode"],
        )
        expires = {"type": "string", "format": "date-time"}
        outputs = object_schema(
            {**fields, "expiresAt": expires, "approval": approval}, required=[*always, "expiresAt", "approval"]
        )
        inputs = object_schema({"sql": {**SQL_INPUT, "description": "one INSERT, UPDATE or DELETE, without ';'"}})
        return Face(self.title, description, inputs, outputs, READ_ONLY)


class StatementExecuteTool(ConfirmedTool):
    kind: Literal["statement_execute"]
    preview: str
    title: str | None = None
    description: str | None = None
    classes: list[WriteClass] = ["insert", "update", "delete"]
    """The classes of statement this tool may run (its preview plans no other)."""
    four_eyes_classes: list[Literal["ddl", "truncate"]] = ["ddl", "truncate"]
    """Of those, the ones that need people on the approval page, four eyes (at least), whatever the rules say."""
    timeout_seconds: float | None = Field(None, gt=0)
    destructive: bool = True

    @field_validator("classes")
    @classmethod
    def _some(cls, classes: list[str]) -> list[str]:
        if not classes or len(set(classes)) != len(classes):
            raise ValueError("list each class once, at least one")
        return classes

    @property
    def writes(self) -> bool:
        return True

    @property
    def relays(self) -> bool:
        return True  # it sends statements to its backend's own tool, never to a god-tool

    def allowed(self) -> frozenset[str]:
        """The classes its preview plans."""
        return frozenset(self.classes)

    def four_eyes_for(self) -> frozenset[str]:
        """The classes it may run that need four eyes on the approval page."""
        return frozenset(self.classes) & frozenset(self.four_eyes_classes)

    def default_scopes(self) -> list[str]:
        return WRITE_SCOPES

    def modes(self) -> set[str]:
        return super().modes() | ({"url"} if self.four_eyes_for() else set())

    def approval_recommendation(self) -> Recommendation:
        """``multi`` when a class it may run needs four eyes (the most a call can meet), else as configured."""
        return "multi" if self.four_eyes_for() else super().approval_recommendation()

    def prompt_seconds(self) -> float:
        return self.prompt_timeout_seconds

    def write_timeout(self) -> tuple[str, float] | None:
        return None if self.timeout_seconds is None else ("timeout_seconds", self.timeout_seconds)

    def backend_action(self, name: str) -> str:
        return f"statements planned by {self.preview}"

    def plans_from(self) -> str:
        return self.preview

    def schema_preview(self, name: str) -> str:
        return self.preview

    def check_references(self, name: str, whole: Whole) -> None:
        """Its preview is a statement preview; a class that needs four eyes needs approvers who can sign in and a
        caller the gateway can tell apart from them; then its confirmation (``ConfirmedTool``)."""
        named = whole.tools.get(self.preview)
        if named is None or named.statements_named() is None or named.template_names() is None:
            raise ValueError(f"tools.{name}.preview must name a tool of kind 'statement_preview'")
        four_eyes = sorted(self.four_eyes_for())
        if four_eyes and (not whole.approvals.configured or whole.auth.verifier == "none"):
            raise ValueError(
                f"tools.{name}.classes lists {', '.join(four_eyes)}, which people approve on the approval page with "
                "four eyes (four_eyes_classes): configure [auth] and [approvals], or set four_eyes_classes = []"
            )
        super().check_references(name, whole)

    def face(self, name: str, sources: Sources) -> Face:
        shown = sources.preview.plan_fields(sources.enums) if sources.preview is not None else None
        assert shown is not None  # the config names a statement preview for every execute tool
        fields, always = shown
        reported = {
            "rowsReported": {"type": ["integer", "null"], "minimum": 0},
            "countsAgree": {"type": "boolean"},
            "replayed": {"type": "boolean"},
        }
        hints = Hints(read_only=False, destructive=self.destructive, idempotent=True, open_world=False)
        description = self.description or EXECUTE_DESCRIPTION.format(preview=self.preview)
        return Face(
            self.title,
            description,
            object_schema({"planId": PLAN_ID, "idempotencyKey": IDEMPOTENCY_KEY}),
            object_schema({**fields, **reported}, required=[*always, *reported]),
            hints,
        )
