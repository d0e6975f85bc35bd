"""Who may say yes: ``[approvals.approvers]`` admits a person by subject, verified email, claim values or a CEL
condition over the person's facts (failing closed), and a url-mode tool with OIDC sign-in and no such rule is refused
(anyone the provider signs in could approve)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.config.approvals import ApproverRule
from gateway.http.page.login import approver_facts
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

RULE = ApproverRule(subjects=["bob"], emails=["ops@example.com"], claim="groups", values=["sre"])


@pytest.mark.parametrize(
    ("claims", "admitted"),
    [
        ({"sub": "bob", "iss": "https://idp"}, True),
        ({"sub": "mallory", "iss": "https://idp"}, False),
        ({"sub": "m", "email": "ops@example.com", "email_verified": True}, True),
        ({"sub": "m", "email": "ops@example.com"}, False),  # not stated verified: the user may have typed it
        ({"sub": "m", "email": "ops@example.com", "email_verified": "true"}, False),
        ({"sub": "m", "groups": ["dev", "sre"]}, True),
        ({"sub": "m", "groups": "sre"}, True),
        ({"sub": "m", "groups": ["dev"]}, False),
        ({"sub": "m", "groups": [["sre"]]}, False),
        ({"sub": "m", "name": "Bob Builder"}, False),  # a display name is never an identity
    ],
)
def test_the_rule_admits_by_subject_verified_email_or_claim(claims: dict[str, Any], admitted: bool) -> None:
    assert RULE.admits(approver_facts(claims, RULE.kept_claims)) is admitted


def test_no_rule_admits_everyone_it_is_given_and_claim_needs_values() -> None:
    assert ApproverRule().admits({}) and not ApproverRule().configured
    with pytest.raises(ValueError, match="claim and values go together"):
        ApproverRule(claim="groups")


def url_with_oidc(tmp_path: Path, **approvers: Any) -> dict[str, Any]:
    def url_mode(tools: dict[str, Any]) -> None:
        tools[TENANTS.write_tool]["confirm"] = "url"

    data = config_data(TENANTS, tmp_path / "backend.db", state_dir=tmp_path, tools=url_mode)
    data["approvals"] = {
        "public_url": "https://gw.example.com",
        "login": "oidc",
        "oidc": {"client_id": "c", "issuer": "https://idp.example.com"},
        **({"approvers": approvers} if approvers else {}),
    }
    return data


def test_url_mode_with_oidc_and_no_approver_rule_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs \[approvals.approvers\]"):
        parse_config(url_with_oidc(tmp_path))
    parse_config(url_with_oidc(tmp_path, subjects=["bob"]))


ON_CALL = ApproverRule(
    when='"sre-oncall" in approver.claims.groups && approver.claims.mfa == true && approver.iss == "https://idp"',
    claims=["groups", "mfa"],
)


@pytest.mark.parametrize(
    ("claims", "admitted"),
    [
        ({"sub": "m", "iss": "https://idp", "groups": ["sre-oncall"], "mfa": True}, True),
        ({"sub": "m", "iss": "https://other", "groups": ["sre-oncall"], "mfa": True}, False),
        ({"sub": "m", "iss": "https://idp", "groups": ["sre"], "mfa": True}, False),
        ({"sub": "m", "iss": "https://idp", "groups": ["sre-oncall"]}, False),  # a claim missing: fails closed
        ({"sub": "m", "iss": "https://idp", "groups": ["sre-oncall"], "mfa": "true"}, False),  # wrong type
        ({"sub": "m", "iss": "https://idp", "groups": "sre-oncall", "mfa": True}, False),  # a string: `in` needs a list
        ({"sub": "m", "iss": "https://idp", "groups": [{"name": "sre-oncall"}], "mfa": True}, False),  # not kept
        ({"sub": "m", "iss": "https://idp", "groups": ["x" * 300, "sre-oncall"], "mfa": True}, True),  # long: left out
        ({"sub": "m", "iss": "https://idp", "groups": ["g"] * 256 + ["sre-oncall"], "mfa": True}, False),  # past 256
    ],
)
def test_a_condition_admits_by_the_claims_it_keeps_and_fails_closed(claims: dict[str, Any], admitted: bool) -> None:
    assert ON_CALL.admits(approver_facts(claims, ON_CALL.kept_claims)) is admitted


def test_a_condition_reads_only_the_claims_the_rule_keeps_and_never_a_non_boolean_as_yes() -> None:
    unkept = ApproverRule(when='approver.claims.department == "ops"', claims=["groups"])
    assert not unkept.admits(approver_facts({"sub": "m", "department": "ops"}, unkept.kept_claims))
    truthy = ApproverRule(when="approver.sub")  # a string, not true
    assert not truthy.admits(approver_facts({"sub": "m"}, truthy.kept_claims))
    token = ApproverRule(when='approver.sub == "bob" && approver.iss == "static"')  # an approver token's facts
    assert token.admits({"sub": "bob", "iss": "static"}) and not token.admits({"sub": "eve", "iss": "static"})


@pytest.mark.parametrize(
    ("approvers", "message"),
    [
        ({"when": "approver.sub =="}, "Syntax error|syntax|parse"),
        ({"when": 'caller.id == "x"'}, "caller"),
        ({"claims": ["groups"]}, "there is no `when`"),
    ],
)
def test_a_condition_that_does_not_compile_is_refused_naming_why(
    tmp_path: Path, approvers: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(url_with_oidc(tmp_path, **approvers))


def test_a_condition_alone_is_an_approver_rule_for_oidc(tmp_path: Path) -> None:
    parse_config(url_with_oidc(tmp_path, when='"sre" in approver.claims.groups', claims=["groups"]))
