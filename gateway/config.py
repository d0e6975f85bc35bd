"""The gateway's configuration: TOML in, frozen pydantic models out. The reference is docs/configuration.md.

A bad file fails at start with one sentence per problem naming the TOML key, for example
``tools.reset_tenant.confirm: Input should be 'boolean' or 'typed'``.
"""

from __future__ import annotations

import json
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


class LoggingSection(Model):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "text"] = "json"


class Limits(Model):
    max_body_bytes: int = Field(1_048_576, gt=0)
    max_depth: int = Field(16, gt=0)
    max_elements: int = Field(10_000, gt=0)
    max_string_bytes: int = Field(65_536, gt=0)


class StaticToken(Model):
    """A bearer token known by its SHA-256 (hex); the token itself is never stored."""

    sha256: str = Field(pattern="^[0-9a-f]{64}$")
    client_id: str
    subject: str | None = None
    scopes: list[str] = []


class JwtVerifier(Model):
    issuer: str
    audience: str | None = None
    algorithms: list[str] = ["RS256", "ES256"]
    jwks_url: str | None = None
    public_key_file: str | None = None
    leeway_seconds: int = Field(30, ge=0)
    jwks_cache_seconds: int = Field(300, ge=1)

    @model_validator(mode="after")
    def _one_key_source(self) -> JwtVerifier:
        if (self.jwks_url is None) == (self.public_key_file is None):
            raise ValueError("set exactly one of jwks_url or public_key_file")
        if any(algorithm.upper().startswith("HS") or algorithm == "none" for algorithm in self.algorithms):
            raise ValueError("algorithms must be asymmetric (RS*, PS*, ES*, EdDSA)")
        return self


class IntrospectionVerifier(Model):
    endpoint: str
    client_id_env: str | None = None
    client_secret_env: str | None = None
    cache_seconds: float = Field(30.0, ge=0)


class AuthSection(Model):
    verifier: Literal["none", "static", "jwt", "introspection"] = "none"
    resource_url: str | None = None
    authorization_servers: list[str] = []
    required_scopes: list[str] = []
    tokens: list[StaticToken] = []
    jwt: JwtVerifier | None = None
    introspection: IntrospectionVerifier | None = None

    @model_validator(mode="after")
    def _verifier_is_configured(self) -> AuthSection:
        if self.verifier == "none":
            return self
        if not self.resource_url:
            raise ValueError(f"verifier {self.verifier!r} needs auth.resource_url (this gateway's /mcp URL)")
        if self.verifier == "static" and not self.tokens:
            raise ValueError("verifier 'static' needs at least one [[auth.tokens]] entry")
        if self.verifier == "jwt" and self.jwt is None:
            raise ValueError("verifier 'jwt' needs an [auth.jwt] table")
        if self.verifier == "introspection" and self.introspection is None:
            raise ValueError("verifier 'introspection' needs an [auth.introspection] table")
        return self


class HttpSection(Model):
    dns_rebinding_protection: bool = True
    allowed_hosts: list[str] = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    allowed_origins: list[str] = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


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
    connect_timeout_seconds: float = Field(30.0, gt=0)
    max_result_bytes: int = Field(16 * 1024 * 1024, gt=0)

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
    timeout_seconds: float | None = Field(None, gt=0)


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


class RateLimit(Model):
    """A token bucket: ``burst`` calls at once, refilled at ``per_second``."""

    per_second: float = Field(gt=0)
    burst: int = Field(ge=1)


class RateLimits(Model):
    per_caller: RateLimit | None = RateLimit(per_second=20, burst=100)


class ToolAccess(Model):
    """Who may see and call a tool, and how often: scopes, visibility, and a per-caller rate limit."""

    scopes: list[str] | None = None
    hidden_when_unauthorized: bool = True
    rate_limit: RateLimit | None = None


class ReadTool(ToolAccess):
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


class PreviewTool(ToolAccess):
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


class WriteTool(ToolAccess):
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


DEFAULT_SCOPES = {"read": ["tenants:read"], "preview": ["tenants:read"], "write": ["tenants:reset"]}


class GatewayConfig(Model):
    gateway: GatewaySection = GatewaySection()
    logging: LoggingSection = LoggingSection()
    limits: Limits = Limits()
    auth: AuthSection = AuthSection()
    http: HttpSection = HttpSection()
    rate_limits: RateLimits = RateLimits()
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

    def write_tools(self) -> list[str]:
        """The names of the destructive tools."""
        return [name for name, tool in self.tools.items() if isinstance(tool, WriteTool)]

    def write_tool_for(self, preview: str) -> str:
        """The write tool whose plans the named preview issues."""
        for name, tool in self.tools.items():
            if isinstance(tool, WriteTool) and tool.preview == preview:
                return name
        raise ConfigError(f"no write tool names {preview!r} as its preview")

    def scopes_of(self, name: str) -> list[str]:
        """The scopes a caller needs for a tool (its own, or the default for its kind)."""
        tool = self.tools[name]
        return tool.scopes if tool.scopes is not None else DEFAULT_SCOPES[tool.kind]

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


def to_toml(data: dict[str, Any]) -> str:
    """Config data (as ``model_dump(by_alias=True)`` gives it) back to TOML, for tools and tests that write
    configs: one table per section (tools and lookups one per entry), values inline. TOML has no null, so a
    None is left out and that key takes its default."""

    def value(item: Any) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, int | float):
            return repr(item)
        if isinstance(item, str):
            return json.dumps(item)
        if isinstance(item, list):
            return "[" + ", ".join(value(element) for element in item) + "]"
        pairs = [f"{json.dumps(key)} = {value(element)}" for key, element in item.items() if element is not None]
        return "{" + ", ".join(pairs) + "}"

    lines: list[str] = []
    for name, section in data.items():
        entries = section.items() if name in {"tools", "lookups"} else [(None, section)]
        for entry, body in entries:
            lines.append(f"[{name}]" if entry is None else f"[{name}.{json.dumps(entry)}]")
            lines.extend(f"{json.dumps(key)} = {value(item)}" for key, item in body.items() if item is not None)
    return "\n".join(lines) + "\n"


def _is_union_tag(part: object) -> bool:
    return part in {"read", "preview", "write"}
