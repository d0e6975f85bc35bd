"""Per-target locks with leases and fencing tokens, for the stores several replicas share (Redis, PostgreSQL).

A store supplies three atomic steps on its own server (``LeaseSteps``): acquire (set the target's lock only if
it is free or its lease lapsed, with a token made of the target's fence, a counter never reset, and a random
part), renew (push the lease out while the token still holds it) and unlock (free it only for that token). This
module is the loop around them, written once:

- waiters in this process queue locally first, so only one of them polls the store for a target;
- the acquire is polled with a short backoff, shielded from cancellation (a caller that hangs up must not leave a
  lock it took but never learnt about);
- while the body runs, a background task renews the lease every third of it; a renewal that fails is logged
  and tried again at the next third; one that finds the lock taken stops (the claim and settle under it are
  then refused by the store, which compares their token);
- the token is remembered for the task (a context variable): ``token(target)`` is what the store's claim,
  release and settle pass as their fence ("" outside a lock); a key's claim is remembered with its token until
  the key is settled or released (``owner``), so a later call settles it as that claim's own;
- the unlock runs shielded, and a store that cannot be reached lets the lock lapse with its lease.

The lease must outlast the longest write timeout by ``LEASE_MARGIN_SECONDS`` (``lease_refusal``: ``check`` and
``serve`` refuse a config where it does not), so that the write of a holder that died mid-call has landed or
failed before another replica can take the target.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

import anyio

from gateway.errors import StoreUnavailable
from gateway.records import KeyRecord
from gateway.stores.locks import KeyedLocks

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 60.0
LEASE_MARGIN_SECONDS = 5.0
"""How much longer than the longest write timeout a lock lease must be: once the backend call's own timeout has
passed, time to record its outcome before another replica may take the target."""
SHARED_SCHEMES = ("redis://", "rediss://", "unix://", "redis+sentinel://", "postgresql://", "postgres://")
"""The store URLs of stores several replicas share, whose per-target locks are leased (``lock_lease``)."""


class LeaseSteps(Protocol):
    """The atomic steps a shared store runs on its server for one target's lock."""

    async def acquire(self, target: str, nonce: str, lease_ms: int) -> str | None:
        """The new token if the lock was free (or lapsed), the same token again if ``nonce`` already holds it
        (a retry after a lost reply), else None."""
        ...

    async def renew(self, target: str, token: str, lease_ms: int) -> bool:
        """Push the lease out if ``token`` still holds the lock; False if it does not."""
        ...

    async def unlock(self, target: str, token: str) -> None:
        """Free the lock if ``token`` holds it."""
        ...


class LeasedLocks:
    """One holder per target across every replica, through a store's ``LeaseSteps``."""

    def __init__(self, steps: LeaseSteps, lease: float, name: str) -> None:
        self.lease = lease
        self._steps = steps
        self._local = KeyedLocks()
        self._held: ContextVar[Mapping[str, str] | None] = ContextVar(f"{name}-locks-{id(self)}", default=None)
        self._claims: dict[tuple[str, str], str] = {}

    def hold(self, target: str) -> AbstractAsyncContextManager[None]:
        """Hold the target's lock for the body."""
        return self._hold(target)

    def token(self, target: str) -> str:
        """The token this task holds the target's lock with, or "" outside a lock."""
        return (self._held.get() or {}).get(target, "")

    def claimed(self, record: KeyRecord, token: str) -> None:
        """Remember that this process claimed ``record``'s key with ``token``, until ``forget``."""
        self._claims[(record.caller, record.key)] = token

    def forget(self, record: KeyRecord) -> None:
        """The key is settled or released: its claim is no longer this process's to settle."""
        self._claims.pop((record.caller, record.key), None)

    def owner(self, record: KeyRecord) -> str:
        """The token this process claimed the key with (so that an outcome the store could not take at once is
        stored later, by a call holding no lock, as its claim's own: gateway.write.unsettled), else the token of the
        lock this task holds. A key another replica found orphaned is unknown by then, and the key's state
        machine refuses any other outcome over it."""
        return self._claims.get((record.caller, record.key)) or self.token(record.target)

    @property
    def lease_ms(self) -> int:
        """The lease in milliseconds, as the stores' steps take it."""
        return max(1, int(self.lease * 1000))

    @asynccontextmanager
    async def _hold(self, target: str) -> AsyncIterator[None]:
        async with self._local.hold(target):
            token = await self._acquire(target)
            try:
                held = self._held.set({**(self._held.get() or {}), target: token})
                try:
                    async with beside(self._renew, target, token):
                        yield
                finally:
                    self._held.reset(held)
            finally:
                with anyio.CancelScope(shield=True):
                    await self._unlock(target, token)

    async def _acquire(self, target: str) -> str:
        nonce = secrets.token_hex(12)
        delay = 0.005
        while True:
            with anyio.CancelScope(shield=True):
                token = await self._steps.acquire(target, nonce, self.lease_ms)
            if token:
                return token
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.1)

    async def _renew(self, target: str, token: str) -> None:
        while True:
            await anyio.sleep(self.lease / 3)
            try:
                renewed = await self._steps.renew(target, token, self.lease_ms)
            except Exception as exc:  # never let a renewal error cancel the write it protects
                log.warning("cannot renew the lock on %s: %s", target, type(exc).__name__)
                continue
            if not renewed:
                log.error("lost the lock on %s: its lease lapsed; claim and settle under it will be refused", target)
                return

    async def _unlock(self, target: str, token: str) -> None:
        try:
            await self._steps.unlock(target, token)
        except StoreUnavailable:
            log.warning("cannot release the lock on %s; it lapses with its lease", target)


@asynccontextmanager
async def beside(task: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> AsyncIterator[None]:
    """Run a background task while the body runs; the body's exception comes out as itself, not in a group."""
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(task, *args)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


def lease_refusal(store: str, write_timeouts: dict[str, float]) -> str | None:
    """Why a shared store's lock lease is too short for the longest write timeout (a sentence naming the config
    keys), or None. ``write_timeouts`` maps each config key to its seconds."""
    if not store.startswith(SHARED_SCHEMES):
        return None
    lease = DEFAULT_LEASE_SECONDS
    for name, value in parse_qsl(urlsplit(store).query):
        if name == "lock_lease":
            try:
                lease = float(value)
            except ValueError:
                return "gateway.store: lock_lease must be a number of seconds"
    key, longest = max(write_timeouts.items(), key=lambda item: item[1])
    if lease > longest + LEASE_MARGIN_SECONDS:
        return None
    return (
        f"gateway.store: lock_lease={lease:g} must exceed {key} ({longest:g} s) by more than "
        f"{LEASE_MARGIN_SECONDS:g} s, or a write that outlives its lock lets a second write onto the same target: "
        f"raise lock_lease above {longest + LEASE_MARGIN_SECONDS:g} or lower {key}"
    )
