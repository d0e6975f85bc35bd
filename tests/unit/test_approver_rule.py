"""Who may say yes: ``[approvals.approvers]`` admits a person by subject, verified email or claim values, and a
url-mode tool with OIDC sign-in and no such rule is refused (anyone the provider signs in could approve)."""

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
    assert RULE.admits(approver_facts(claims, RULE.claim)) is admitted


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
