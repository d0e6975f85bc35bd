"""The PostgreSQL store's counters: ``buckets`` (rate limits refilled on the database's clock, one statement per
take; UNLOGGED, so a server crash leaves them full) and ``writes`` (one row per counted write with the rows it
touched, purged after a day)."""

from __future__ import annotations

from gateway.records import WRITE_WINDOWS
from gateway.stores.postgres.pool import Conn, PostgresPool

REFILLED = "least(%(burst)s, b.tokens + greatest(0, EXCLUDED.updated - b.updated) * %(rate)s)"
TAKE_TOKEN = f"""
WITH t AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS now)
INSERT INTO buckets AS b (name, tokens, updated, wait, purge_at)
SELECT %(name)s, %(burst)s - 1, t.now, 0, t.now + %(full)s FROM t
ON CONFLICT (name) DO UPDATE SET
    tokens = CASE WHEN {REFILLED} >= 1 THEN {REFILLED} - 1 ELSE {REFILLED} END,
    wait = CASE WHEN {REFILLED} >= 1 THEN 0 ELSE (1 - {REFILLED}) / %(rate)s END,
    updated = EXCLUDED.updated,
    purge_at = EXCLUDED.purge_at
RETURNING wait
"""


class PostgresCounters(PostgresPool):
    """The Counters role (gateway.stores.base)."""

    async def take_token(self, bucket: str, per_second: float, burst: int, now: float) -> float:
        # On the database's clock (``now`` is this process's): every replica refills the bucket alike.
        full = burst / per_second + 1
        row = await self._one(TAKE_TOKEN, {"name": bucket, "rate": per_second, "burst": float(burst), "full": full})
        return float(row[0]) if row is not None else 0.0

    async def count_write(self, scopes: list[str], now: float, rows: int = 0) -> None:
        async def steps(conn: Conn) -> None:
            await conn.execute(
                "DELETE FROM writes WHERE scope = ANY(%s) AND at <= %s", [scopes, now - WRITE_WINDOWS["day"]]
            )
            await conn.execute(
                "INSERT INTO writes (scope, at, rows) SELECT unnest(%s::text[]), %s, %s", [scopes, now, rows]
            )

        await self._transaction(steps)

    async def recent_writes(self, scopes: list[str], now: float, rows: bool = False) -> dict[str, dict[str, int]]:
        measure = (
            "coalesce(sum(rows) FILTER (WHERE at > %(now)s - {}), 0)"
            if rows
            else "count(*) FILTER (WHERE at > %(now)s - {})"
        )
        windows = ", ".join(measure.format(repr(seconds)) for seconds in WRITE_WINDOWS.values())
        found_rows = await self._rows(
            f"SELECT scope, {windows} FROM writes WHERE scope = ANY(%(scopes)s) AND at <= %(now)s"
            f" AND at > %(now)s - {max(WRITE_WINDOWS.values())!r} GROUP BY scope",
            {"scopes": scopes, "now": now},
        )
        counts = {scope: dict.fromkeys(WRITE_WINDOWS, 0) for scope in scopes}
        for scope, *found in found_rows:
            counts[scope] = {window: int(count) for window, count in zip(WRITE_WINDOWS, found, strict=True)}
        return counts
