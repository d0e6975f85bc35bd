"""The server-side sections of the config: the gateway itself, logs, limits, identity, HTTP, the backend."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.config.environ import FILE_SUFFIX, secret
from gateway.config.loopback import is_secure_url
from gateway.config.store_url import credentials_refusal, is_postgres

ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES256K", "ES384", "ES512", "EdDSA"}
)
"""JWT signature algorithms a token may use: public-key ones only, spelled as PyJWT spells them. An allow-list,
so that no spelling of ``none`` and no HMAC algorithm (whose key would be the public key) slips through."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class GatewaySection(Model):
    name: str = "mcp-safety-gateway"
    store: str = "sqlite:{state_dir}/gateway.db"
    state_dir: str | None = None  # resolved when the file is loaded (gateway.config.paths)
    stdio_caller: str = Field("local", pattern=r"^[^\[]")  # "[..." is how token callers are spelled (principal.py)

    def state_path(self) -> Path:
        """The state directory (absolute once the config is loaded)."""
        return Path(self.state_dir or "var")

    @field_validator("store")
    @classmethod
    def _no_password_in_the_file(cls, store: str) -> str:
        refusal = credentials_refusal(store) if is_postgres(store) else None
        if refusal is not None:
            raise ValueError(refusal)
        return store


class LoggingSection(Model):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "text"] = "json"


class AuditStreamSection(Model):
    """Audit entries streamed out as they are stored (gateway.audit.sinks): a JSONL file, a signed webhook."""

    file: str | None = None
    webhook_url: str | None = None
    webhook_secret_env: str | None = None
    webhook_timeout_seconds: float = Field(5.0, gt=0)
    max_queue: int = Field(1000, ge=1)

    @model_validator(mode="after")
    def _webhook_is_signed(self) -> AuditStreamSection:
        if self.webhook_url is not None and not self.webhook_secret_env:
            raise ValueError("webhook_url needs webhook_secret_env (the variable holding the HMAC secret)")
        return self


class Limits(Model):
    max_body_bytes: int = Field(1_048_576, gt=0)
    max_depth: int = Field(16, gt=0)
    max_elements: int = Field(10_000, gt=0)
    max_string_bytes: int = Field(65_536, gt=0)


STATIC_ISSUER = "static"
"""The issuer of people known only from the config: a static bearer token or an approver token that names none
(gateway/identity/person.py compares people as (issuer, subject))."""


SHA256_HEX = re.compile("^[0-9a-f]{64}$")


class HashedToken(Model):
    """A token known by its SHA-256 (hex), never by itself: written in the file (``sha256``), or read from the
    environment when the config is loaded (``sha256_env`` names a variable holding it, or the variable's ``_FILE``
    twin naming a file that does: a mounted secret)."""

    sha256: str = Field(pattern=SHA256_HEX.pattern)
    sha256_env: str | None = Field(None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _hash_from_the_environment(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("sha256_env") is None:
            return data
        if "sha256" in data:
            raise ValueError("set sha256 or sha256_env, not both")
        name = str(data["sha256_env"])
        value = (secret(name) or "").strip().lower()  # SecretError is a ValueError naming the variable
        if not value:
            raise ValueError(
                f"sha256_env names {name}, which is not set (nor {name}{FILE_SUFFIX}): set it to the token's SHA-256 "
                'in hex (printf %s "$TOKEN" | sha256sum)'
            )
        if not SHA256_HEX.match(value):
            raise ValueError(f"sha256_env: {name} does not hold a SHA-256 in hex (64 characters 0-9 a-f)")
        return {**data, "sha256": value}


class StaticToken(HashedToken):
    """A caller's bearer token known by its SHA-256 (hex); the token itself is never stored."""

    client_id: str
    subject: str | None = None
    issuer: str | None = Field(None, min_length=1)
    """The issuer of the person holding this token (``https://login.example.com``), so that four eyes knows them
    as that provider's ``subject``; unset, the person is (``static``, subject). Not the token's issuer: the caller
    stays (none, client, subject)."""
    scopes: list[str] = []


class JwtVerifier(Model):
    issuer: str
    audience: str | None = None
    algorithms: list[str] = ["RS256", "ES256"]
    jwks_url: str | None = None
    public_key_file: str | None = None
    leeway_seconds: int = Field(30, ge=0)
    jwks_cache_seconds: int = Field(300, ge=1)

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, algorithms: list[str]) -> list[str]:
        odd = [algorithm for algorithm in algorithms if algorithm not in ASYMMETRIC_ALGORITHMS]
        if odd or not algorithms:
            what = f"{odd[0]!r} is not allowed" if odd else "at least one is needed"
            raise ValueError(f"{what}; use public-key algorithms only ({', '.join(sorted(ASYMMETRIC_ALGORITHMS))})")
        return algorithms

    @field_validator("jwks_url")
    @classmethod
    def _jwks_secure(cls, url: str | None) -> str | None:
        return None if url is None else require_secure("the JWKS", url)

    @field_validator("issuer")
    @classmethod
    def _issuer_secure(cls, issuer: str) -> str:
        return _secure_issuer(issuer)

    @model_validator(mode="after")
    def _one_key_source(self) -> JwtVerifier:
        if (self.jwks_url is None) == (self.public_key_file is None):
            raise ValueError("set exactly one of jwks_url or public_key_file")
        return self


class IntrospectionVerifier(Model):
    endpoint: str
    issuer: str | None = None
    audience: str | None = None
    client_id_env: str | None = None
    client_secret_env: str | None = None
    cache_seconds: float = Field(30.0, ge=0)

    @field_validator("endpoint")
    @classmethod
    def _endpoint_secure(cls, url: str) -> str:
        return require_secure("the introspection endpoint", url)

    @field_validator("issuer")
    @classmethod
    def _issuer_secure(cls, issuer: str | None) -> str | None:
        return None if issuer is None else _secure_issuer(issuer)


def require_secure(what: str, url: str) -> str:
    """The URL, if it is https:// (or plain http:// to loopback); ValueError naming ``what`` otherwise."""
    if not is_secure_url(url):
        raise ValueError(f"{what} must be an https:// URL (plain http:// only on loopback), not {url!r}")
    return url


def _secure_issuer(issuer: str) -> str:
    # An issuer is an identifier first, so a non-URL one is left alone; a URL one is advertised to clients as
    # where to log in, so it must not be plain http:// to another machine.
    return require_secure("an issuer", issuer) if issuer.lower().startswith("http:") else issuer


class AuthSection(Model):
    verifier: Literal["none", "static", "jwt", "introspection"] = "none"
    resource_url: str | None = None
    authorization_servers: list[str] = []
    required_scopes: list[str] = []
    tokens: list[StaticToken] = []
    jwt: JwtVerifier | None = None
    introspection: IntrospectionVerifier | None = None

    @field_validator("authorization_servers")
    @classmethod
    def _servers_secure(cls, servers: list[str]) -> list[str]:
        for server in servers:
            require_secure("an authorization server", server)
        return servers

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
    max_sessions: int = Field(10_000, ge=1)
    max_sessions_per_caller: int = Field(100, ge=1)
    session_idle_seconds: float = Field(1800.0, gt=0)
    unused_session_idle_seconds: float = Field(120.0, gt=0)
    trusted_proxies: list[str] = []
    """Addresses or networks (``127.0.0.1``, ``10.0.0.0/8``) of reverse proxies whose forwarded headers name the
    client, its scheme and host (gateway/http/proxies.py); any other peer's are ignored. None by default."""
    forwarded_headers: Literal["x-forwarded", "forwarded"] = "x-forwarded"
    """Which headers the trusted proxies write: X-Forwarded-For/-Proto/-Host, or RFC 7239 Forwarded."""

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            try:
                network = ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or network; list the proxies' addresses (127.0.0.1, 10.0.0.0/8)"
                ) from None
            if network.prefixlen == 0:
                raise ValueError(f"{entry!r} trusts every peer, so any client could name itself; list the proxies")
        return [entry.strip() for entry in entries]

    @field_validator("allowed_hosts", "allowed_origins")
    @classmethod
    def _no_wildcards(cls, patterns: list[str]) -> list[str]:
        # A trailing ":*" (any port) is the only wildcard the checks understand; "null" is the Origin of sandboxed
        # frames and local files, which any page can produce.
        for pattern in patterns:
            if "*" in pattern.removesuffix(":*") or pattern.strip().lower() == "null":
                raise ValueError(f"{pattern!r} would admit any page; list exact hosts (a trailing ':*' for any port)")
        return patterns


class BackendSection(Model):
    """One legacy server: how to reach it, and its god-tool's name and argument names (``[backend]``, or one
    ``[backends.NAME]`` of several)."""

    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None  # where a stdio backend starts; resolved to the config's folder when unset
    url: str | None = None
    headers_from_env: dict[str, str] = {}
    tool: str = "manage_tenant"
    action_argument: str = "action"
    payload_argument: str = "payload"
    probe_actions: bool = False  # check may send an action that cannot exist and read the refusal
    call_timeout_seconds: float = Field(30.0, gt=0)
    connect_timeout_seconds: float = Field(30.0, gt=0)
    list_timeout_seconds: float = Field(10.0, gt=0)  # its whole tools/list, every page
    probe_interval_seconds: float = Field(2.0, gt=0)  # how often the gateway pings it (and retries it while down)
    max_result_bytes: int = Field(16 * 1024 * 1024, gt=0)

    @model_validator(mode="after")
    def _transport_needs_its_target(self) -> BackendSection:
        if self.transport == "stdio" and not self.command:
            raise ValueError("transport 'stdio' needs backend.command")
        if self.transport == "http" and not self.url:
            raise ValueError("transport 'http' needs backend.url")
        return self


class RateLimit(Model):
    """A token bucket: ``burst`` calls at once, refilled at ``per_second``."""

    per_second: float = Field(gt=0)
    burst: int = Field(ge=1)


class RateLimits(Model):
    per_caller: RateLimit | None = RateLimit(per_second=20, burst=100)
