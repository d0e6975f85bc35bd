"""Approvals in the config: the ``[approvals]`` section (how approvers reach the page and sign in, and the webhooks
that tell them), and a write tool's ordered ``[[tools.NAME.approval]]`` rules (which mode a plan gets)."""

from __future__ import annotations

import logging
from functools import cache
from ipaddress import ip_address
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator, model_validator

from gateway.config.claim_types import ClaimType, conforming, cross_type_comparisons, samples, undeclared_claims
from gateway.config.loopback import is_loopback
from gateway.config.sections import STATIC_ISSUER, HashedToken, Model, require_secure

log = logging.getLogger(__name__)

RULE_VARIABLES: dict[str, Any] = {
    "caller": {"id": "", "client": "", "subject": "", "issuer": "", "scopes": []},
    "tool": "",
    "target": {"id": ""},
    "summary": {},
    "arguments": {},
    "writes": {scope: {"minute": 0, "hour": 0, "day": 0} for scope in ("caller", "tool", "caller_tool", "all")},
    "rows": {scope: {"minute": 0, "hour": 0, "day": 0} for scope in ("caller", "tool", "caller_tool", "all")},
    "statement": {
        "class": "",
        "keyword": "",
        "text": "",
        "digest": "",
        "tables": [""],
        "written": [""],
        "functions": [""],
        "rows": 0,
    },
}
"""What a rule's condition can read (values here are placeholders for checking a condition names no other)."""


APPROVER_VARIABLES: dict[str, Any] = {"approver": {"sub": "", "iss": "", "email": "", "claims": {}}}
"""What an approver condition (``[approvals.approvers] when``) can read: the person's ``sub`` and ``iss``, the email
the provider states verified (else ""), and the ID-token claims the rule keeps (``claims``)."""


def compile_condition(expression: str, variables: dict[str, Any] = RULE_VARIABLES) -> Any:
    """A compiled CEL condition; ValueError with the parser's message (line, column, caret), or naming a variable
    a condition cannot read."""
    import cel  # common-expression-language: chosen by bench/cel.py (docs/configuration.md says why)

    try:
        program = cel.compile(expression)
    except ValueError as exc:
        raise ValueError(" ".join(str(exc).split())) from None
    try:
        program.execute(variables)
    except RuntimeError as exc:  # an undefined variable or function; a missing *field* is only known per plan
        raise ValueError(" ".join(str(exc).split())) from None
    except (KeyError, TypeError, ValueError):
        pass
    return program


class ApprovalRule(Model):
    """One rule: when its condition holds for a plan, the plan gets this mode (the first such rule decides)."""

    name: str = Field(min_length=1, max_length=64, pattern="^[A-Za-z0-9_.-]+$")
    when: str = Field(min_length=1)
    mode: Literal["form", "typed", "url", "deny"]
    approvers: int = Field(1, ge=1, le=10)
    four_eyes: bool = False
    notify: str | None = None
    """A webhook of [approvals.webhooks] told about every approval this rule asks for (url mode)."""
    recheck: bool = False
    """Evaluate this rule again when the write is called (rules that read ``writes`` or ``rows`` always are)."""
    on_error: Literal["form", "typed", "url", "deny"] | None = None
    """The mode when the condition cannot be evaluated; unset: the strictest of this and every later rule and the
    tool's own confirm (gateway/approvals/policy.py)."""

    @field_validator("when")
    @classmethod
    def _compiles(cls, expression: str) -> str:
        compile_condition(expression)
        return expression

    @model_validator(mode="after")
    def _approvers_need_the_page(self) -> ApprovalRule:
        if "url" not in (self.mode, self.on_error) and (self.approvers != 1 or self.four_eyes or self.notify):
            raise ValueError("approvers, four_eyes and notify need mode = 'url' (or on_error = 'url')")
        return self


class Webhook(Model):
    """Where approvers hear about a write that waits for them: a JSON POST, HMAC-signed."""

    url: str
    secret_env: str | None = None
    """The environment variable holding the signing secret (the X-Gateway-Signature header); unset: unsigned."""
    format: Literal["json", "slack"] = "json"

    @field_validator("url")
    @classmethod
    def _url_secure(cls, url: str) -> str:
        return require_secure("a webhook URL", url)


class ApproverToken(HashedToken):
    """An approver known by the SHA-256 (hex) of their token (``sha256``, or ``sha256_env``: HashedToken); the
    token itself is never stored."""

    issuer: str = Field(STATIC_ISSUER, min_length=1)
    """The issuer of the person this token stands for (``https://login.example.com``: the same person as that
    provider's ``subject``); unset, ``static``: the same person only as a static caller token naming no issuer."""
    subject: str = Field(min_length=1)
    """Who this person is at that issuer: four eyes compares (issuer, subject) with the caller's."""
    name: str | None = None
    """How the page and the audit show them (default: the subject)."""


class OidcLogin(Model):
    """Sign approvers in at an OpenID provider: authorization code + PKCE, the page as the client."""

    issuer: str | None = None
    """Default: [auth.jwt] issuer, else the first of auth.authorization_servers."""
    client_id: str = Field(min_length=1)
    client_secret_env: str | None = None
    """For a confidential client: the environment variable holding its secret (PKCE is used either way)."""
    scopes: list[str] = ["openid", "profile", "email"]

    @field_validator("issuer")
    @classmethod
    def _issuer_secure(cls, issuer: str | None) -> str | None:
        # Approvers' browsers are sent here to sign in, and its tokens decide who approves: never plain http://
        # to another machine (the same rule as [auth.jwt] issuer).
        return None if issuer is None else require_secure("the approvers' issuer", issuer)


class ApproverRule(Model):
    """Who may approve or reject (``[approvals.approvers]``): a person matching any one entry. Checked on every
    decision, for approvers signed in at the identity provider and approver tokens alike."""

    subjects: list[str] = []
    """The ``sub`` of people at the identity provider (or an approver token's ``subject``)."""
    emails: list[str] = []
    """Emails the identity provider states as verified (``email_verified: true``)."""
    claim: str | None = None
    """A claim of the ID token holding a string or a list of strings (``groups``, ``roles``) ..."""
    values: list[str] = []
    """... of which one must be among these."""
    claims: dict[str, ClaimType] = Field({}, max_length=16)
    """The ID-token claims ``when`` reads (``approver.claims.NAME``) and the type of each (gateway/config/
    claim_types.py), kept with the person's session; a person whose claim has another type is not admitted."""
    when: str | None = Field(None, min_length=1)
    """A CEL condition over ``approver`` (APPROVER_VARIABLES): the person may decide when it is ``true``; one that
    cannot be evaluated for them (a claim they lack) does not admit them."""

    @model_validator(mode="after")
    def _claim_needs_values(self) -> ApproverRule:
        if (self.claim is None) != (not self.values):
            raise ValueError("claim and values go together: the claim to read, and the values of it that admit")
        if self.claims and self.when is None:
            raise ValueError("claims name what `when` reads, and there is no `when`: add the condition, or drop claims")
        return self

    @field_validator("claims", mode="before")
    @classmethod
    def _typed(cls, claims: Any) -> Any:
        if isinstance(claims, list):
            names = [name for name in claims if isinstance(name, str)][:2] or ["dept"]
            example = ", ".join(f'{name} = "string"' for name in names)
            raise ValueError(
                f"declare the type of each claim `when` reads, as claims = {{ {example} }} (string, int, double, "
                "bool, or list: of strings), so that it never compares values of two types"
            )
        return claims

    @field_validator("when")
    @classmethod
    def _compiles(cls, expression: str | None, info: ValidationInfo) -> str | None:
        if expression is not None:
            compile_condition(expression, APPROVER_VARIABLES)
            if "claims" in info.data:  # else the claims were refused already
                _types_hold(expression, info.data["claims"])
        return expression

    @property
    def configured(self) -> bool:
        """Whether any rule narrows who may approve."""
        return bool(self.subjects or self.emails or self.claim or self.when)

    @property
    def kept_claims(self) -> list[str]:
        """The ID-token claims a person's facts keep for this rule (``claim`` and what ``when`` reads)."""
        return list(dict.fromkeys([*([self.claim] if self.claim else []), *self.claims]))

    def admits(self, facts: dict[str, Any]) -> bool:
        """Whether a person with these facts (``sub``, ``iss``, a verified ``email``, the kept ``claims``) may
        decide."""
        if not self.configured:
            return True
        if facts.get("sub") in self.subjects or facts.get("email") in self.emails:
            return True
        kept = facts.get("claims")
        claims: dict[str, Any] = kept if isinstance(kept, dict) else {}
        held = claims.get(self.claim) if self.claim is not None else None
        held = [held] if isinstance(held, str) else held if isinstance(held, list) else []
        if any(isinstance(value, str) and value in self.values for value in held):
            return True
        if self.when is None:
            return False
        typed, odd = conforming(claims, self.claims)
        if typed is None:
            log.info("an approver's claim %s is not the declared %s: not admitted", odd, self.claims[str(odd)])
            return False
        return _condition_holds(self.when, facts, typed)


def _types_hold(expression: str, declared: dict[str, ClaimType]) -> None:
    """ValueError naming the first place where an approver condition reads an undeclared claim or compares or
    combines values of two types (gateway/config/claim_types.py)."""
    undeclared = undeclared_claims(expression, declared)
    if undeclared:
        raise ValueError(
            f"reads approver.claims.{undeclared[0]}, which claims does not declare: add its type to claims "
            f'({undeclared[0]} = "string", or int, double, bool, list)'
        )
    crossed = cross_type_comparisons(expression, declared)
    if crossed:
        raise ValueError(
            f"compares values of two types, which CEL answers as merely unequal: {crossed[0]}; compare a claim with "
            "a value of its declared type"
        )
    program = compile_condition(expression, APPROVER_VARIABLES)
    for facts in samples(declared):
        try:
            program.execute(facts)
        except TypeError as exc:  # no operation of CEL's takes these types together
            raise ValueError(f"combines values of two types: {str(exc).split('. ')[0]}") from None
        except (KeyError, IndexError, ValueError, ArithmeticError, RuntimeError):
            pass  # depends on the values, not on their types


def _condition_holds(expression: str, facts: dict[str, Any], claims: dict[str, Any]) -> bool:
    person = {"sub": facts.get("sub") or "", "iss": facts.get("iss") or "", "email": facts.get("email") or ""}
    try:
        return _approver_program(expression).execute({"approver": {**person, "claims": claims}}) is True
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:  # fails closed: this person is not admitted
        log.info("an approver condition could not be evaluated for a person (%s): not admitted", type(exc).__name__)
        return False


@cache
def _approver_program(expression: str) -> Any:
    return compile_condition(expression, APPROVER_VARIABLES)


class ApprovalsSection(Model):
    public_url: str | None = None
    """The gateway's base URL as approvers' browsers reach it (the links sent to clients start here)."""
    login: Literal["tokens", "oidc"] = "tokens"
    tokens: list[ApproverToken] = []
    oidc: OidcLogin | None = None
    session_seconds: int = Field(3600, ge=60)
    token_attempts_per_minute: int = Field(20, ge=1)
    """Approver-token attempts (page sign-in and JSON API, right or wrong) allowed per source (an IPv4 address, an
    IPv6 /64) and per token, each a bucket in the store refilled at this rate; past it: HTTP 429, rate_limited."""
    token_attempts_per_minute_total: int = Field(120, ge=1)
    """The ceiling on approver-token attempts from everywhere together (one bucket for the whole page, shared by
    replicas): guesses spread over many sources slow down here."""
    webhooks: dict[str, Webhook] = {}
    approvers: ApproverRule = ApproverRule()
    display_claim: str | None = Field(None, min_length=1)
    """The claim shown beside a person's (issuer, subject) on the page and in the audit (``preferred_username``);
    unset: the email the identity provider states verified. Only ever shown: the pair is who they are."""
    max_pending_per_caller: int = Field(20, ge=1)
    """How many approvals one caller may have waiting at once; a write past it is refused (too_many_approvals)."""
    page_listen: str | None = None
    """Where ``serve --stdio`` serves the approval page itself: a loopback HOST:PORT (port 0: a free one, printed
    on stderr at start). Unset: 127.0.0.1 on a free port when ``public_url`` is unset too, else no page here (the
    gateway at ``public_url`` serves it on the same store)."""
    passkey: Literal["off", "required"] = "off"
    """``required``: a decision on the page counts only when the person's enrolled passkey signed it, over the
    write's exact facts (gateway.approvals.passkeys); a tool's own ``passkey`` overrides it. Needs ``public_url``
    with a domain name (WebAuthn's relying party), ``localhost`` included."""
    max_tasks_per_caller: int = Field(20, ge=1)
    """How many live MCP tasks (url-mode writes a client follows as tasks) one caller may have; a write past it is
    refused (too_many_tasks)."""

    @field_validator("page_listen")
    @classmethod
    def _page_on_loopback(cls, listen: str | None) -> str | None:
        if listen is None:
            return None
        host, _, port = listen.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"{listen!r} is not HOST:PORT")
        if not is_loopback(host):
            raise ValueError(
                f"{host!r} is not a loopback address: a page served beside stdio answers this machine only"
            )
        return listen

    @field_validator("public_url")
    @classmethod
    def _public_url_secure(cls, url: str | None) -> str | None:
        # The page's cookies are __Host- and Secure: a browser stores them only from https:// or loopback.
        return None if url is None else require_secure("the approval page's public URL", url)

    @field_validator("passkey")
    @classmethod
    def _passkeys_need_a_domain(cls, passkey: str, info: ValidationInfo) -> str:
        refusal = passkey_refusal(info.data.get("public_url")) if passkey == "required" else None
        if refusal is not None:
            raise ValueError(refusal)
        return passkey

    @model_validator(mode="after")
    def _login_is_configured(self) -> ApprovalsSection:
        if self.login == "oidc" and self.oidc is None:
            raise ValueError("login 'oidc' needs an [approvals.oidc] table (the page as a client of the provider)")
        return self

    @property
    def configured(self) -> bool:
        """Whether approvers can sign in at all."""
        return bool(self.tokens) if self.login == "tokens" else self.oidc is not None


def passkey_refusal(public_url: str | None) -> str | None:
    """Why passkeys cannot be required with this page address (None: they can), as the sentence after the key:
    WebAuthn's relying party is a domain name."""
    host = urlsplit(public_url).hostname if public_url is not None else None
    if host is None:
        return "'required' needs approvals.public_url: passkeys are bound to the page's origin"
    try:
        ip_address(host)
    except ValueError:
        return None
    return (
        f"'required' needs approvals.public_url with a domain name, not the address {host}: WebAuthn binds a passkey"
        " to a domain (localhost works on this machine)"
    )
