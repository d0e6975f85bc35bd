"""Approvers hear about a write that waits for them: a webhook per approval rule, never in the call's way.

When a url-mode write asks for a new approval and its rule names a webhook (``notify``), the approval's facts and
link are queued here and the call goes on at once. A background task POSTs them (JSON, or Slack's ``{"text"}``),
retrying with backoff (0.5 s, 1 s, 2 s) when the receiver fails or is down, and gives up after the last try with a
log line. The queue is bounded: when it is full, a notification is dropped and logged, never waited for.

Signature: with ``secret_env`` set, every POST carries ``X-Gateway-Signature`` (gateway.signing).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio

from gateway.approvals.lifecycle import approval_facts
from gateway.config import Webhook
from gateway.config.environ import current
from gateway.identity.principal import readable
from gateway.records import Approval
from gateway.signing import SIGNATURE_HEADER, signature
from gateway.text import escaped, quoted

log = logging.getLogger(__name__)
QUEUE = 1000
BACKOFF = (0.5, 1.0, 2.0)
TIMEOUT = 5.0
PARALLEL = 4


@dataclass(frozen=True)
class Notice:
    """One approval to announce, to one webhook."""

    webhook: str
    approval: Approval
    url: str
    rule: str | None


class Notifier:
    """The queue of notifications and the task that delivers them."""

    def __init__(self, webhooks: dict[str, Webhook]) -> None:
        self._webhooks = webhooks
        self._send, self._receive = anyio.create_memory_object_stream[Notice](QUEUE)
        self.delivered = 0
        self.failed = 0

    def notify(self, webhook: str, approval: Approval, url: str, rule: str | None) -> None:
        """Queue a notification; never waits."""
        try:
            self._send.send_nowait(Notice(webhook, approval, url, rule))
        except anyio.WouldBlock:
            log.error("webhook %s: queue full, notification for %s dropped", webhook, approval.approval_id)

    async def run(self) -> None:
        """Deliver queued notifications until cancelled, a few at a time."""
        limit = anyio.Semaphore(PARALLEL)
        async with anyio.create_task_group() as tasks, self._receive:
            async for notice in self._receive:
                await limit.acquire()
                tasks.start_soon(self._deliver, notice, limit)

    async def _deliver(self, notice: Notice, limit: anyio.Semaphore) -> None:
        try:
            webhook = self._webhooks[notice.webhook]
            body = json.dumps(payload(webhook, notice), separators=(",", ":")).encode()
            for pause in (*BACKOFF, None):
                if await self._post(webhook, body, notice):
                    self.delivered += 1
                    return
                if pause is not None:
                    await anyio.sleep(pause)
            self.failed += 1
            tries = len(BACKOFF) + 1
            log.error("webhook %s: gave up on %s after %d tries", notice.webhook, notice.approval.approval_id, tries)
        finally:
            limit.release()

    async def _post(self, webhook: Webhook, body: bytes, notice: Notice) -> bool:
        import httpx  # only a gateway that notifies loads it (about 4 MiB with what it imports)

        headers = {"Content-Type": "application/json", **signed(webhook, body)}
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT) as http:
                response = await http.post(webhook.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("webhook %s: %s for %s", notice.webhook, type(exc).__name__, notice.approval.approval_id)
            return False
        if response.is_success:
            return True
        log.warning("webhook %s: HTTP %d for %s", notice.webhook, response.status_code, notice.approval.approval_id)
        return False


def payload(webhook: Webhook, notice: Notice) -> dict[str, Any]:
    """What a webhook receives: the approval's facts and link (or, for Slack, one line of escaped text)."""
    approval = notice.approval
    if webhook.format == "slack":
        numbers = ", ".join(f"{name} {escaped(str(value))}" for name, value in approval.summary.items())
        rule = f" (rule {notice.rule})" if notice.rule else ""
        caller = quoted(readable(approval.caller))
        text = f"{approval.tool} on {quoted(approval.target)} ({numbers}) waits for approval{rule}, asked by {caller}"
        return {"text": f"{slack_escaped(text)}: <{notice.url}>"}
    return {"event": "approval_requested", **approval_facts(approval, notice.url), "rule": notice.rule}


def slack_escaped(text: str) -> str:
    """Text for Slack's ``mrkdwn``, where ``<...>`` is a link or a mention (``<!channel>``) and ``&`` starts an
    entity: the three are written as entities, so backend text shows as written and links only the gateway's own."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def signed(webhook: Webhook, body: bytes, now: float | None = None) -> dict[str, str]:
    """The signature header for a notice's body (none when the webhook has no secret)."""
    secret = current(webhook.secret_env) if webhook.secret_env else ""
    if not secret:
        return {}
    stamp = int(now if now is not None else time.time())
    return {SIGNATURE_HEADER: signature(secret.encode(), stamp, body)}
