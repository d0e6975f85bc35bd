"""The gateway's configuration: TOML in, frozen pydantic models out. The reference is docs/configuration.md.

A bad file fails at start with one sentence per problem naming the TOML key, for example
``tools.reset_tenant.confirm: Input should be 'form', 'typed' or 'url'``. The models live in ``sections`` (the
gateway, identity, HTTP, backends), ``approvals`` (the approval page and its rules), ``mapping`` (which backend
call backs which tool), ``kinds`` (what every tool kind's model answers; ``face`` holds what they show a client),
``read`` (a read tool), ``planned`` (a planned write's preview and write tools), ``passthrough`` (a backend's own
tools, published on purpose), ``statements`` (a statement-executing server's ``[statements.NAME]`` and its query,
preview and execute tools), ``risk`` (a tool's risk as the operator states it, and the rules that keep it from
contradicting the tool's hints) and ``identities`` (whether callers and approvers are one identity space, as four
eyes needs); ``environ`` reads the secrets the config names by environment variable (or from the file ``VAR_FILE``
names); this module joins them into ``GatewayConfig``, has each tool check its references, and reads TOML
(``tomlfile`` writes it, and says what TOML's own error leaves unsaid). The tool models are told apart in one place
only, the kind registry (gateway.tools.kinds).

Smaller pieces the models share: ``godtool`` (what makes a tool a god-tool, read from its definition),
``paths`` (where a config's relative paths point, and where the gateway keeps its state), ``expressions`` (dotted
paths into backend JSON and ``{name}`` templates), ``claim_types`` (the declared types of approver claims, so a
condition fails closed across types), ``loopback`` (whether a name or URL stays on this machine) and
``store_url`` (what the config checks of a store URL before any store is opened).

Imported by nearly every package (the config is the root of the import graph: it imports only errors, records,
statements and text, so any module may read it).

Backends: one ``[backend]`` table (named ``default``), or several ``[backends.NAME]`` tables (or both, the
table being ``default``). With several, every tool and lookup names its backend (``backend = "NAME"``); a write
tool is served by its preview's backend.
"""

from __future__ import annotations

import logging
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import Field, ValidationError, model_validator

from gateway.config import paths
from gateway.config.approvals import ApprovalRule, ApprovalsSection, ApproverToken, OidcLogin, Webhook
from gateway.config.face import Hints
from gateway.config.kinds import ConfirmedTool, ToolKind, tags_of
from gateway.config.mapping import Call, InputField, Lookup, OutputField, SummaryField, Target
from gateway.config.passthrough import SPEC_DEFAULTS, PassthroughTool, god_tool_sentence
from gateway.config.planned import PreviewTool, WriteTool
from gateway.config.read import ReadTool
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
from gateway.config.statements import StatementExecuteTool, StatementPreviewTool, StatementQueryTool, StatementSource
from gateway.config.tomlfile import declared_twice, to_toml, toml_key, toml_value
from gateway.text import MAX_NAME, quoted

__all__ = [
    "DEFAULT_CONFIG",
    "SPEC_DEFAULTS",
    "TOOL_KINDS",
    "ApprovalRule",
    "ApprovalsSection",
    "ApproverToken",
    "AuditStreamSection",
    "AuthSection",
    "BackendSection",
    "Call",
    "ConfigError",
    "ConfirmedTool",
    "GatewayConfig",
    "GatewaySection",
    "Hints",
    "HttpSection",
    "InputField",
    "IntrospectionVerifier",
    "JwtVerifier",
    "Limits",
    "LoggingSection",
    "Lookup",
    "OidcLogin",
    "OutputField",
    "PassthroughTool",
    "PreviewTool",
    "RateLimit",
    "RateLimits",
    "ReadTool",
    "StatementExecuteTool",
    "StatementPreviewTool",
    "StatementQueryTool",
    "StatementSource",
    "StaticToken",
    "SummaryField",
    "Target",
    "ToolConfig",
    "ToolKind",
    "Webhook",
    "WriteTool",
    "load_config",
    "parse_config",
    "to_toml",
    "toml_key",
    "toml_value",
]

DEFAULT_CONFIG = Path(__file__).resolve().parent / "gateway.toml"
"""The built-in config (package data): the demo backend as a stdio child, state in the platform state dir."""


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid."""


DEFAULT_BACKEND = "default"
"""The name of the backend a single ``[backend]`` table configures."""
BACKEND_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")

ToolConfig = Annotated[
    ReadTool
    | PreviewTool
    | WriteTool
    | PassthroughTool
    | StatementQueryTool
    | StatementPreviewTool
    | StatementExecuteTool,
    Field(discriminator="kind"),
]
"""A ``[tools.NAME]`` table, by its ``kind``: every kind's model (the kind registry, gateway.tools.kinds, holds
each model's kind, and a test holds the two to each other)."""
TOOL_KINDS = tags_of(get_args(get_args(ToolConfig)[0]))
"""Every ``kind`` a tool's table may say, in the order a refusal lists them."""


class GatewayConfig(Model):
    gateway: GatewaySection = GatewaySection()
    logging: LoggingSection = LoggingSection()
    audit_stream: AuditStreamSection = AuditStreamSection()
    limits: Limits = Limits()
    auth: AuthSection = AuthSection()
    http: HttpSection = HttpSection()
    rate_limits: RateLimits = RateLimits()
    approvals: ApprovalsSection = ApprovalsSection()
    backend: BackendSection | None = None
    backends: dict[str, BackendSection] = {}
    lookups: dict[str, Lookup] = {}
    statements: dict[str, StatementSource] = {}
    tools: dict[str, ToolConfig]

    @model_validator(mode="after")
    def _references_resolve(self) -> GatewayConfig:
        for name, tool in self.tools.items():
            tool.check_references(name, self)
        return self

    @model_validator(mode="after")
    def _backends_resolve(self) -> GatewayConfig:
        if self.backend is None and not self.backends:
            raise ValueError("backend: required key is missing (a [backend] table, or [backends.NAME] tables)")
        if self.backend is not None and DEFAULT_BACKEND in self.backends:
            raise ValueError(f"backends.{DEFAULT_BACKEND}: that name belongs to the [backend] table; rename it")
        for name in self.backends:
            if not BACKEND_NAME.match(name):
                raise ValueError(f"backends.{name}: a backend name is 1-32 letters, digits, '_' or '-'")
        names = self.backend_sections()
        several = f"required when several backends are configured ({', '.join(names)})"
        for kind, entries in (("tools", self.tools), ("lookups", self.lookups)):
            for name, entry in entries.items():
                if entry.backend is not None and entry.backend not in names:
                    raise ValueError(f"{kind}.{name}.backend: no backend named {entry.backend!r}")
                inherits = kind == "tools" and self.tools[name].plans_from() is not None  # its preview's backend
                if entry.backend is None and len(names) > 1 and not inherits:
                    raise ValueError(f"{kind}.{name}.backend: {several}")
        for name, tool in self.tools.items():
            source = tool.plans_from()
            if source is not None and tool.backend is not None and tool.backend != self.backend_of(source):
                raise ValueError(f"tools.{name}.backend: a write tool is served by its preview's backend")
        return self

    @model_validator(mode="after")
    def _no_god_tool_republished(self) -> GatewayConfig:
        for name, tool in self.tools.items():
            source = tool.relayed(name)
            if source is None or tool.republishes_god_tool():
                continue
            backend = self.backend_of(name)
            wrappers = self.wrappers_of(backend)
            if source == self.backend_sections()[backend].tool and wrappers:
                why = f"is the god-tool that {', '.join(wrappers)} wrap"
                raise ValueError(f"tools.{name}.source: {god_tool_sentence(source, why)}")
        return self

    @model_validator(mode="after")
    def _no_statement_tool_republished(self) -> GatewayConfig:
        for name, tool in self.tools.items():
            source = tool.relayed(name)
            if source is None or tool.republishes_god_tool():
                continue
            wrappers = self.statement_wrappers(self.backend_of(name), source)
            if wrappers:
                why = f"runs the statements that {', '.join(wrappers)} hold to their rules"
                raise ValueError(f"tools.{name}.source: {god_tool_sentence(source, why)}")
        return self

    @model_validator(mode="after")
    def _each_backend_tool_decided_once(self) -> GatewayConfig:
        seen: dict[tuple[str, str], str] = {}
        for name, tool in self.tools.items():
            source = tool.relayed(name)
            if source is None:
                continue
            first = seen.setdefault((self.backend_of(name), source), name)
            if self.tools[first].writes != tool.writes:
                raise ValueError(
                    f"tools.{name}.source: {quoted(source, MAX_NAME)} of backend {self.backend_of(name)!r} is also "
                    f"published as tools.{first}, which says the opposite of read_only: one name would call "
                    "unconfirmed what the other confirms; decide the tool once"
                )
        return self

    def wrappers_of(self, backend: str) -> list[str]:
        """The tools and lookups that call a backend's god-tool (none: the backend serves only pass-through tools)."""
        tools = [
            f"tools.{name}" for name, tool in self.tools.items() if not tool.relays and self.backend_of(name) == backend
        ]
        lookups = [
            f"lookups.{name}"
            for name, lookup in self.lookups.items()
            if lookup.call is not None and self.lookup_backend(name) == backend
        ]
        return tools + lookups

    def statement_wrappers(self, backend: str, tool: str) -> list[str]:
        """The statement tools that send statements to a backend's ``tool`` (as their tool or read tool)."""
        return [
            f"tools.{name}"
            for name, config in self.tools.items()
            if (source := self.statements.get(config.statements_named() or "")) is not None
            and tool in (source.tool, source.read_through())
            and self.backend_of(name) == backend
        ]

    def republished_god_tools(self) -> list[str]:
        """A warning for each tool the operator insists on publishing although it may be a god-tool."""
        return [
            f"tools.{name}: unsafe_republish_god_tool = true publishes {quoted(tool.relayed(name) or name, MAX_NAME)}, "
            "which may be a god-tool; every call is confirmed, keyed and audited"
            for name, tool in self.tools.items()
            if tool.republishes_god_tool()
        ]

    def statement_warnings(self) -> list[str]:
        """A warning for each PostgreSQL ``[statements.NAME]`` whose reads and measures run with write access."""
        return [
            f"statements.{name}: no read_tool: reads and measuring reads run through {quoted(source.tool, MAX_NAME)}"
            " with write access, so a function no parser can see into (user-defined, behind a view or a trigger)"
            " could write; give the server a read-only tool (dbhub: a source with readonly = true)"
            for name, source in self.statements.items()
            if source.read_tool is None and source.dialect == "postgres"
        ]

    def backend_sections(self) -> dict[str, BackendSection]:
        """Every backend by name: ``[backend]`` as ``default``, then each ``[backends.NAME]``."""
        single = {DEFAULT_BACKEND: self.backend} if self.backend is not None else {}
        return {**single, **self.backends}

    def backend_of(self, tool: str) -> str:
        """The name of the backend that serves a tool (a write tool: its preview's)."""
        config = self.tools[tool]
        source = config.plans_from()
        if source is not None and config.backend is None:
            return self.backend_of(source)
        return config.backend or next(iter(self.backend_sections()))

    def lookup_backend(self, lookup: str) -> str:
        """The name of the backend a lookup is read from."""
        return self.lookups[lookup].backend or next(iter(self.backend_sections()))

    def oidc_issuer(self) -> str | None:
        """The identity provider approvers sign in at."""
        oidc = self.approvals.oidc
        if oidc is not None and oidc.issuer is not None:
            return oidc.issuer
        if self.auth.jwt is not None:
            return self.auth.jwt.issuer
        return self.auth.authorization_servers[0] if self.auth.authorization_servers else None

    def write_tools(self) -> list[str]:
        """The tools that ask the user before they write: planned writes, and pass-through tools that are not
        read-only."""
        return [name for name, tool in self.tools.items() if tool.writes]

    def passkey_required(self, name: str) -> bool:
        """Whether people approve this tool's writes only with a passkey signature (its own ``passkey``, else
        ``[approvals] passkey``)."""
        tool = self.tools.get(name)
        own = tool.own_passkey() if tool is not None else None
        return (own or self.approvals.passkey) == "required"

    def scopes_of(self, name: str) -> list[str]:
        """The scopes a caller needs for a tool (its own, or the default for its kind)."""
        tool = self.tools[name]
        return tool.scopes if tool.scopes is not None else tool.default_scopes()

    def preview_for(self, name: str) -> ToolKind | None:
        """The preview whose inputs and plan a tool's schemas show (a preview's own, a write's preview's), or None."""
        preview = self.tools[name].schema_preview(name)
        return self.tools[preview] if preview is not None else None


def load_config(path: str | Path | None = None) -> GatewayConfig:
    """Read and validate a TOML file, its relative paths taken from its folder (gateway.config.paths); raise
    ConfigError with sentences naming the keys. No path: the built-in config, state in the platform state dir."""
    file = Path(path).expanduser().absolute() if path is not None else DEFAULT_CONFIG
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{file} is not valid TOML: {declared_twice(file.read_text(encoding='utf-8'), exc)}"
        ) from None
    if file.resolve() == DEFAULT_CONFIG:
        return parse_config(data, source=str(file), base=paths.platform_state_dir(), builtin=True)
    return parse_config(data, source=str(file), base=file.parent)


log = logging.getLogger(__name__)

OLD_SPELLINGS = {("confirm", "boolean"): "form"}
"""Values an older version took, each read as its new name with a warning naming the key."""


def renamed(data: dict[str, Any]) -> dict[str, Any]:
    """The data with every old spelling of a tool's value replaced by its new name, each one logged."""
    tools = data.get("tools")
    if not isinstance(tools, dict):
        return data
    fixed = dict(tools)
    for name, tool in tools.items():
        if not isinstance(tool, dict):
            continue
        for key, value in tool.items():
            new = OLD_SPELLINGS.get((key, value)) if isinstance(value, str) else None
            if new is not None:
                log.warning(
                    "tools.%s.%s: %r is the old name of %r; it still loads, write %r", name, key, value, new, new
                )
                fixed[name] = {**fixed[name], key: new}
    return {**data, "tools": fixed}


def parse_config(
    data: dict[str, Any], source: str = "config", base: Path | None = None, *, builtin: bool = False
) -> GatewayConfig:
    """Validate already-parsed TOML data (a draft from ``inspect`` with a TODO left is refused); relative paths
    are taken from ``base`` (default: the working directory). ``builtin``: the state directory defaults to
    ``base`` itself instead of ``base/var``."""
    undecided = [f"{key}: still a TODO of the draft ({text[:80]})" for key, text in _todos(data)]
    if undecided:
        raise ConfigError(f"invalid configuration in {source}:\n  " + "\n  ".join(undecided))
    try:
        config = GatewayConfig.model_validate(renamed(data))
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
    """The config with every path absolute and each backend's placeholders filled (see gateway.config.paths)."""
    gateway = paths.resolve_gateway(config.gateway, base, base if builtin else base / "var")
    assert gateway.state_dir is not None
    return config.model_copy(
        update={
            "gateway": gateway,
            "backend": (
                paths.resolve_backend(config.backend, base, gateway.state_dir) if config.backend is not None else None
            ),
            "backends": {
                name: paths.resolve_backend(section, base, gateway.state_dir)
                for name, section in config.backends.items()
            },
            "auth": paths.resolve_auth(config.auth, base),
            "audit_stream": paths.resolve_audit_stream(config.audit_stream, base),
        }
    )


def _todos(data: Any, path: str = "") -> list[tuple[str, str]]:
    """Every value that is still a ``TODO: ...`` string, with its key."""
    if isinstance(data, str):
        return [(path, data)] if data.startswith("TODO") else []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    return [found for key, value in items for found in _todos(value, f"{path}.{key}" if path else str(key))]


def _is_union_tag(part: object) -> bool:
    return part in TOOL_KINDS
