"""The in-memory store's passkeys: approvers' WebAuthn credentials by credential id, kept until the process ends.
A replace stores a passkey only over the revision it was read at."""

from __future__ import annotations

from dataclasses import replace

from gateway.audit.chain import ChainKeys
from gateway.records import Passkey
from gateway.stores.memory.maps import MemoryMaps


class MemoryPasskeys(MemoryMaps):
    """The Passkeys role (gateway.stores.base)."""

    def __init__(self, keys: ChainKeys | None = None) -> None:
        super().__init__(keys)
        self._passkeys: dict[str, Passkey] = {}

    async def put_passkey(self, passkey: Passkey) -> bool:
        if passkey.credential_id in self._passkeys:
            return False
        self._passkeys[passkey.credential_id] = passkey
        return True

    async def get_passkey(self, credential_id: str) -> Passkey | None:
        return self._passkeys.get(credential_id)

    async def replace_passkey(self, passkey: Passkey) -> bool:
        stored = self._passkeys.get(passkey.credential_id)
        if stored is None or stored.rev != passkey.rev:
            return False
        self._passkeys[passkey.credential_id] = replace(passkey, rev=passkey.rev + 1)
        return True

    async def passkeys(self) -> list[Passkey]:
        return sorted(self._passkeys.values(), key=lambda passkey: passkey.created_at, reverse=True)
