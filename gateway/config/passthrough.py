"""Pass-through tools: a backend's own tools published on purpose, under the operator's name and hints.

A pass-through tool is one entry of a backend's allow-list: the backend's tool ``source`` (by default the
entry's own name), published as ``tools.NAME`` with an optional title and description override (the backend's own
title and descriptions, in its schemas too, are shown through the one escaper: gateway.text). Every hint is
stated here, because a hint left out would fall back to the MCP spec's defaults (``readOnlyHint: false``,
``destructiveHint: true``, ``idempotentHint: false``, ``openWorldHint: true``) and the gateway publishes no tool
whose hints nobody decided. The input and output schemas are the backend's, or the ones given here; the
gateway checks both directions against them. A tool that is not read-only is confirmed and idempotent like a
planned write (gateway.write.passthrough). Backend tools not listed stay hidden. What the gateway cannot derive of
its risk (how far its effect reaches, whether it can be undone: SEP-2793) the operator states in ``risk``; what is
left out is published as the worst case its hints allow (gateway.catalog.risk), never as the backend claims.

No entry re-publishes a god-tool: one whose source is the god-tool the planned tools wrap is refused when the
config loads (gateway.config.GatewayConfig), and one whose backend tool takes an action or command argument
(gateway.config.godtool) does not fit (``Misfit``), so it is never published. An operator who insists sets
``unsafe_republish_god_tool = true``, which needs ``read_only = false``: every call is then confirmed, keyed and
audited like a write, and ``check`` and ``serve`` say so.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.config.expressions import names_in
from gateway.config.face import IDEMPOTENCY_KEY, Face, Hints, Misfit
from gateway.config.godtool import action_argument
from gateway.config.kinds import READ_SCOPES, WRITE_SCOPES, ConfirmedTool, Sources
from gateway.config.risk import NOTHING_STATED, StatedRisk, refusal
from gateway.text import MAX_NAME, printable, quoted

SPEC_DEFAULTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
"""What a client assumes for a hint a tool does not state (MCP 2025-11-25, ToolAnnotations)."""


class PassthroughTool(ConfirmedTool):
    kind: Literal["passthrough"]
    source: str | None = None
    title: str | None = None
    description: str | None = None
    annotations: Hints
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    timeout_seconds: float | None = Field(None, gt=0)
    target_argument: str | None = None
    message: str | None = None
    approval_ttl_seconds: int = Field(600, ge=10)
    """How long a url-mode call's approval stays open for people to decide (its implied plan lives as long)."""
    unsafe_republish_god_tool: bool = False
    risk: StatedRisk = NOTHING_STATED
    """The operator's decisions about its risk (SEP-2793), never the backend's claims (gateway.config.risk)."""

    @model_validator(mode="after")
    def _confirmable(self) -> PassthroughTool:
        if self.unsafe_republish_god_tool and self.annotations.read_only:
            raise ValueError(
                "unsafe_republish_god_tool needs annotations.read_only = false: a god-tool's every call is then "
                "confirmed, keyed and audited"
            )
        if not self.writes and (self.confirm != "form" or self.approval or self.approvers != 1):
            raise ValueError("confirm, approvers and approval rules are for a tool that writes (read_only = false)")
        if "typed" in self.modes() and self.target_argument is None:
            raise ValueError("confirm = 'typed' needs target_argument (the argument the user must type)")
        contradicted = refusal(self.risk, self.annotations.read_only, self.annotations.destructive)
        if contradicted is not None:
            raise ValueError(contradicted)
        for schema, key in ((self.input_schema, "input_schema"), (self.output_schema, "output_schema")):
            if schema is not None and schema.get("type") != "object":
                raise ValueError(f"{key} must be a JSON Schema of type 'object'")
        return self

    @property
    def writes(self) -> bool:
        """Whether calls are confirmed and recorded like a planned write (anything not read-only)."""
        return not self.annotations.read_only

    def source_name(self, published: str) -> str:
        """The backend's name for this tool."""
        return self.source or published

    def relayed(self, name: str) -> str | None:
        return self.source_name(name)

    def stated_risk(self) -> StatedRisk:
        return self.risk

    def republishes_god_tool(self) -> bool:
        return self.unsafe_republish_god_tool

    @property
    def relays(self) -> bool:
        return True

    def default_scopes(self) -> list[str]:
        return WRITE_SCOPES if self.writes else READ_SCOPES

    def modes(self) -> set[str]:
        return super().modes() if self.writes else set()

    def prompt_seconds(self) -> float:
        return self.prompt_timeout_seconds

    def write_timeout(self) -> tuple[str, float] | None:
        seconds = self.timeout_seconds
        return None if seconds is None or not self.writes else ("timeout_seconds", seconds)

    def backend_action(self, name: str) -> str:
        return f"tool {self.source_name(name)}"

    def face(self, name: str, sources: Sources) -> Face:
        """The backend's own tool under the operator's name, hints and schemas. A tool that writes gets the
        gateway's ``idempotencyKey`` input and ``replayed`` output."""
        source = self.source_name(name)
        matches = [tool for tool in sources.listing if tool.name == source]
        if not matches:
            listed = sorted(tool.name for tool in sources.listing)
            raise Misfit(f"tools.{name}.source", f"the backend has no tool {source!r}; it has {listed}")
        if len(matches) > 1:
            raise Misfit(
                f"tools.{name}.source",
                f"the backend lists two tools named {quoted(source, MAX_NAME)}: which one would be published cannot "
                "be told, so neither is",
            )
        found = matches[0]
        if not self.unsafe_republish_god_tool:
            for schema in (found.input_schema, self.input_schema or {}):
                argument = action_argument(schema)
                if argument is not None:
                    raise Misfit(f"tools.{name}.source", god_tool_sentence(source, f"takes {argument}"))
        if self.input_schema is not None:
            inputs = dict(self.input_schema)
        else:  # strict, like every published tool: only the arguments the backend declares are passed on
            inputs = {**shown_schema(found.input_schema), "additionalProperties": False}
        outputs = self.output_schema if self.output_schema is not None else shown_schema(found.output_schema)
        if outputs is None:
            raise Misfit(f"tools.{name}.output_schema", f"{source} declares no outputSchema; state one here")
        if inputs.get("type") != "object" or outputs.get("type") != "object":
            raise Misfit(f"tools.{name}.source", f"{source}'s schemas are not of type 'object'")
        properties = inputs.get("properties", {})
        if self.writes:
            inputs = _with_property(name, inputs, "idempotencyKey", IDEMPOTENCY_KEY, "input_schema")
            outputs = _with_property(name, outputs, "replayed", {"type": "boolean"}, "output_schema")
        if self.target_argument is not None and self.target_argument not in properties:
            raise Misfit(f"tools.{name}.target_argument", f"{source} has no argument {self.target_argument!r}")
        unknown = names_in(self.message or "") - {"tool", "arguments", *properties}
        if unknown:
            raise Misfit(
                f"tools.{name}.message", f"uses {{{sorted(unknown)[0]}}}, which is not an argument of {source}"
            )
        title = self.title or _shown(found.title)
        return Face(title, self.description or _shown(found.description), inputs, outputs, self.annotations)


def shown_schema(schema: Any) -> Any:
    """A backend's JSON Schema with every ``title`` and ``description`` through the one escaper: the words a model
    and a person read of it carry no invisible character (bidi text, Unicode tags); what validates is unchanged."""
    if isinstance(schema, dict):
        return {
            key: printable(value) if key in ("title", "description") and isinstance(value, str) else shown_schema(value)
            for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [shown_schema(item) for item in schema]
    return schema


def _shown(text: str | None) -> str | None:
    return printable(text) if text is not None else None


def god_tool_sentence(source: str, why: str) -> str:
    """Why a pass-through of a god-tool is refused, and the ways on."""
    return (
        f"{quoted(source, MAX_NAME)} {why}: it is a god-tool, and publishing it would let any caller run every one of "
        "its actions with no preview, prompt, key or audit. Wrap its actions as read, preview and write tools "
        "instead (or, to insist, set unsafe_republish_god_tool = true and read_only = false: every call is then "
        "confirmed, keyed and audited)"
    )


def _with_property(name: str, schema: dict[str, Any], prop: str, prop_schema: Any, key: str) -> dict[str, Any]:
    properties = schema.get("properties", {})
    if prop in properties:
        raise Misfit(f"tools.{name}.{key}", f"already has a {prop!r} property, which the gateway adds itself")
    required = [*schema.get("required", []), prop]
    return {**schema, "properties": {**properties, prop: prop_schema}, "required": required}
