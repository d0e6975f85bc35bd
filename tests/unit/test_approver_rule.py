"""Who may say yes: ``[approvals.approvers]`` admits a person by subject, verified email, claim values or a CEL
condition over the person's facts (failing closed, also on a claim of another type than declared), and a url-mode
tool with OIDC sign-in and no such rule is refused (anyone the provider signs in could approve)."""

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
    claims={"groups": "list", "mfa": "bool"},
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
    unkept = ApproverRule(when='"ops" in approver.claims.groups', claims={"groups": "list"})
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
        ({"claims": {"groups": "list"}}, "there is no `when`"),
    ],
)
def test_a_condition_that_does_not_compile_is_refused_naming_why(
    tmp_path: Path, approvers: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(url_with_oidc(tmp_path, **approvers))


def test_a_condition_alone_is_an_approver_rule_for_oidc(tmp_path: Path) -> None:
    parse_config(url_with_oidc(tmp_path, when='"sre" in approver.claims.groups', claims={"groups": "list"}))


# --- a condition never compares across types ------------------------------------------------------------------

NOT_A_CONTRACTOR = ApproverRule(when='approver.claims.dept != "contractors"', claims={"dept": "string"})


@pytest.mark.parametrize(
    ("dept", "admitted"),
    [
        ("engineering", True),
        ("contractors", False),
        (["contractors"], False),  # many providers send an attribute as a list for one person, a string for another
        (["engineering"], False),
        (5, False),
        (5.0, False),
        (True, False),
        ({"name": "contractors"}, False),  # never kept: absent, so reading it fails closed
        (None, False),
    ],
    ids=repr,
)
def test_a_claim_of_another_type_than_declared_admits_no_one(dept: Any, admitted: bool) -> None:
    claims = {"sub": "m", "iss": "https://idp", **({"dept": dept} if dept is not None else {})}
    assert NOT_A_CONTRACTOR.admits(approver_facts(claims, NOT_A_CONTRACTOR.kept_claims)) is admitted


@pytest.mark.parametrize(
    ("when", "declared", "held", "admitted"),
    [
        ('!("contractors" in approver.claims.groups)', "list", ["sre"], True),
        ('!("contractors" in approver.claims.groups)', "list", "sre", False),
        ('!("contractors" in approver.claims.groups)', "list", ["contractors"], False),
        ("approver.claims.level != 3", "int", 4, True),
        ("approver.claims.level != 3", "int", "4", False),
        ("approver.claims.level != 3", "int", 4.0, False),
        ("approver.claims.level != 3", "int", True, False),
        ("approver.claims.score != 0.5", "double", 1, True),  # a whole number is a double's value too
        ("approver.claims.score != 0.5", "double", "1", False),
        ("approver.claims.mfa != false", "bool", True, True),
        ("approver.claims.mfa != false", "bool", "true", False),
        ("approver.claims.mfa != false", "bool", 1, False),
    ],
)
def test_every_declared_type_holds_against_the_other_shapes(
    when: str, declared: str, held: Any, admitted: bool
) -> None:
    name = when.split("approver.claims.")[1].split(" ")[0].rstrip(")")
    rule = ApproverRule(when=when, claims={name: declared})
    assert rule.admits(approver_facts({"sub": "m", name: held}, rule.kept_claims)) is admitted


@pytest.mark.parametrize(
    ("approvers", "message"),
    [
        ({"when": 'approver.claims.dept != "x"', "claims": ["dept"]}, 'declare the type.*dept = "string"'),
        ({"when": "approver.claims.dept != 5", "claims": {"dept": "string"}}, r"approver.claims.dept \(string\) != 5"),
        ({"when": "5 in approver.claims.groups", "claims": {"groups": "list"}}, "two types"),
        ({"when": "approver.claims.dept in [1, 2]", "claims": {"dept": "string"}}, "two types"),
        ({"when": 'approver.claims.level == "3"', "claims": {"level": "int"}}, "two types"),
        ({"when": "approver.email != null", "claims": {}}, "two types"),
        ({"when": 'approver.claims.level < "3"', "claims": {"level": "int"}}, "combines values of two types"),
        ({"when": 'approver.claims.dept != "x"', "claims": {"groups": "list"}}, "claims does not declare"),
        ({"when": 'approver.claims.dept != "x"', "claims": {"dept": "text"}}, "approvals.approvers.claims.dept"),
    ],
)
def test_a_condition_comparing_across_types_is_refused_at_load(
    tmp_path: Path, approvers: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(url_with_oidc(tmp_path, **approvers))
