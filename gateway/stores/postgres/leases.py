"""The PostgreSQL store's lock steps (gateway.stores.leases.LeaseSteps, the loop around them): acquire, renew and
unlock as one statement each on the ``locks`` table, a row per target kept for good (its fence only grows), leases
on the database's own clock."""

from __future__ import annotations

from typing import Any

from gateway.stores.postgres.pool import Conn, PostgresPool

ACQUIRE = """
INSERT INTO locks AS l (target, token, fence, expires_at)
VALUES (%(target)s, '1:' || %(nonce)s, 1, clock_timestamp() + %(lease)s * interval '1 millisecond')
ON CONFLICT (target) DO UPDATE SET
    fence = CASE WHEN l.token = l.fence || ':' || %(nonce)s THEN l.fence ELSE l.fence + 1 END,
    token = CASE WHEN l.token = l.fence || ':' || %(nonce)s THEN l.token ELSE (l.fence + 1) || ':' || %(nonce)s END,
    expires_at = EXCLUDED.expires_at
WHERE l.expires_at <= clock_timestamp() OR l.token = l.fence || ':' || %(nonce)s
RETURNING token
"""

RENEW = """
UPDATE locks SET expires_at = clock_timestamp() + %(lease)s * interval '1 millisecond'
WHERE target = %(target)s AND token = %(token)s AND expires_at > clock_timestamp()
"""

UNLOCK = "UPDATE locks SET token = '', expires_at = '-infinity' WHERE target = %s AND token = %s"


class PostgresLeases:
    """The lock's atomic steps as statements (gateway.stores.leases.LeaseSteps).

    Taking and freeing a lock commit without waiting for the disk (``synchronous_commit`` off for that one
    transaction), which saves two fsyncs per write: the WAL is flushed in order, so the claim's own (durable)
    commit makes the lock that fenced it durable too; a server crash can lose only a lock nothing was claimed
    under (its holder's claim is then refused by the fence) or a release (the lock lapses with its lease). A
    renewal waits for the disk: losing one could shorten a lease under a write in flight."""

    def __init__(self, pool: PostgresPool) -> None:
        self._pool = pool

    async def acquire(self, target: str, nonce: str, lease_ms: int) -> str | None:
        params = {"target": target, "nonce": nonce, "lease": lease_ms}
        row = await self._pool._transaction(lambda conn: _undurable(conn, ACQUIRE, params))
        return str(row[0]) if row is not None else None

    async def renew(self, target: str, token: str, lease_ms: int) -> bool:
        return await self._pool._count(RENEW, {"target": target, "token": token, "lease": lease_ms}) == 1

    async def unlock(self, target: str, token: str) -> None:
        await self._pool._transaction(lambda conn: _undurable(conn, UNLOCK, [target, token]))


async def _undurable(conn: Conn, query: Any, params: Any) -> tuple[Any, ...] | None:
    """Run one statement in the caller's transaction, whose commit does not wait for the disk; its first row."""
    await conn.execute("SELECT set_config('synchronous_commit', 'off', true)")
    cursor = await conn.execute(query, params)
    return await cursor.fetchone() if cursor.description is not None else None
