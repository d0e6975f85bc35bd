"""The PostgreSQL store's audit: the ``audit`` table (the sealed entry, and plain columns beside it for queries) and
``audit_tail``, one row every append and trim locks, so the chain has one tail at a time. ``append_in`` is the append
inside another step's transaction (a settle's: gateway.stores.postgres.keys)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from gateway.audit.chain import ChainKeys, checkpoint, sealed
from gateway.records import AuditEntry
from gateway.stores import codec
from gateway.stores.postgres.pool import Conn, PostgresPool

AUDIT_PAGE = 1000
INSERT_AUDIT = (
    "INSERT INTO audit (seq, at, caller, tool, outcome, code, target, plan_id, idempotency_key, entry)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


class PostgresAudit(PostgresPool):
    """The AuditLog role (gateway.stores.base)."""

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        return await self._transaction(lambda conn: append_in(conn, entry, self._keys))

    async def trim_audit(self, before: float, now: float) -> AuditEntry | None:
        async def steps(conn: Conn) -> AuditEntry | None:
            await conn.execute("SELECT one FROM audit_tail FOR UPDATE")
            # The oldest entries up to the first one at or after ``before``: a prefix, so the rest stays one chain.
            row = await (
                await conn.execute(
                    "SELECT coalesce((SELECT min(seq) FROM audit WHERE at >= %s), (SELECT max(seq) + 1 FROM audit))",
                    [before],
                )
            ).fetchone()
            cut = row[0] if row is not None else None
            last = await (
                await conn.execute("SELECT entry FROM audit WHERE seq < %s ORDER BY seq DESC LIMIT 1", [cut])
            ).fetchone()
            if cut is None or last is None:
                return None
            tail = await _tail(conn)  # the checkpoint chains after the newest entry, even when every entry goes
            count = (await conn.execute("DELETE FROM audit WHERE seq < %s", [cut])).rowcount
            stored = sealed(checkpoint(codec.load(AuditEntry, last[0]), count, before, now), tail, self._keys)
            await conn.execute(INSERT_AUDIT, _audit_row(stored))
            return stored

        return await self._transaction(steps)

    async def audit_entries(self) -> AsyncIterator[AuditEntry]:
        after = -1
        while True:
            page = await self._rows(
                "SELECT seq, entry FROM audit WHERE seq > %s ORDER BY seq LIMIT %s", [after, AUDIT_PAGE]
            )
            for seq, body in page:
                after = seq
                yield codec.load(AuditEntry, body)
            if len(page) < AUDIT_PAGE:
                return


async def append_in(conn: Conn, entry: AuditEntry, keys: ChainKeys) -> AuditEntry:
    """Seal ``entry`` after the chain's tail and insert it, inside the caller's transaction."""
    await conn.execute("SELECT one FROM audit_tail FOR UPDATE")
    stored = sealed(entry, await _tail(conn), keys)
    await conn.execute(INSERT_AUDIT, _audit_row(stored))
    return stored


async def _tail(conn: Conn) -> AuditEntry | None:
    row = await (await conn.execute("SELECT entry FROM audit ORDER BY seq DESC LIMIT 1")).fetchone()
    return codec.load(AuditEntry, row[0]) if row is not None else None


def _audit_row(entry: AuditEntry) -> list[Any]:
    """The audit table's columns for a sealed entry: the plain ones for queries, then the entry itself."""
    return [
        entry.seq,
        entry.at,
        entry.caller,
        entry.tool,
        entry.outcome,
        entry.code,
        entry.target,
        entry.plan_id,
        entry.idempotency_key,
        codec.dump(entry),
    ]
