"""The gateway's configuration: TOML in, frozen pydantic models out.

A bad file fails at start with one sentence per problem naming the TOML key, for example
``tools.reset_tenant.confirm: Input should be 'boolean' or 'typed'``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "gateway.toml"


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    not_found_text: str = "not found"

    @model_validator(mode="after")
    def _transport_needs_its_target(self) -> BackendSection:
        if self.transport == "stdio" and not self.command:
            raise ValueError("transport 'stdio' needs backend.command")
        if self.transport == "http" and not self.url:
            raise ValueError("transport 'http' needs backend.url")
        return self


class ReadTool(Model):
    kind: Literal["read"]
    action: str
    title: str | None = None
    description: str
    items_key: str = "tenants"
    default_limit: int = Field(20, ge=1)
    max_limit: int = Field(50, ge=1, le=50)

    @model_validator(mode="after")
    def _default_within_max(self) -> ReadTool:
        if self.default_limit > self.max_limit:
            raise ValueError("default_limit must not exceed max_limit")
        return self


class PreviewTool(Model):
    kind: Literal["preview"]
    read_action: str
    fixtures_action: str
    title: str | None = None
    description: str
    plan_ttl_seconds: int = Field(600, ge=1)


class WriteTool(Model):
    kind: Literal["write"]
    action: str
    preview: str
    title: str | None = None
    description: str
    confirm: Literal["boolean", "typed"] = "boolean"
    prompt_timeout_seconds: float = Field(300.0, gt=0)
    idempotency_retention_seconds: int = Field(86_400, ge=60)


ToolConfig = Annotated[ReadTool | PreviewTool | WriteTool, Field(discriminator="kind")]


class GatewayConfig(Model):
    gateway: GatewaySection = GatewaySection()
    limits: Limits = Limits()
    backend: BackendSection
    tools: dict[str, ToolConfig]

    @model_validator(mode="after")
    def _writes_name_a_preview(self) -> GatewayConfig:
        for name, tool in self.tools.items():
            if isinstance(tool, WriteTool):
                target = self.tools.get(tool.preview)
                if not isinstance(target, PreviewTool):
                    raise ValueError(f"tools.{name}.preview must name a tool of kind 'preview'")
        return self

    def write_tool_for(self, preview: str) -> str:
        """The write tool whose plans the named preview issues."""
        for name, tool in self.tools.items():
            if isinstance(tool, WriteTool) and tool.preview == preview:
                return name
        raise ConfigError(f"no write tool names {preview!r} as its preview")


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


def parse_config(data: dict[str, object], source: str = "config") -> GatewayConfig:
    """Validate already-parsed TOML data."""
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"] if not _is_union_tag(part))
            message = error["msg"].removeprefix("Value error, ")
            lines.append(f"{key}: {message}" if key else message)
        raise ConfigError(f"invalid configuration in {source}:\n  " + "\n  ".join(lines)) from None


def _is_union_tag(part: object) -> bool:
    return part in {"read", "preview", "write"}
