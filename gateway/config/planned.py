"""A planned write's two tools: the preview that issues a plan (``kind = "preview"``) and the write that applies
it (``kind = "write"``).

The preview reads a target through a mapped action, states the numbers of the change (``summary``, from the target
or a lookup) and answers a caller-bound, expiring plan; the write takes only ``planId`` and ``idempotencyKey`` and
shows the same plan fields. The write names its preview: the preview's backend serves it, its payload and message
use the names the preview's plan offers (``template_names``), and its ``result`` names the preview's numbers.
What their calls do is the registry's (gateway.tools.kinds.preview, gateway.tools.kinds.write);
gateway.config.kinds lists what every kind's model answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.config.expressions import MISSING, at_path, names_in
from gateway.config.face import IDEMPOTENCY_KEY, PLAN_ID, READ_ONLY, Face, Hints, object_schema
from gateway.config.kinds import WRITE_SCOPES, ConfirmedTool, Sources, ToolKind, Whole
from gateway.config.mapping import Call, InputField, SummaryField, Target
from gateway.config.risk import StatedRisk


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

    def backend_action(self, name: str) -> str:
        return self.target.get.action

    def lookups_named(self) -> dict[str, str]:
        named = {f"inputs.{name}.enum_from": field.enum_from for name, field in self.inputs.items()}
        named.update({f"summary.{name}.lookup": field.lookup for name, field in self.summary.items()})
        return {key: lookup for key, lookup in named.items() if lookup is not None}

    def schema_preview(self, name: str) -> str:
        return name

    def summary_names(self) -> set[str]:
        return set(self.summary)

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

    def default_scopes(self) -> list[str]:
        return WRITE_SCOPES

    def prompt_seconds(self) -> float:
        return self.prompt_timeout_seconds

    def write_timeout(self) -> tuple[str, float] | None:
        seconds = self.call.timeout_seconds
        return None if seconds is None else ("call.timeout_seconds", seconds)

    def backend_action(self, name: str) -> str:
        return self.call.action

    def plans_from(self) -> str:
        return self.preview

    def stated_risk(self) -> StatedRisk:
        """A planned write changes the one target its plan names."""
        return StatedRisk(blast_radius="item")

    def schema_preview(self, name: str) -> str:
        return self.preview

    def check_references(self, name: str, whole: Whole) -> None:
        """Its preview issues the plans it applies, with every name its payload uses and every field its result
        reads; then its confirmation (``ConfirmedTool``)."""
        named = whole.tools.get(self.preview)
        available = named.template_names() if named is not None else None
        if named is None or available is None or named.statements_named() is not None:
            raise ValueError(f"tools.{name}.preview must name a tool of kind 'preview'")
        unknown = names_in(self.call.payload) - available
        if unknown:
            raise ValueError(
                f"tools.{name}.call.payload uses {{{sorted(unknown)[0]}}}; available: {', '.join(sorted(available))}"
            )
        extra = set(self.result) - named.summary_names()
        if extra:
            raise ValueError(f"tools.{name}.result.{sorted(extra)[0]} is not a summary field of {self.preview}")
        super().check_references(name, whole)

    def face(self, name: str, sources: Sources) -> Face:
        shown = sources.preview.plan_fields(sources.enums) if sources.preview is not None else None
        assert shown is not None  # the config names a preview for every write tool (check_references)
        fields, always = shown
        hints = Hints(read_only=False, destructive=self.destructive, idempotent=True, open_world=self.open_world)
        return Face(
            self.title,
            self.description,
            object_schema({"planId": PLAN_ID, "idempotencyKey": IDEMPOTENCY_KEY}),
            object_schema({**fields, "replayed": {"type": "boolean"}}, required=[*always, "replayed"]),
            hints,
        )
