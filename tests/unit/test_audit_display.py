"""``audit list`` shows which approval rule decided each entry's mode."""

from __future__ import annotations

from gateway.audit.display import table
from gateway.records import AuditEntry


def test_the_table_names_the_rule_and_the_rule_that_failed_closed() -> None:
    entries = [
        AuditEntry(at=0, caller="agent", tool="reset_tenant", outcome="denied", target="t1", extra={"rule": "spent"}),
        AuditEntry(
            at=0, caller="agent", tool="reset_tenant", outcome="applied", extra={"rule": "big", "unevaluable": "tier"}
        ),
        AuditEntry(at=0, caller="agent", tool="reset_tenant", outcome="applied"),
    ]
    header, denied, failed_closed, own = table(entries).splitlines()
    assert header.split()[8] == "rule"
    assert "spent" in denied.split()
    assert "big" in failed_closed.split() and "unevaluable:tier" in failed_closed.split()
    assert "unevaluable" not in own and "spent" not in own
