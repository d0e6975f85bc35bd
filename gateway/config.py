"""The gateway's configuration: TOML in, frozen pydantic models out. The reference is docs/configuration.md.

A bad file fails at start with one sentence per problem naming the TOML key, for example
``tools.reset_tenant.confirm: Input should be 'boolean' or 'typed'``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gateway.templates import names_in

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "gateway.toml"
NON_NEGATIVE_INTEGER: dict[str, Any] = {"type": "integer", "minimum": 0}


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class GatewaySection(Model):
    name: str = "mcp-safety-gateway"
    store: str = "sqlite:var/gateway.db"
    state_dir: str = "var"
    stdio_caller: str = "local"


class Limits(Model):
    max_body_bytes: int = Field(1_048_576, gt=0)
    max_depth: int = Field(16, gt=0)
    max_elements: int = Field(10_000, gt=0)
    max_string_bytes: int = Field(65_536, gt=0)


class BackendSection(Model):
    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    url: str | None = None
    headers_from_env: dict[str, str] = {}
    tool: str = "manage_tenant"
    action_argument: str = "action"
    payload_argument: str = "payload"
    call_timeout_seconds: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _transport_needs_its_target(self) -> BackendSection:
        if self.transport == "stdio" and not self.command:
            raise ValueError("transport 'stdio' needs backend.command")
        if self.transport == "http" and not self.url:
            raise ValueError("transport 'http' needs backend.url")
        return self


class Call(Model):
    """One god-tool action: its payload template and where the useful data sits in its result."""

    action: str
    payload: dict[str, Any] = {}
    path: str = ""


class Lookup(Model):
    """A table of values: inline, or read once from a backend action (a JSON object at ``path``)."""

    call: Call | None = None
    values: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Lookup:
        if (self.call is None) == (self.values is None):
            raise ValueError("a lookup needs exactly one of 'call' or 'values'")
        return self


class OutputField(Model):
    """A field of a tool's output, projected from a path in the backend's item."""

    source: str = Field(alias="from")
    json_schema: dict[str, Any] = Field(alias="schema")


class ReadTool(Model):
    kind: Literal["read"]
    call: Call
    title: str | None = None
    description: str
    items_key: str = "items"
    sort_key: str = "id"
    fields: dict[str, OutputField]
    default_limit: int = Field(20, ge=1)
    max_limit: int = Field(50, ge=1, le=50)

    @model_validator(mode="after")
    def _default_within_max(self) -> ReadTool:
        if self.default_limit > self.max_limit:
            raise ValueError("default_limit must not exceed max_limit")
        return self


class Target(Model):
    """The object a preview plans a change to: how to read it, its id and version, what protects it."""

    noun: str = "target"
    get: Call
    version_field: str = "version"
    version_schema: dict[str, Any] = {"type": "integer"}
    not_found_text: str = "not found"
    protected_field: str | None = None
    protected_ids: list[str] = []

    @model_validator(mode="after")
    def _get_names_the_target(self) -> Target:
        if names_in(self.get.payload) - {"target_id"}:
            raise ValueError("get.payload may only use {target_id}")
        return self


class InputField(Model):
    """One argument of a preview: a JSON Schema, plus what the gateway does with it."""

    json_schema: dict[str, Any] = Field(alias="schema")
    target: bool = False
    enum_from: str | None = None
    required: bool = True


class SummaryField(Model):
    """A number or value the preview computes: from the target's state, or from a lookup keyed by an argument."""

    target: str | None = None
    lookup: str | None = None
    key: str | None = None
    json_schema: dict[str, Any] = Field(NON_NEGATIVE_INTEGER, alias="schema")

    @model_validator(mode="after")
    def _one_source(self) -> SummaryField:
        if (self.target is None) == (self.lookup is None):
            raise ValueError("a summary field needs exactly one of 'target' or 'lookup'")
        if self.lookup is not None and self.key is None:
            raise ValueError("a summary field from a lookup needs 'key' (the argument whose value selects the entry)")
        return self


class PreviewTool(Model):
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


class WriteTool(Model):
    kind: Literal["write"]
    preview: str
    call: Call
    title: str | None = None
    description: str
    result: dict[str, str] = {}
    version_from: str | None = None
    destructive: bool = True
    open_world: bool = False
    confirm: Literal["boolean", "typed"] = "boolean"
    prompt_timeout_seconds: float = Field(300.0, gt=0)
    idempotency_retention_seconds: int = Field(86_400, ge=60)


ToolConfig = Annotated[ReadTool | PreviewTool | WriteTool, Field(discriminator="kind")]


class GatewayConfig(Model):
    gateway: GatewaySection = GatewaySection()
    limits: Limits = Limits()
    backend: BackendSection
    lookups: dict[str, Lookup] = {}
    tools: dict[str, ToolConfig]

    @model_validator(mode="after")
    def _references_resolve(self) -> GatewayConfig:
        for name, tool in self.tools.items():
            if isinstance(tool, PreviewTool):
                for field_name, field in tool.inputs.items():
                    if field.enum_from is not None and field.enum_from not in self.lookups:
                        raise ValueError(
                            f"tools.{name}.inputs.{field_name}.enum_from: no lookup named {field.enum_from!r}"
                        )
                for field_name, summary in tool.summary.items():
                    if summary.lookup is not None and summary.lookup not in self.lookups:
                        raise ValueError(
                            f"tools.{name}.summary.{field_name}.lookup: no lookup named {summary.lookup!r}"
                        )
            if isinstance(tool, WriteTool):
                preview = self.tools.get(tool.preview)
                if not isinstance(preview, PreviewTool):
                    raise ValueError(f"tools.{name}.preview must name a tool of kind 'preview'")
                unknown = names_in(tool.call.payload) - preview.template_names()
                if unknown:
                    raise ValueError(
                        f"tools.{name}.call.payload uses {{{sorted(unknown)[0]}}}; "
                        f"available: {', '.join(sorted(preview.template_names()))}"
                    )
                extra = set(tool.result) - set(preview.summary)
                if extra:
                    raise ValueError(f"tools.{name}.result.{sorted(extra)[0]} is not a summary field of {tool.preview}")
        return self

    def write_tool_for(self, preview: str) -> str:
        """The write tool whose plans the named preview issues."""
        for name, tool in self.tools.items():
            if isinstance(tool, WriteTool) and tool.preview == preview:
                return name
        raise ConfigError(f"no write tool names {preview!r} as its preview")

    def preview_of(self, write: WriteTool) -> PreviewTool:
        """The preview tool that issues a write tool's plans."""
        preview = self.tools[write.preview]
        assert isinstance(preview, PreviewTool)
        return preview


def load_config(path: str | Path | None = None) -> GatewayConfig:
    """Read and validate a TOML file; raise ConfigError with sentences naming the keys."""
    file = Path(path) if path is not None else DEFAULT_CONFIG
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}") from None
    return parse_config(data, source=str(file))


def parse_config(data: dict[str, Any], source: str = "config") -> GatewayConfig:
    """Validate already-parsed TOML data."""
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"] if not _is_union_tag(part))
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown key (check its spelling against docs/configuration.md)"
            elif error["type"] == "missing":
                message = "required key is missing"
            lines.append(f"{key}: {message}" if key else message)
        raise ConfigError(f"invalid configuration in {source}:\n  " + "\n  ".join(lines)) from None


def _is_union_tag(part: object) -> bool:
    return part in {"read", "preview", "write"}
