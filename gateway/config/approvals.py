"""The ``[approvals]`` section: how approvers reach the approval page and sign in (``confirm = "url"``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gateway.config.sections import Model


class ApproverToken(Model):
    """An approver known by the SHA-256 (hex) of their token; the token itself is never stored."""

    sha256: str = Field(pattern="^[0-9a-f]{64}$")
    subject: str = Field(min_length=1)
    """Who this person is: for four eyes, compared with the subject of the caller's own (static) token."""
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


class ApprovalsSection(Model):
    public_url: str | None = None
    """The gateway's base URL as approvers' browsers reach it (the links sent to clients start here)."""
    login: Literal["tokens", "oidc"] = "tokens"
    tokens: list[ApproverToken] = []
    oidc: OidcLogin | None = None
    session_seconds: int = Field(3600, ge=60)

    @model_validator(mode="after")
    def _login_is_configured(self) -> ApprovalsSection:
        if self.public_url is not None and not self.public_url.startswith(("http://", "https://")):
            raise ValueError("approvals.public_url must be an http:// or https:// URL")
        if self.login == "oidc" and self.oidc is None:
            raise ValueError("approvals.login 'oidc' needs an [approvals.oidc] table")
        return self

    @property
    def configured(self) -> bool:
        """Whether approvers can sign in at all."""
        return bool(self.tokens) if self.login == "tokens" else self.oidc is not None
