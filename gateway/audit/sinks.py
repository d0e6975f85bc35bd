"""Audit entries streamed out as they are stored, for a SIEM: a JSONL file and an HMAC-signed webhook.

An entry is offered here by gateway.audit.trail.append, the one place that knows it was stored, and only then.
Streaming never blocks or fails a call: ``publish`` puts the entry on each sink's bounded queue and returns;
one task per sink drains its queue in order. A sink that falls ``max_queue`` entries behind loses the newest
(logged, and counted in ``gateway_audit_stream_total{result="dropped"}``); the store keeps every entry
regardless, so ``audit list`` and ``audit verify`` stay complete and a SIEM can reconcile against them.

The webhook gets one POST per entry, the entry as JSON (the shape of ``audit list --json``), with

    X-Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>

so a receiver checks the body and rejects replays older than it tolerates. The secret comes from the
environment variable ``audit_stream.webhook_secret_env`` names. A failed POST is tried again (three tries,
backoff 0.5 s then 1 s), then dropped and logged; a slow or dead receiver delays only its own queue.

Which running gateway's sinks an entry goes to is found from the store it was stored in (``attach``): the trail
is handed only the store, and several gateways may run in one process (the tests do).
"""

from __future__ import annotations

import json
import logging
import os
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from prometheus_client import Counter

from gateway.audit.display import entry_json
from gateway.config import AuditStreamSection
from gateway.config.environ import current
from gateway.records import AuditEntry
from gateway.signing import SIGNATURE_HEADER, signature

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

TRIES = 3
DRAIN_SECONDS = 5.0
"""At shutdown, how long the sinks may take to send what is queued before it is given up (and logged)."""


class SinkError(Exception):
    """A sink cannot be set up; the message names the config key."""


Deliver = Callable[[bytes], Awaitable[None]]


class AuditFeed:
    """The running gateway's sinks, each with its queue."""

    def __init__(self, counter: Counter, max_queue: int) -> None:
        self.counter = counter
        self.max_queue = max_queue
        self.queues: dict[str, MemoryObjectSendStream[bytes]] = {}

    def publish(self, entry: AuditEntry) -> None:
        """Queue a stored entry for every sink; never waits, never raises."""
        if not self.queues:
            return
        try:
            line = json.dumps(streamed(entry), separators=(",", ":"), default=str).encode()
        except ValueError:
            log.error("audit entry of %s not streamed: not JSON", entry.tool)
            return
        for name, queue in self.queues.items():
            try:
                queue.send_nowait(line)
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self.counter.labels(name, "dropped").inc()
                log.error("audit sink %s is %d entries behind: an entry was dropped from it", name, self.max_queue)

    async def _drain(self, name: str, queue: MemoryObjectReceiveStream[bytes], deliver: Deliver) -> None:
        async with queue:
            async for line in queue:
                try:
                    await deliver(line)
                except Exception as exc:
                    self.counter.labels(name, "failed").inc()
                    log.error("audit sink %s failed, entry not streamed: %s", name, type(exc).__name__)
                else:
                    self.counter.labels(name, "sent").inc()


_feeds: weakref.WeakKeyDictionary[object, AuditFeed] = weakref.WeakKeyDictionary()


def attach(store: object, feed: AuditFeed) -> None:
    """Stream the entries stored in ``store`` to ``feed``'s sinks."""
    _feeds[store] = feed


def publish(store: object, entry: AuditEntry) -> None:
    """An entry was stored in ``store``: stream it, if that store's gateway has sinks."""
    feed = _feeds.get(store)
    if feed is not None:
        feed.publish(entry)


def streamed(entry: AuditEntry) -> dict[str, Any]:
    """An entry as a sink gets it: as ``audit list --json`` shows it, sealed into the chain (the trail hands on
    only what the store took), so a SIEM can check the chain too."""
    return entry_json(entry)


@asynccontextmanager
async def open_feed(section: AuditStreamSection, counter: Counter) -> AsyncIterator[AuditFeed]:
    """Start a task per configured sink; on exit, let them send what is queued (bounded), then stop."""
    feed = AuditFeed(counter, section.max_queue)
    if section.file is None and section.webhook_url is None:
        yield feed
        return
    secret = webhook_secret(section) if section.webhook_url is not None else b""
    import httpx  # only a gateway with a sink loads it (with its command line's rich and pygments: about 4 MiB)

    async with httpx.AsyncClient(timeout=section.webhook_timeout_seconds) as http:
        sinks: dict[str, Deliver] = {}
        if section.file is not None:
            sinks["file"] = file_sink(Path(section.file))
        if section.webhook_url is not None:
            sinks["webhook"] = webhook_sink(http, section.webhook_url, secret)
        async with anyio.create_task_group() as tasks:
            for name, deliver in sinks.items():
                send, receive = anyio.create_memory_object_stream[bytes](max_buffer_size=section.max_queue)
                feed.queues[name] = send
                tasks.start_soon(feed._drain, name, receive, deliver)
            try:
                yield feed
            finally:
                for queue in feed.queues.values():
                    queue.close()
                tasks.cancel_scope.deadline = anyio.current_time() + DRAIN_SECONDS


def webhook_secret(section: AuditStreamSection) -> bytes:
    """The webhook's signing secret from the environment (or its ``_FILE``); SinkError if it is not there."""
    assert section.webhook_secret_env is not None
    secret = current(section.webhook_secret_env)
    if len(secret) < 16:
        raise SinkError(
            f"audit_stream.webhook_secret_env: set {section.webhook_secret_env} to a secret of 16 characters or more"
        )
    return secret.encode()


def file_sink(path: Path) -> Deliver:
    """Append each entry as one line to ``path`` (created with its folder, owner-only)."""

    def write(line: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(descriptor, "ab") as out:
            out.write(line + b"\n")

    async def deliver(line: bytes) -> None:
        await anyio.to_thread.run_sync(write, line)

    return deliver


def webhook_sink(http: httpx.AsyncClient, url: str, secret: bytes) -> Deliver:
    """POST each entry to ``url``, signed; tried ``TRIES`` times."""

    import httpx

    async def deliver(line: bytes) -> None:
        for attempt in range(TRIES):
            stamp = int(time.time())
            headers: dict[str, Any] = {
                "Content-Type": "application/json",
                SIGNATURE_HEADER: signature(secret, stamp, line),
            }
            try:
                answer = await http.post(url, content=line, headers=headers)
                if answer.status_code < 300:
                    return
                failure: Exception = RuntimeError(f"HTTP {answer.status_code}")
            except httpx.HTTPError as exc:
                failure = exc
            if attempt + 1 < TRIES:
                await anyio.sleep(0.5 * 2**attempt)
        raise failure

    return deliver
