"""The PostgreSQL store's passkeys: the ``passkeys`` table (migration 0004), one row per credential id, kept when
revoked. Storing one once and replacing one at the revision read are each one statement."""

from __future__ import annotations

from dataclasses import replace

from gateway.records import Passkey
from gateway.stores import codec
from gateway.stores.postgres.pool import PostgresPool


class PostgresPasskeys(PostgresPool):
    """The Passkeys role (gateway.stores.base)."""

    async def put_passkey(self, passkey: Passkey) -> bool:
        inserted = await self._count(
            "INSERT INTO passkeys (credential_id, body, rev, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (credential_id) DO NOTHING",
            [passkey.credential_id, codec.dump(passkey), passkey.rev, passkey.created_at],
        )
        return inserted == 1

    async def get_passkey(self, credential_id: str) -> Passkey | None:
        row = await self._one("SELECT body FROM passkeys WHERE credential_id = %s", [credential_id])
        return codec.load(Passkey, row[0]) if row is not None else None

    async def replace_passkey(self, passkey: Passkey) -> bool:
        changed = replace(passkey, rev=passkey.rev + 1)
        replaced = await self._count(
            "UPDATE passkeys SET body = %s, rev = %s WHERE credential_id = %s AND rev = %s",
            [codec.dump(changed), changed.rev, passkey.credential_id, passkey.rev],
        )
        return replaced == 1

    async def passkeys(self) -> list[Passkey]:
        rows = await self._rows("SELECT body FROM passkeys ORDER BY created_at DESC, credential_id")
        return [codec.load(Passkey, body) for (body,) in rows]
