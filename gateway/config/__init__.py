"""The gateway's configuration: TOML in, frozen pydantic models out. The reference is docs/configuration.md.

A bad file fails at start with one sentence per problem naming the TOML key, for example
``tools.reset_tenant.confirm: Input should be 'form', 'typed' or 'url'``. The models live in ``sections`` (the
gateway, identity, HTTP, backends), ``approvals`` (the approval page and its rules), ``mapping`` (which backend
call backs which tool), ``kinds`` (the read, preview and write tools, each kind answering for itself; ``face``
holds what they show a client), ``passthrough`` (a backend's own tools, published on purpose) and ``identities``
(whether callers and approvers are one identity space, as four eyes needs); ``environ`` reads the secrets the config
names by environment variable (or from the file ``VAR_FILE`` names); this module joins them into
``GatewayConfig``, checks the references between them, and reads and writes TOML.

Backends: one ``[backend]`` table (named ``default``), or several ``[backends.NAME]`` tables (or both, the
table being ``default``). With several, every tool and lookup names its backend (``backend = "NAME"``); a write
tool is served by its preview's backend.
"""

from __future__ import annotations

import ast
import logging
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, model_validator

from gateway.config import paths
from gateway.config.approvals import ApprovalRule, ApprovalsSection, ApproverToken, OidcLogin, Webhook
from gateway.config.expressions import names_in
from gateway.config.face import Hints
from gateway.config.identities import space_refusal
from gateway.config.kinds import ConfirmedTool, PreviewTool, ReadTool, ToolKind, WriteTool
from gateway.config.mapping import Call, InputField, Lookup, OutputField, SummaryField, Target
from gateway.config.passthrough import SPEC_DEFAULTS, PassthroughTool, god_tool_sentence
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
from gateway.text import MAX_NAME, quoted, toml_string

__all__ = [
    "DEFAULT_CONFIG",
    "SPEC_DEFAULTS",
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
BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")

ToolConfig = Annotated[ReadTool | PreviewTool | WriteTool | PassthroughTool, Field(discriminator="kind")]


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
    tools: dict[str, ToolConfig]

    @model_validator(mode="after")
    def _references_resolve(self) -> GatewayConfig:
        for name, tool in self.tools.items():
            for key, lookup in tool.lookups_named().items():
                if lookup not in self.lookups:
                    raise ValueError(f"tools.{name}.{key}: no lookup named {lookup!r}")
            write = tool.as_write()
            if write is not None:
                self._check_plans(name, write)
            confirmed = tool.as_confirmed()
            if confirmed is not None:
                self._check_url_mode(name, confirmed)
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
                inherits = kind == "tools" and self.tools[name].as_write() is not None  # its preview's backend
                if entry.backend is None and len(names) > 1 and not inherits:
                    raise ValueError(f"{kind}.{name}.backend: {several}")
        for name, tool in self.tools.items():
            write = tool.as_write()
            if write is not None and write.backend is not None and write.backend != self.backend_of(write.preview):
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

    def republished_god_tools(self) -> list[str]:
        """A warning for each tool the operator insists on publishing although it may be a god-tool."""
        return [
            f"tools.{name}: unsafe_republish_god_tool = true publishes {quoted(tool.relayed(name) or name, MAX_NAME)}, "
            "which may be a god-tool; every call is confirmed, keyed and audited"
            for name, tool in self.tools.items()
            if tool.republishes_god_tool()
        ]

    def backend_sections(self) -> dict[str, BackendSection]:
        """Every backend by name: ``[backend]`` as ``default``, then each ``[backends.NAME]``."""
        single = {DEFAULT_BACKEND: self.backend} if self.backend is not None else {}
        return {**single, **self.backends}

    def backend_of(self, tool: str) -> str:
        """The name of the backend that serves a tool (a write tool: its preview's)."""
        config = self.tools[tool]
        write = config.as_write()
        if write is not None and write.backend is None:
            return self.backend_of(write.preview)
        return config.backend or next(iter(self.backend_sections()))

    def lookup_backend(self, lookup: str) -> str:
        """The name of the backend a lookup is read from."""
        return self.lookups[lookup].backend or next(iter(self.backend_sections()))

    def _check_plans(self, name: str, tool: WriteTool) -> None:
        named = self.tools.get(tool.preview)
        preview = named.as_preview() if named is not None else None
        if preview is None:
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

    def _check_url_mode(self, name: str, tool: ConfirmedTool) -> None:
        for index, rule in enumerate(tool.approval):
            if rule.notify is not None and rule.notify not in self.approvals.webhooks:
                named = ", ".join(sorted(self.approvals.webhooks)) or "none is configured"
                raise ValueError(
                    f"tools.{name}.approval.{index}.notify: rule {rule.name!r} notifies {rule.notify!r}, which is not "
                    f"a webhook of [approvals.webhooks] ({named}); name one of them, or add that table"
                )
        four_eyes = tool.four_eyes or any(rule.four_eyes for rule in tool.approval)
        if "url" not in tool.modes():
            return
        if not self.approvals.configured:
            raise ValueError(
                f"tools.{name}.confirm 'url' needs approvers who can sign in: [[approvals.tokens]] or [approvals.oidc]"
            )
        if self.approvals.login == "oidc" and not self.approvals.approvers.configured:
            raise ValueError(
                f"tools.{name}.confirm 'url' with approvals.login 'oidc' needs [approvals.approvers] (subjects, emails,"
                " or claim and values): otherwise everyone the identity provider signs in could approve"
            )
        if four_eyes and self.auth.verifier == "none":
            raise ValueError(
                f"tools.{name}.four_eyes needs an [auth] verifier: without one the gateway cannot tell the caller apart"
            )
        if self.approvals.login == "oidc" and self.oidc_issuer() is None:
            raise ValueError("approvals.oidc.issuer is needed: no [auth.jwt] issuer or auth.authorization_servers")
        needed = max([tool.approvers, *(rule.approvers for rule in tool.approval)])
        refusal = space_refusal(name, four_eyes, needed, self.auth, self.approvals, self.oidc_issuer())
        if refusal is not None:
            raise ValueError(refusal)

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

    def write_tool_for(self, preview: str) -> tuple[str, WriteTool]:
        """The write tool whose plans the named preview issues, by name."""
        for name, tool in self.tools.items():
            write = tool.as_write()
            if write is not None and write.preview == preview:
                return name, write
        raise ConfigError(f"no write tool names {preview!r} as its preview")

    def scopes_of(self, name: str) -> list[str]:
        """The scopes a caller needs for a tool (its own, or the default for its kind)."""
        tool = self.tools[name]
        return tool.scopes if tool.scopes is not None else tool.default_scopes()

    def preview_of(self, write: WriteTool) -> PreviewTool:
        """The preview tool that issues a write tool's plans."""
        preview = self.tools[write.preview].as_preview()
        assert preview is not None  # checked when the config was read
        return preview

    def preview_for(self, name: str) -> PreviewTool | None:
        """The preview whose inputs and plan a tool's schemas show (a preview's own, a write's preview's), or None."""
        preview = self.tools[name].schema_preview(name)
        return self.tools[preview].as_preview() if preview is not None else None


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
            f"{file} is not valid TOML: {_declared_twice(file.read_text(encoding='utf-8'), exc)}"
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


def to_toml(data: dict[str, Any]) -> str:
    """Config data (as ``model_dump(by_alias=True)`` gives it) back to TOML, for tools and tests that write
    configs: one table per section (tools, lookups and backends one per entry), values inline. TOML has no null, so a
    None is left out and that key takes its default."""
    lines: list[str] = []
    for name, section in data.items():
        entries = section.items() if name in {"tools", "lookups", "backends"} else [(None, section)]
        for entry, body in entries:
            lines.append(f"[{name}]" if entry is None else f"[{name}.{toml_key(entry)}]")
            lines.extend(f"{toml_key(key)} = {toml_value(item)}" for key, item in body.items() if item is not None)
    return "\n".join(lines) + "\n"


def toml_value(item: Any) -> str:
    """One value as inline TOML (a None inside a table is left out)."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int | float):
        return repr(item)
    if isinstance(item, str):
        return toml_string(item)
    if isinstance(item, list):
        return "[" + ", ".join(toml_value(element) for element in item) + "]"
    pairs = [f"{toml_key(key)} = {toml_value(element)}" for key, element in item.items() if element is not None]
    return "{" + ", ".join(pairs) + "}"


def toml_key(key: str) -> str:
    """A key as TOML: bare when it can be, else a quoted string (gateway.text.toml_string)."""
    return key if BARE_KEY.match(key) else toml_string(key)


def _todos(data: Any, path: str = "") -> list[tuple[str, str]]:
    """Every value that is still a ``TODO: ...`` string, with its key."""
    if isinstance(data, str):
        return [(path, data)] if data.startswith("TODO") else []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    return [found for key, value in items for found in _todos(value, f"{path}.{key}" if path else str(key))]


DECLARED_TWICE = re.compile(r"^Cannot declare \((.*)\) twice \(at line (\d+), column \d+\)$")


def _declared_twice(text: str, exc: tomllib.TOMLDecodeError) -> str:
    """TOML's own message, or for a table declared twice a sentence naming both places and the way out: a tool's
    published name is its table's name, so two backends' tools of one name need two names."""
    found = DECLARED_TWICE.match(str(exc))
    if found is None:
        return str(exc)
    key, second = tuple(ast.literal_eval(f"({found[1]},)")), int(found[2])
    first = next((number for number, line in enumerate(text.splitlines(), 1) if _header_of(line) == key), None)
    where = f"lines {first} and {second}" if first is not None and first != second else f"line {second}"
    return (
        f"[{'.'.join(toml_key(part) for part in key)}] is declared twice ({where}); every table names one thing. "
        "For two tools of one name (on two backends, say), give each its own table name and keep the backend's "
        'name in source = "..."'
    )


def _header_of(line: str) -> tuple[str, ...] | None:
    """The key of a ``[table]`` header line, or None."""
    stripped = line.strip()
    if not stripped.startswith("[") or stripped.startswith("[["):
        return None
    try:
        table: Any = tomllib.loads(stripped)
    except tomllib.TOMLDecodeError:
        return None
    parts: list[str] = []
    while isinstance(table, dict) and len(table) == 1:
        ((part, table),) = table.items()
        parts.append(part)
    return tuple(parts)


def _is_union_tag(part: object) -> bool:
    return part in {"read", "preview", "write", "passthrough"}
