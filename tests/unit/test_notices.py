"""Each outbound notice escapes backend and caller text for its medium: Slack reads ``& < >`` as markup."""

from __future__ import annotations

import json
import re

from gateway.approvals.notify import Notice, payload
from gateway.config import Webhook
from gateway.records import Approval

HOSTILE = "<!channel> Urgent: <https://evil.example/login|sign in here to approve> & more"
LINK = "https://gw.example.com/approvals/ap_1"


def approval(target: str, **summary: object) -> Approval:
    return Approval(
        approval_id="ap_1",
        plan_id="pl_1",
        caller="local",
        caller_person=None,
        tool="reset_tenant",
        target=target,
        version=3,
        arguments={"tenantId": target, "fixture": "empty"},
        summary=dict(summary),
        message="Delete 812 rows?",
        requested_at=0.0,
        expires_at=600.0,
        approvers_needed=1,
        four_eyes=False,
    )


def test_a_slack_notice_carries_no_markup_from_the_backend_and_one_link() -> None:
    notice = Notice("ops", approval(HOSTILE, rowsDeleted="<@U123>"), LINK, None)
    text = payload(Webhook(url="https://hooks.example.com/in", format="slack"), notice)["text"]
    assert re.findall(r"<[^<>]*>", text) == [f"<{LINK}>"], text
    assert "&lt;!channel&gt;" in text and "&lt;@U123&gt;" in text and "&amp; more" in text


def test_a_json_notice_keeps_the_facts_as_data() -> None:
    notice = Notice("ops", approval(HOSTILE), LINK, "big")
    body = payload(Webhook(url="https://hooks.example.com/in"), notice)
    assert json.loads(json.dumps(body))["target"] == HOSTILE
    assert body["url"] == LINK and body["rule"] == "big"
