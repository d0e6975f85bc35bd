"""Pass-through tools: a backend's own tools published on purpose, under the operator's name and hints.

A pass-through tool is one entry of a backend's allow-list: the backend's tool ``source`` (by default the
entry's own name), published as ``tools.NAME`` with an optional title and description override. Every hint is
stated here, because a hint left out would fall back to the MCP spec's defaults (``readOnlyHint: false``,
``destructiveHint: true``, ``idempotentHint: false``, ``openWorldHint: true``) and the gateway publishes no tool
whose hints nobody decided. The input and output schemas are the backend's, or the ones given here; the
gateway checks both directions against them. A tool that is not read-only is confirmed and idempotent like a
planned write (gateway.tools.passthrough). Backend tools not listed stay hidden.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.config.mapping import ToolAccess
from gateway.config.sections import Model

SPEC_DEFAULTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
"""What a client assumes for a hint a tool does not state (MCP 2025-11-25, ToolAnnotations)."""


class Hints(Model):
    """All four annotations, each stated by the operator (none has a default)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool

    @model_validator(mode="after")
    def _consistent(self) -> Hints:
        if self.read_only and self.destructive:
            raise ValueError("a read-only tool cannot be destructive: set destructive = false")
        return self


class PassthroughTool(ToolAccess):
    kind: Literal["passthrough"]
    source: str | None = None
    title: str | None = None
    description: str | None = None
    annotations: Hints
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    timeout_seconds: float | None = Field(None, gt=0)
    confirm: Literal["boolean", "typed"] = "boolean"
    target_argument: str | None = None
    message: str | None = None
    prompt_timeout_seconds: float = Field(300.0, gt=0)
    idempotency_retention_seconds: int = Field(86_400, ge=60)

    @model_validator(mode="after")
    def _confirmable(self) -> PassthroughTool:
        if self.confirm == "typed" and self.target_argument is None:
            raise ValueError("confirm = 'typed' needs target_argument (the argument the user must type)")
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
