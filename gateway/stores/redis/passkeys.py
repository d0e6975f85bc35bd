"""The Redis store's passkeys: ``passkey:<credential id>`` hashes (body, rev) and the ``passkeys`` index by
enrolment time, kept without expiry (a revoked one too). Storing one once and replacing one at the revision read
are scripts."""

from __future__ import annotations

import dataclasses
from typing import cast
from urllib.parse import quote

from gateway.records import Passkey
from gateway.stores import codec
from gateway.stores.redis.client import RedisClient
from gateway.stores.redis.page_state import REPLACE  # a hash's body replaced at the revision read

# KEYS: passkey, index. ARGV: body, rev, created_at. Returns 1 when stored, 0 when one was there.
PUT_PASSKEY = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'body', ARGV[1], 'rev', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
return 1
"""


class RedisPasskeys(RedisClient):
    """The Passkeys role (gateway.stores.base)."""

    async def put_passkey(self, passkey: Passkey) -> bool:
        args = [codec.dump(passkey), str(passkey.rev), repr(passkey.created_at)]
        keys = [self._passkey_key(passkey.credential_id), self._passkeys]
        return bool(await self._script(PUT_PASSKEY, keys, args))

    async def get_passkey(self, credential_id: str) -> Passkey | None:
        body = await self._call(self._redis.hget(self._passkey_key(credential_id), "body"))
        return codec.load(Passkey, cast(str, body)) if body is not None else None

    async def replace_passkey(self, passkey: Passkey) -> bool:
        changed = codec.dump(dataclasses.replace(passkey, rev=passkey.rev + 1))
        keys = [self._passkey_key(passkey.credential_id)]
        return bool(await self._script(REPLACE, keys, [str(passkey.rev), changed]))

    async def passkeys(self) -> list[Passkey]:
        names = await self._call(self._redis.zrevrange(self._passkeys, 0, -1))
        return [codec.load(Passkey, body) for body in await self._bodies(names)]

    def _passkey_key(self, credential_id: str) -> str:
        return self.prefix + "passkey:" + quote(credential_id, safe="")

    @property
    def _passkeys(self) -> str:
        return self.prefix + "passkeys"
