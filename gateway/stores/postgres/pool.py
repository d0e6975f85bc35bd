"""The PostgreSQL connection pool every role of the store shares, and the steps each operation runs as: one
transaction, or one statement on its own (autocommit), within ``timeout``; a server that fails raises
StoreUnavailable. Also the purge of what lapsed in every role's tables, run with a plan's put.

After a restart of the database an operation still gets through within its ``timeout``:

- a statement that PostgreSQL answers with "this session was ended before it ran" (SQLSTATE 57P01-57P03: the
  server shut down, crashed or is starting) never ran, so it runs once more on another connection, and every
  pooled connection is checked before its next use for a while;
- while the pool is still backing off its reconnects (after failing to reach the server, it waits 1, 2, 4 ...
  seconds between attempts), an operation that finds no pooled connection ready opens one of its own for the
  operation, so the first call after the database is back does not wait for the pool's next attempt."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import psycopg
from psycopg_pool import AsyncConnectionPool

from gateway.audit.chain import ChainKeys
from gateway.records import WRITE_WINDOWS
from gateway.stores.base import StoreUnavailable
from gateway.stores.postgres.url import parse_url

log = logging.getLogger(__name__)

T = TypeVar("T")
Conn = psycopg.AsyncConnection[tuple[Any, ...]]

CHECK_IDLE_SECONDS = 1.0
"""A pooled connection idle longer than this is checked (one round trip) before use."""
PURGE_EVERY = 60.0
"""Seconds between purges of lapsed keys, nonces, buckets, approvals and counted writes (plans: every put)."""
UNREACHABLE = (psycopg.OperationalError, psycopg.InterfaceError, TimeoutError)
"""A server that is down, restarting, unreachable or stalled; a dropped connection; no pooled connection in time."""
NEVER_RAN = frozenset({"57P01", "57P02", "57P03"})
"""admin_shutdown, crash_shutdown, cannot_connect_now: the server ended (or refused) the session before it ran the
statement, which is therefore safe to run again. Any other failure of a sent statement may have committed."""
SUSPECT_SECONDS = 10.0
"""After a failure, every pooled connection is checked before use for this long (a restart ends them all)."""


class PostgresPool:
    """One PostgreSQL schema opened for the store's roles: what each role class (gateway.stores.postgres.keys,
    audit, ...) adds its operations to (a role with state of its own makes it in its ``__init__``)."""

    def __init__(self, url: str, keys: ChainKeys | None = None) -> None:
        self.config = parse_url(url)
        self.lease = self.config.lease
        self._keys = keys or ChainKeys.ephemeral()
        timeout_ms = str(int(self.config.timeout * 1000))
        settings = {"search_path": self.config.schema, "statement_timeout": timeout_ms, "lock_timeout": timeout_ms}

        returned: dict[int, float] = {}

        async def configure(conn: Conn) -> None:
            for name, value in settings.items():
                await conn.execute("SELECT set_config(%s, %s, false)", [name, value])

        async def check(conn: Conn) -> None:
            # A connection idle for a while may have outlived its server (a restart): one round trip finds out,
            # and the pool replaces it instead of failing the call. One in steady use skips that round trip,
            # unless a failure was seen lately.
            now = time.monotonic()
            if now - returned.pop(id(conn), 0.0) > CHECK_IDLE_SECONDS or now < self._suspect_until:
                await AsyncConnectionPool.check_connection(conn)

        async def reset(conn: Conn) -> None:
            returned[id(conn)] = time.monotonic()

        self._pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self.config.conninfo,
            open=False,
            min_size=1,
            max_size=self.config.pool_max,
            kwargs={"autocommit": True},
            configure=configure,
            check=check,
            reset=reset,
            timeout=self.config.timeout,
            name=f"gateway-store-{self.config.schema}",
        )
        self._configure = configure
        self._opened = False
        self._opening = anyio.Lock()
        self._purged_at = 0.0
        self._suspect_until = 0.0
        self._failing = False  # the last pooled attempt failed to reach the server
        self._own = anyio.Semaphore(self.config.pool_max)  # connections opened beside the pool, at most pool_max

    async def _run(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """``work`` on one connection, within ``timeout``, run once more if the server ended the session before
        it ran (NEVER_RAN); StoreUnavailable when the server fails."""
        try:
            with anyio.fail_after(self.config.timeout):
                try:
                    return await self._attempt(work)
                except psycopg.Error as exc:
                    if exc.sqlstate not in NEVER_RAN:
                        raise
                    log.info("the PostgreSQL store ended a session (%s): running the statement again", exc.sqlstate)
                    self._suspect_until = time.monotonic() + SUSPECT_SECONDS
                    return await self._attempt(work)
        except UNREACHABLE as exc:
            self._suspect_until = time.monotonic() + SUSPECT_SECONDS
            log.warning("the PostgreSQL store cannot be reached: %s", type(exc).__name__)
            raise StoreUnavailable(f"the PostgreSQL store cannot be reached ({type(exc).__name__})") from exc

    async def _attempt(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """``work`` on a pooled connection; on one of its own while the pool has none ready after a failure."""
        if not self._opened:
            async with self._opening:
                if not self._opened:
                    await self._pool.open(wait=False)
                    self._opened = True
        if self._failing and self._pool.get_stats().get("pool_available", 0) == 0:
            return await self._beside_the_pool(work)
        try:
            async with self._pool.connection() as conn:
                self._failing = False
                return await work(conn)
        except UNREACHABLE:
            self._failing = True
            raise

    async def _beside_the_pool(self, work: Callable[[Conn], Awaitable[T]]) -> T:
        """``work`` on a connection of its own, closed after it (the pool is reconnecting at its own pace)."""
        async with self._own:
            conn = await psycopg.AsyncConnection.connect(self.config.conninfo, autocommit=True)
            try:
                await self._configure(conn)
                return await work(conn)
            finally:
                await conn.close()

    async def _transaction(self, steps: Callable[[Conn], Awaitable[T]]) -> T:
        """Run ``steps`` in one transaction: committed if it returns, rolled back if it raises."""

        async def work(conn: Conn) -> T:
            async with conn.transaction():
                return await steps(conn)

        return await self._run(work)

    async def _one(self, query: Any, params: Any = None) -> tuple[Any, ...] | None:
        """The first row of one statement, run on its own (autocommit)."""

        async def work(conn: Conn) -> tuple[Any, ...] | None:
            return await (await conn.execute(query, params)).fetchone()

        return await self._run(work)

    async def _rows(self, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
        async def work(conn: Conn) -> list[tuple[Any, ...]]:
            return await (await conn.execute(query, params)).fetchall()

        return await self._run(work)

    async def _count(self, query: Any, params: Any = None) -> int:
        """The rows one statement changed."""

        async def work(conn: Conn) -> int:
            return (await conn.execute(query, params)).rowcount

        return await self._run(work)

    async def _purge(self, conn: Conn, now: float) -> None:
        """Delete lapsed plans; every PURGE_EVERY seconds, whatever else lapsed too."""
        await conn.execute("DELETE FROM plans WHERE purge_at < %s", [now])
        if time.monotonic() - self._purged_at < PURGE_EVERY:
            return
        self._purged_at = time.monotonic()
        await conn.execute("DELETE FROM idempotency WHERE purge_at < %s AND state <> 'in_flight'", [now])
        await conn.execute("DELETE FROM nonces WHERE purge_at < %s", [now])
        await conn.execute("DELETE FROM approvals WHERE purge_at < %s", [now])
        await conn.execute("DELETE FROM writes WHERE at <= %s", [now - WRITE_WINDOWS["day"]])
        await conn.execute("DELETE FROM buckets WHERE purge_at < extract(epoch FROM clock_timestamp())")
