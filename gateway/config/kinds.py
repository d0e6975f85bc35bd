"""The tool kinds built on the god-tool (read, preview, write); a backend's own tools are gateway.config.passthrough.

Each kind is its config model, and the model answers what is data about it, so that no caller tests its class:

    writes, relays                          asks and is recorded like a write; relays a backend's own tool
    default_scopes                          the scopes a caller needs when the tool states none
    face                                    title, description, schemas and hints (gateway.config.face)
    modes, prompt_seconds, write_timeout    the confirmation and the timeouts it configures
    lookups_named, schema_preview           what it refers to: lookups, the preview whose plan it shows
    relayed, republishes_god_tool           the backend tool it relays; the override that lets it be a god-tool
    backend_action                          what ``check``'s table says it calls

``ToolKind`` asks each question with the answer most kinds give; a kind overrides what differs. Where a kind's
own fields are wanted (a write names its preview; ``check`` reads a list's or a target's mapping), ``as_read``,
``as_preview``, ``as_write`` and ``as_confirmed`` (how a tool that writes is confirmed: ``ConfirmedTool``) hand
them over, typed. A call needs the running gateway, above the config: gateway.tools.kinds carries calls out, the
one module that tells the classes apart. A new kind is its model, its entry in ``gateway.config.ToolConfig`` and
its call in gateway.tools.kinds.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from gateway.config.approvals import ApprovalRule
from gateway.config.expressions import MISSING, at_path, names_in
from gateway.config.face import CURSOR, IDEMPOTENCY_KEY, PLAN_ID, READ_ONLY, Face, Hints, object_schema
from gateway.config.mapping import Call, InputField, OutputField, SummaryField, Target
from gateway.config.sections import Model, RateLimit

if TYPE_CHECKING:  # a backend's listing, for annotations only: the config loads no MCP types
    from mcp_types import Tool

READ_SCOPES = ["tenants:read"]
WRITE_SCOPES = ["tenants:reset"]


@dataclass(frozen=True)
class Sources:
    """What a tool's face is built from beyond its own table; the catalog gathers it (gateway.catalog.published)."""

    preview: PreviewTool | None
    """The preview whose inputs and plan the tool shows (``schema_preview``)."""
    enums: Mapping[str, list[str]]
    """The names offered of each lookup an input enum reads."""
    listing: Sequence[Tool]
    """The tools of the backend that serves it, as its ``tools/list`` says."""


class ToolKind(Model):
    """What every kind of tool answers; the access fields (backend, scopes, visibility, rate limit) are shared."""

    backend: str | None = None
    scopes: list[str] | None = None
    hidden_when_unauthorized: bool = True
    rate_limit: RateLimit | None = None

    @property
    def writes(self) -> bool:
        """Whether a call asks the user and is recorded like a planned write."""
        return False

    @property
    def relays(self) -> bool:
        """Whether it relays one of its backend's own tools (whose listing its face needs) instead of the god-tool."""
        return False

    def default_scopes(self) -> list[str]:
        """The scopes a caller needs when the tool states none."""
        return READ_SCOPES

    def modes(self) -> set[str]:
        """Every confirmation mode a call can get (``form``, ``typed``, ``url``); none for a tool that never asks."""
        return set()

    def prompt_seconds(self) -> float | None:
        """How long a prompt for this tool may wait, when its kind configures one."""
        return None

    def write_timeout(self) -> tuple[str, float] | None:
        """The key and seconds of this tool's own timeout for a call that writes, when it sets one."""
        return None

    def lookups_named(self) -> dict[str, str]:
        """The lookups it reads, by the key (under ``tools.NAME``) that names each."""
        return {}

    def schema_preview(self, name: str) -> str | None:
        """The preview tool whose inputs and plan its schemas show (a preview: itself, named ``name``)."""
        return None

    def relayed(self, name: str) -> str | None:
        """The backend's own tool it relays when published as ``name``, or None (it calls the god-tool)."""
        return None

    def republishes_god_tool(self) -> bool:
        """Whether the operator insists on publishing a god-tool through it (gateway.config.passthrough)."""
        return False

    def as_read(self) -> ReadTool | None:
        """This tool as a read tool, when it is one."""
        return None

    def as_preview(self) -> PreviewTool | None:
        """This tool as a preview tool, when it is one."""
        return None

    def as_write(self) -> WriteTool | None:
        """This tool as a planned write tool, when it is one."""
        return None

    def as_confirmed(self) -> ConfirmedTool | None:
        """This tool's confirmation settings, when its calls write (a planned write, a pass-through that writes)."""
        return None

    @abstractmethod
    def backend_action(self, name: str) -> str:
        """What it calls on its backend, as ``check``'s tool table shows it."""

    @abstractmethod
    def face(self, name: str, sources: Sources) -> Face:
        """Its title, description, schemas and hints (Misfit when it cannot fit what its backend offers)."""


class ReadTool(ToolKind):
    kind: Literal["read"]
    call: Call
    title: str | None = None
    description: str
    items_key: str = "items"
    sort_key: str = "id"
    listing_seconds: float = Field(5.0, ge=0)
    fields: dict[str, OutputField]
    default_limit: int = Field(20, ge=1)
    max_limit: int = Field(50, ge=1, le=50)

    @model_validator(mode="after")
    def _default_within_max(self) -> ReadTool:
        if self.default_limit > self.max_limit:
            raise ValueError("default_limit must not exceed max_limit")
        return self

    def as_read(self) -> ReadTool:
        return self

    def backend_action(self, name: str) -> str:
        return self.call.action

    def face(self, name: str, sources: Sources) -> Face:
        limit = {"type": "integer", "minimum": 1, "maximum": self.max_limit, "default": self.default_limit}
        item = object_schema({field_name: field.json_schema for field_name, field in self.fields.items()})
        items = {"type": "array", "maxItems": self.max_limit, "items": item}
        return Face(
            self.title,
            self.description,
            object_schema({"limit": limit, "cursor": CURSOR}, required=[]),
            object_schema({self.items_key: items, "nextCursor": CURSOR}, required=[self.items_key]),
            READ_ONLY,
        )


class PreviewTool(ToolKind):
    kind: Literal["preview"]
    title: str | None = None
    description: str
    target: Target
    inputs: dict[str, InputField]
    summary: dict[str, SummaryField] = {}
    message: str
    plan_ttl_seconds: int = Field(600, ge=1)

    @model_validator(mode="after")
    def _consistent(self) -> PreviewTool:
        targets = [name for name, field in self.inputs.items() if field.target]
        if len(targets) != 1:
            raise ValueError("exactly one input must have target = true")
        for name, field in self.summary.items():
            if field.key is not None and field.key not in self.inputs:
                raise ValueError(f"summary.{name}.key names {field.key!r}, which is not an input")
        overlap = set(self.inputs) & set(self.summary)
        if overlap:
            raise ValueError(f"{sorted(overlap)[0]!r} is both an input and a summary field")
        version = self.target.version_output
        if version in {*self.inputs, *self.summary, "planId", "expiresAt", "replayed", "approval"}:
            raise ValueError(f"target.version_output {version!r} is already a field of the output")
        unknown = names_in(self.message) - self.template_names()
        if unknown:
            raise ValueError(
                f"message uses {{{sorted(unknown)[0]}}}; available: {', '.join(sorted(self.template_names()))}"
            )
        return self

    @property
    def target_input(self) -> str:
        """The input that names the target."""
        return next(name for name, field in self.inputs.items() if field.target)

    def template_names(self) -> set[str]:
        """The names a message or write payload may use."""
        return {"target_id", "version", "noun", *self.inputs, *self.summary}

    @property
    def lookups_used(self) -> list[str]:
        """The lookups the summary reads, each once."""
        return sorted({field.lookup for field in self.summary.values() if field.lookup is not None})

    def summary_of(
        self, arguments: Mapping[str, Any], state: Any, tables: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        """The numbers a plan states, from the target's state and the lookup tables (MISSING where absent)."""
        values = {}
        for name, field in self.summary.items():
            if field.target is not None:
                values[name] = at_path(state, field.target)
            else:
                assert field.lookup is not None and field.key is not None
                values[name] = tables.get(field.lookup, {}).get(str(arguments.get(field.key)), MISSING)
        return values

    def as_preview(self) -> PreviewTool:
        return self

    def backend_action(self, name: str) -> str:
        return self.target.get.action

    def lookups_named(self) -> dict[str, str]:
        named = {f"inputs.{name}.enum_from": field.enum_from for name, field in self.inputs.items()}
        named.update({f"summary.{name}.lookup": field.lookup for name, field in self.summary.items()})
        return {key: lookup for key, lookup in named.items() if lookup is not None}

    def schema_preview(self, name: str) -> str:
        return name

    def enum_lookups(self) -> list[str]:
        """The lookups whose names an input offers as its enum."""
        return [field.enum_from for field in self.inputs.values() if field.enum_from is not None]

    def input_schemas(self, enums: Mapping[str, list[str]]) -> dict[str, Any]:
        """Each input's JSON Schema, with an enum read from a lookup filled in from ``enums``."""
        schemas = {name: field.json_schema for name, field in self.inputs.items()}
        for name, field in self.inputs.items():
            if field.enum_from is not None:
                schemas[name] = {**field.json_schema, "enum": enums[field.enum_from]}
        return schemas

    def plan_fields(self, enums: Mapping[str, list[str]]) -> tuple[dict[str, Any], list[str]]:
        """The fields a plan shows a client (the preview's output and its write's share them), and those always
        present."""
        fields = {
            "planId": PLAN_ID,
            **self.input_schemas(enums),
            **{name: field.json_schema for name, field in self.summary.items()},
            self.target.version_output: self.target.version_schema,
        }
        return fields, [name for name in fields if name not in self.inputs or self.inputs[name].required]

    def face(self, name: str, sources: Sources) -> Face:
        fields, always = self.plan_fields(sources.enums)
        expires = {"type": "string", "format": "date-time"}
        modes = {
            "mode": {"enum": ["form", "typed", "url"]},
            "rule": {"type": "string"},
            "unevaluable": {"type": "string"},
        }
        approval = object_schema(modes, required=["mode"])  # no rule: the tool's own confirm decided
        outputs = object_schema(
            {**fields, "expiresAt": expires, "approval": approval}, required=[*always, "expiresAt", "approval"]
        )
        required = [input_name for input_name, field in self.inputs.items() if field.required]
        inputs = object_schema(self.input_schemas(sources.enums), required=required)
        return Face(self.title, self.description, inputs, outputs, READ_ONLY)


class ConfirmedTool(ToolKind):
    """How a tool's writes are confirmed: the tool's own ``confirm`` and its ordered approval rules (planned writes
    and pass-through tools that write alike; gateway.approvals.policy decides with them)."""

    confirm: Literal["form", "typed", "url"] = "form"
    approvers: int = Field(1, ge=1, le=10)
    four_eyes: bool = False
    approval: list[ApprovalRule] = []
    """Ordered rules choosing each write's mode; none holding (or none given) leaves ``confirm``."""
    prompt_timeout_seconds: float = Field(300.0, gt=0)
    idempotency_retention_seconds: int = Field(86_400, ge=60)

    @model_validator(mode="after")
    def _approvers_need_the_page(self) -> ConfirmedTool:
        if self.confirm != "url" and (self.approvers != 1 or self.four_eyes):
            raise ValueError("approvers and four_eyes need confirm = 'url' (people approve on the approval page)")
        names = [rule.name for rule in self.approval]
        if len(names) != len(set(names)):
            raise ValueError("every approval rule needs its own name")
        return self

    def modes(self) -> set[str]:
        """Every confirmation mode a write of this tool can get."""
        on_error = {rule.on_error for rule in self.approval if rule.on_error is not None}
        return {self.confirm, *(rule.mode for rule in self.approval), *on_error}

    def as_confirmed(self) -> ConfirmedTool | None:
        return self if self.writes else None


class WriteTool(ConfirmedTool):
    kind: Literal["write"]
    preview: str
    call: Call
    title: str | None = None
    description: str
    result: dict[str, str] = {}
    version_from: str | None = None
    destructive: bool = True
    open_world: bool = False

    @property
    def writes(self) -> bool:
        return True

    def as_write(self) -> WriteTool:
        return self

    def default_scopes(self) -> list[str]:
        return WRITE_SCOPES

    def prompt_seconds(self) -> float:
        return self.prompt_timeout_seconds

    def write_timeout(self) -> tuple[str, float] | None:
        seconds = self.call.timeout_seconds
        return None if seconds is None else ("call.timeout_seconds", seconds)

    def backend_action(self, name: str) -> str:
        return self.call.action

    def schema_preview(self, name: str) -> str:
        return self.preview

    def face(self, name: str, sources: Sources) -> Face:
        assert sources.preview is not None  # the config names a preview for every write tool
        fields, always = sources.preview.plan_fields(sources.enums)
        hints = Hints(read_only=False, destructive=self.destructive, idempotent=True, open_world=self.open_world)
        return Face(
            self.title,
            self.description,
            object_schema({"planId": PLAN_ID, "idempotencyKey": IDEMPOTENCY_KEY}),
            object_schema({**fields, "replayed": {"type": "boolean"}}, required=[*always, "replayed"]),
            hints,
        )
