"""The gateway's configuration: TOML in, frozen pydantic models out. The reference is docs/configuration.md.

A bad file fails at start with one sentence per problem naming the TOML key, for example
``tools.reset_tenant.confirm: Input should be 'boolean', 'typed' or 'url'``. The models live in ``sections`` (the
gateway, identity, HTTP, backend) and ``mapping`` (which backend call backs which tool); this module joins them
into ``GatewayConfig``, checks the references between them, and reads and writes TOML.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError, model_validator

from gateway.config import paths
from gateway.config.approvals import ApprovalRule, ApprovalsSection, ApproverToken, OidcLogin, Webhook
from gateway.config.mapping import (
    Call,
    InputField,
    Lookup,
    OutputField,
    PreviewTool,
    ReadTool,
    SummaryField,
    Target,
    ToolAccess,
    ToolConfig,
    WriteTool,
)
from gateway.config.sections import (
    AuditStreamSection,
    AuthSection,
    BackendSection,
    GatewaySection,
    HttpSection,
    IntrospectionVerifier,
    JwtVerifier,
    Limits,
    LoggingSection,
    Model,
    RateLimit,
    RateLimits,
    StaticToken,
)
from gateway.templates import names_in

__all__ = [
    "DEFAULT_CONFIG",
    "ApprovalRule",
    "ApprovalsSection",
    "ApproverToken",
    "AuditStreamSection",
    "AuthSection",
    "BackendSection",
    "Call",
    "ConfigError",
    "GatewayConfig",
    "GatewaySection",
    "HttpSection",
    "InputField",
    "IntrospectionVerifier",
    "JwtVerifier",
    "Limits",
    "LoggingSection",
    "Lookup",
    "OidcLogin",
    "OutputField",
    "PreviewTool",
    "RateLimit",
    "RateLimits",
    "ReadTool",
    "StaticToken",
    "SummaryField",
    "Target",
    "ToolAccess",
    "ToolConfig",
    "Webhook",
    "WriteTool",
    "load_config",
    "parse_config",
    "to_toml",
]

DEFAULT_CONFIG = Path(__file__).resolve().parent / "gateway.toml"
"""The built-in config (package data): the demo backend as a stdio child, state in the platform state dir."""


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid."""


DEFAULT_SCOPES = {"read": ["tenants:read"], "preview": ["tenants:read"], "write": ["tenants:reset"]}


class GatewayConfig(Model):
    gateway: GatewaySection = GatewaySection()
    logging: LoggingSection = LoggingSection()
    audit_stream: AuditStreamSection = AuditStreamSection()
    limits: Limits = Limits()
    auth: AuthSection = AuthSection()
    http: HttpSection = HttpSection()
    rate_limits: RateLimits = RateLimits()
    approvals: ApprovalsSection = ApprovalsSection()
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
                self._check_url_mode(name, tool)
        return self

    def _check_url_mode(self, name: str, tool: WriteTool) -> None:
        for number, rule in enumerate(tool.approval):
            if rule.notify is not None and rule.notify not in self.approvals.webhooks:
                raise ValueError(f"tools.{name}.approval.{number}.notify: no webhook named {rule.notify!r}")
        four_eyes = tool.four_eyes or any(rule.four_eyes for rule in tool.approval)
        if "url" not in tool.modes():
            return
        if not self.approvals.configured:
            raise ValueError(
                f"tools.{name}.confirm 'url' needs approvers who can sign in: [[approvals.tokens]] or [approvals.oidc]"
            )
        if four_eyes and self.auth.verifier == "none":
            raise ValueError(
                f"tools.{name}.four_eyes needs an [auth] verifier: without one the gateway cannot tell the caller apart"
            )
        if self.approvals.login == "oidc" and self.oidc_issuer() is None:
            raise ValueError("approvals.oidc.issuer is needed: no [auth.jwt] issuer or auth.authorization_servers")

    def oidc_issuer(self) -> str | None:
        """The identity provider approvers sign in at."""
        oidc = self.approvals.oidc
        if oidc is not None and oidc.issuer is not None:
            return oidc.issuer
        if self.auth.jwt is not None:
            return self.auth.jwt.issuer
        return self.auth.authorization_servers[0] if self.auth.authorization_servers else None

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
    """Read and validate a TOML file, its relative paths taken from its folder (gateway.config.paths); raise
    ConfigError with sentences naming the keys. No path: the built-in config, state in the platform state dir."""
    file = Path(path).expanduser().absolute() if path is not None else DEFAULT_CONFIG
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}") from None
    if file.resolve() == DEFAULT_CONFIG:
        return parse_config(data, source=str(file), base=paths.platform_state_dir(), builtin=True)
    return parse_config(data, source=str(file), base=file.parent)


def parse_config(
    data: dict[str, Any], source: str = "config", base: Path | None = None, *, builtin: bool = False
) -> GatewayConfig:
    """Validate already-parsed TOML data; relative paths are taken from ``base`` (default: the working
    directory). ``builtin``: the state directory defaults to ``base`` itself instead of ``base/var``."""
    try:
        config = GatewayConfig.model_validate(data)
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
    return resolved(config, base or Path.cwd(), builtin=builtin)


def resolved(config: GatewayConfig, base: Path, *, builtin: bool = False) -> GatewayConfig:
    """The config with every path absolute and the backend's placeholders filled (see gateway.config.paths)."""
    gateway = paths.resolve_gateway(config.gateway, base, base if builtin else base / "var")
    assert gateway.state_dir is not None
    return config.model_copy(
        update={
            "gateway": gateway,
            "backend": paths.resolve_backend(config.backend, base, gateway.state_dir),
            "auth": paths.resolve_auth(config.auth, base),
            "audit_stream": paths.resolve_audit_stream(config.audit_stream, base),
        }
    )


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
