"""The PostgreSQL connection pool every role of the store shares, and the steps each operation runs as: one
transaction, or one statement on its own (autocommit), within ``timeout``; a server that fails raises
StoreUnavailable. Also the purge of what lapsed in every role's tables, run with a plan's put."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
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
            # and the pool replaces it instead of failing the call. One in steady use skips that round trip.
            if time.monotonic() - returned.pop(id(conn), 0.0) > CHECK_IDLE_SECONDS:
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
        self._opened = False
        self._opening = anyio.Lock()
        self._purged_at = 0.0

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Conn]:
        """A pooled connection for one operation, within ``timeout``; StoreUnavailable when the server fails."""
        try:
            with anyio.fail_after(self.config.timeout):
                if not self._opened:
                    async with self._opening:
                        if not self._opened:
                            await self._pool.open(wait=False)
                            self._opened = True
                async with self._pool.connection() as conn:
                    yield conn
        except UNREACHABLE as exc:
            log.warning("the PostgreSQL store cannot be reached: %s", type(exc).__name__)
            raise StoreUnavailable(f"the PostgreSQL store cannot be reached ({type(exc).__name__})") from exc

    async def _transaction(self, steps: Callable[[Conn], Awaitable[T]]) -> T:
        """Run ``steps`` in one transaction: committed if it returns, rolled back if it raises."""
        async with self._connection() as conn, conn.transaction():
            return await steps(conn)

    async def _one(self, query: Any, params: Any = None) -> tuple[Any, ...] | None:
        """The first row of one statement, run on its own (autocommit)."""
        async with self._connection() as conn:
            return await (await conn.execute(query, params)).fetchone()

    async def _rows(self, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
        async with self._connection() as conn:
            return await (await conn.execute(query, params)).fetchall()

    async def _count(self, query: Any, params: Any = None) -> int:
        """The rows one statement changed."""
        async with self._connection() as conn:
            return (await conn.execute(query, params)).rowcount

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
