"""One identity for a person: callers and approvers are compared as (issuer, subject), so ``check`` refuses four
eyes (and ``approvers > 1``) where they come from different identity spaces, and tokens name the issuer of the
person they stand for."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.http.page.login import token_approver
from gateway.identity.person import person_id
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

IDP = "https://login.example.com"
SECRET = "dana-approver-token-0123456789"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def configured(
    tmp_path: Path, auth: dict[str, Any], *, tokens: list[dict[str, Any]], oidc: bool, four_eyes: bool, approvers: int
) -> dict[str, Any]:
    def url_mode(tools: dict[str, Any]) -> None:
        tools[TENANTS.write_tool].update(confirm="url", four_eyes=four_eyes, approvers=approvers)

    data = config_data(TENANTS, tmp_path / "backend.db", state_dir=tmp_path, tools=url_mode)
    data["auth"] = {"resource_url": "https://gw.example.com/mcp", **auth}
    data["approvals"] = {"public_url": "https://gw.example.com", "login": "tokens", "tokens": tokens}
    if oidc:
        data["approvals"].update(login="oidc", oidc={"client_id": "c", "issuer": IDP}, approvers={"subjects": ["x"]})
    return data


DANA_CALLER = {"sha256": sha("a"), "client_id": "cli", "subject": "dana"}
STATIC = {"verifier": "static", "tokens": [DANA_CALLER]}
STATIC_AT_IDP = {"verifier": "static", "tokens": [{**DANA_CALLER, "issuer": IDP}]}
JWT = {"verifier": "jwt", "jwt": {"issuer": IDP, "jwks_url": f"{IDP}/jwks"}}
JWT_SLASH = {"verifier": "jwt", "jwt": {"issuer": IDP + "/", "jwks_url": f"{IDP}/jwks"}}
INTROSPECTED = {"verifier": "introspection", "introspection": {"endpoint": f"{IDP}/introspect", "issuer": IDP}}
INTROSPECTED_ANY = {"verifier": "introspection", "introspection": {"endpoint": f"{IDP}/introspect"}}
TOKEN = {"sha256": sha(SECRET), "subject": "dana"}
TOKEN_AT_IDP = {**TOKEN, "issuer": IDP}


@pytest.mark.parametrize(
    ("auth", "tokens", "oidc", "named"),
    [
        (JWT, [TOKEN], False, "approvals.tokens.0.issuer"),  # dana's approver token is ("static", dana)
        (JWT, [TOKEN], True, "approvals.tokens.0.issuer"),
        (STATIC, [], True, "auth.tokens.0.issuer"),  # dana's caller token is ("static", dana)
        (STATIC, [TOKEN_AT_IDP], False, "auth.tokens.0.issuer"),
        (INTROSPECTED, [TOKEN], True, "approvals.tokens.0.issuer"),
        (INTROSPECTED_ANY, [TOKEN_AT_IDP], True, "auth.introspection.issuer"),
    ],
    ids=["jwt+static-token", "jwt+static-token+oidc", "static+oidc", "static+token", "introspection", "any-issuer"],
)
def test_four_eyes_across_identity_spaces_is_refused_naming_the_key_to_set(
    tmp_path: Path, auth: dict[str, Any], tokens: list[dict[str, Any]], oidc: bool, named: str
) -> None:
    with pytest.raises(ConfigError, match=rf"four_eyes.*{named}"):
        parse_config(configured(tmp_path, auth, tokens=tokens, oidc=oidc, four_eyes=True, approvers=1))


@pytest.mark.parametrize(
    ("auth", "tokens", "oidc"),
    [
        (JWT, [TOKEN_AT_IDP], True),
        (JWT_SLASH, [TOKEN_AT_IDP], True),  # a trailing slash is the same issuer
        (STATIC_AT_IDP, [TOKEN_AT_IDP], True),
        (INTROSPECTED, [TOKEN_AT_IDP], True),
        (STATIC, [TOKEN], False),  # a small setup: every person is known from the config alone
    ],
    ids=["jwt", "jwt-slash", "static-at-idp", "introspection", "all-static"],
)
def test_four_eyes_in_one_identity_space_loads(
    tmp_path: Path, auth: dict[str, Any], tokens: list[dict[str, Any]], oidc: bool
) -> None:
    parse_config(configured(tmp_path, auth, tokens=tokens, oidc=oidc, four_eyes=True, approvers=2))


def test_two_approvers_from_two_identity_spaces_are_refused(tmp_path: Path) -> None:
    """One person with a token and a sign-in would count twice: refused even without four eyes."""
    with pytest.raises(ConfigError, match=r"approvers = 2 counts distinct people.*approvals.tokens.0.issuer"):
        parse_config(configured(tmp_path, JWT, tokens=[TOKEN], oidc=True, four_eyes=False, approvers=2))
    parse_config(configured(tmp_path, JWT, tokens=[TOKEN], oidc=True, four_eyes=False, approvers=1))


def test_an_approver_token_is_the_person_its_entry_names() -> None:
    config = parse_config(configured(Path("/tmp"), JWT, tokens=[TOKEN_AT_IDP], oidc=True, four_eyes=True, approvers=1))
    approver = token_approver(config.approvals.tokens, SECRET)
    assert approver is not None and approver.person == person_id(IDP, "dana") == person_id(IDP + "/", "dana")
    assert approver.facts == {"sub": "dana", "iss": IDP}
