"""``audit list`` shows which approval rule decided each entry's mode, and who approved: each person's (issuer,
subject) with the verified email or display claim beside it."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.audit.display import table
from gateway.identity.person import audited, display_of, person_id
from gateway.records import AuditEntry

IDP = "https://idp.example.com"


def test_the_table_names_the_rule_and_the_rule_that_failed_closed() -> None:
    entries = [
        AuditEntry(at=0, caller="agent", tool="reset_tenant", outcome="denied", target="t1", extra={"rule": "spent"}),
        AuditEntry(
            at=0, caller="agent", tool="reset_tenant", outcome="applied", extra={"rule": "big", "unevaluable": "tier"}
        ),
        AuditEntry(at=0, caller="agent", tool="reset_tenant", outcome="applied"),
    ]
    header, denied, failed_closed, own = table(entries).splitlines()
    assert header.split()[9] == "rule"
    assert "spent" in denied.split()
    assert "big" in failed_closed.split() and "unevaluable:tier" in failed_closed.split()
    assert "unevaluable" not in own and "spent" not in own


def test_the_table_names_each_approver_by_issuer_and_subject_with_the_display_beside() -> None:
    mallory = audited(person_id(IDP, "mallory"), "mallory@example.test")
    bob = audited(person_id("static", "bob"), "Bob")
    entries = [
        AuditEntry(at=0, caller="agent", tool="reset_tenant", outcome="approval", extra={"approver": mallory}),
        AuditEntry(at=0, caller="agent", tool="reset_tenant", outcome="applied", extra={"approvers": [mallory, bob]}),
        AuditEntry(at=0, caller="agent", tool="reset_tenant", outcome="applied", extra={"approvers": ["Old Name"]}),
    ]
    header, approval, applied, older = table(entries).splitlines()
    by = header.index("by")
    assert approval[by:].startswith(f"mallory ({IDP}) <mallory@example.test>")
    assert applied[by:].startswith(f"mallory ({IDP}) <mallory@example.test>, bob (static) <Bob>")
    assert older[by:].startswith('"Old Name"')  # an entry written before people were kept as pairs


def test_a_subject_that_looks_like_another_person_is_escaped() -> None:
    forged = audited(person_id(IDP, "bob (static) <Bob>"))
    entry = AuditEntry(at=0, caller="a", tool="t", outcome="approval", extra={"approver": forged})
    row = table([entry]).splitlines()[1]
    assert f"bob%20%28static%29%20%3CBob%3E ({IDP})" in row


@pytest.mark.parametrize(
    ("claims", "display_claim", "shown"),
    [
        (
            {"name": "Bob Builder", "email": "mallory@example.test", "email_verified": True},
            None,
            "mallory@example.test",
        ),
        ({"name": "Bob Builder", "email": "bob@example.test"}, None, None),  # an unverified email is not shown
        ({"name": "Bob Builder", "preferred_username": "mal"}, "preferred_username", "mal"),
        ({"name": "Bob Builder"}, "name", "Bob Builder"),  # only when the operator chose that claim
        ({"name": "Bob Builder"}, "preferred_username", None),
    ],
)
def test_the_name_a_person_chose_is_shown_only_when_the_operator_picks_that_claim(
    claims: dict[str, Any], display_claim: str | None, shown: str | None
) -> None:
    assert display_of({"sub": "mallory", "iss": IDP, **claims}, display_claim) == shown
