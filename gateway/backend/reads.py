"""Reads of the legacy backend — targets, lists, lookups — translated into data or coded errors.

A list action is unbounded (the legacy ``list`` returns every tenant), so a list tool does not re-read it for
every page: a first page (no cursor) always reads the list afresh and keeps it, sorted, as a ``Listing``; the
pages that follow a cursor are cut from that listing while it is younger than ``LISTING_SECONDS``, and trigger
a new read after. Cursors stay keyset positions (the last id), so a page cut from a kept listing is exactly the
page a fresh read at that moment would give. Concurrent first pages share one read that started after each of
them arrived, so none of them sees a list older than its own request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import anyio

from gateway.backend import Backend, BackendUnavailable, unreachable
from gateway.config import Call, Lookup, Target
from gateway.config.expressions import MISSING, at_path
from gateway.errors import Code, ToolError
from gateway.records import Reply

log = logging.getLogger(__name__)

LISTING_SECONDS = 5.0
"""How long the pages after a first page may be cut from the list that the first page read."""
LISTING_MAX_ITEMS = 250_000
"""A longer list is not kept (its every page re-reads it): bounds the memory of one kept listing."""

SortKey = tuple[int, str | int]


@dataclass(frozen=True)
class Listing:
    """A list action's items as read at one moment, ordered by their sort key."""

    read_at: float
    generation: int
    keys: list[SortKey]
    items: list[tuple[str | int, Any]]


class _Slot:
    """One list tool's kept listing, and the lock that lets one read serve every request waiting for it."""

    def __init__(self) -> None:
        self.lock = anyio.Lock(fast_acquire=True)  # uncontended: no extra trip through the event loop
        self.started = 0
        self.listing: Listing | None = None
        self.failure: tuple[int, ToolError] | None = None


class TargetReader:
    """The backend's read actions, each answering with data or a ToolError."""

    def __init__(self, backend: Backend, name: str = "default") -> None:
        self.backend = backend
        self.name = name
        self._lookups: dict[str, dict[str, Any]] = {}
        self._listings: dict[str, _Slot] = {}

    async def get(self, target: Target, target_id: str) -> dict[str, Any]:
        """The target's current state; ``{noun}_not_found`` when the backend has none by that id."""
        call = target.get
        reply = await self._read(call, {"target_id": target_id})
        if reply.is_error and target.not_found_text in reply.text:
            raise ToolError(
                Code.TARGET_NOT_FOUND, f"No {target.noun} {target_id}. List them to see which exist.", noun=target.noun
            )
        state = _data(call, reply)
        if not isinstance(state, dict) or target.version_in(state) is MISSING:
            raise _malformed(call.action)
        return state

    async def find(self, target: Target, target_id: str) -> dict[str, Any] | None:
        """The target's current state, or None when it cannot be read for any reason."""
        try:
            return await self.get(target, target_id)
        except ToolError:
            return None

    async def items(self, call: Call) -> list[Any]:
        """Every item of an unbounded list action."""
        items = _data(call, await self._read(call, {}))
        if not isinstance(items, list):
            raise _malformed(call.action)
        return items

    async def listing(
        self, tool: str, call: Call, sort_key: str, *, fresh: bool, now: float, max_age: float = LISTING_SECONDS
    ) -> Listing:
        """A list tool's items, sorted. ``fresh``: read by a backend call that started after this request
        arrived. Otherwise the kept listing while it is younger than ``max_age`` seconds (by ``now``)."""
        slot = self._listings.setdefault(tool, _Slot())
        kept = slot.listing
        if not fresh and kept is not None and _young(kept, now, max_age):
            return kept
        arrived = slot.started
        async with slot.lock:
            kept = slot.listing
            if kept is not None and (kept.generation > arrived if fresh else _young(kept, now, max_age)):
                return kept
            if fresh and slot.failure is not None and slot.failure[0] > arrived:
                raise _copy(slot.failure[1])  # the read this request waited for failed: so does this request
            slot.started += 1
            try:
                listing = _sorted(call, sort_key, await self.items(call), slot.started, now)
            except ToolError as err:
                slot.failure = (slot.started, err)
                raise
            slot.failure = None
            slot.listing = listing if len(listing.items) <= LISTING_MAX_ITEMS else None
            return listing

    async def lookup(self, name: str, lookup: Lookup, *, fresh: bool = False) -> dict[str, Any]:
        """A lookup table: ``fresh`` reads it now (the numbers a plan states); otherwise the first read is kept
        (the names an input enum lists)."""
        if lookup.values is not None:
            return lookup.values
        if fresh or name not in self._lookups:
            assert lookup.call is not None
            call = lookup.call
            table = lookup.table_of(_data(call, await self._read(call, {})))
            if table is None:
                raise _malformed(call.action)
            self._lookups[name] = table
        return self._lookups[name]

    async def _read(self, call: Call, names: dict[str, Any]) -> Reply:
        try:
            return await self.backend.read(call.action, call.payload_for(names), call.timeout_seconds)
        except BackendUnavailable:
            raise unreachable(self.name) from None


def order(key: str | int) -> SortKey:
    """Numbers sort before strings, so a list mixing both still has one order."""
    return (0, key) if isinstance(key, int) else (1, key)


def _sorted(call: Call, sort_key: str, items: list[Any], generation: int, now: float) -> Listing:
    # Keys are computed once and the indices sorted by them (stable, like sorting the items by key): for
    # 100,000 items this takes ~100 ms where sorting the items with a key function took ~150-230 ms.
    get = _getter(sort_key)
    raw = [get(item) for item in items]
    if not all(isinstance(key, str | int) and not isinstance(key, bool) for key in raw):
        raise ToolError(
            "backend_error",
            f"The backend's {call.action} list has an item without a usable {sort_key}. Nothing was changed.",
        )
    keys = [order(key) for key in raw]
    ranked = sorted(range(len(keys)), key=keys.__getitem__)
    return Listing(
        read_at=now,
        generation=generation,
        keys=[keys[i] for i in ranked],
        items=[(raw[i], items[i]) for i in ranked],
    )


def _getter(path: str) -> Any:
    if path and "." not in path and not path.isdigit():  # one key of an object: skip the path walk
        return lambda item: item.get(path, MISSING) if isinstance(item, dict) else MISSING
    return lambda item: at_path(item, path)


def _young(listing: Listing, now: float, max_age: float) -> bool:
    return 0 <= now - listing.read_at < max_age


def _copy(err: ToolError) -> ToolError:
    return ToolError(err.code, err.message, noun=err.noun, next_tool=err.next_tool, details=err.details)


def _data(call: Call, reply: Reply) -> Any:
    """The data a read answered with; backend_error when it refused or answered something else than JSON."""
    if reply.is_error:
        log.warning("backend %s answered isError: %.200s", call.action, reply.text)
        raise ToolError(Code.BACKEND_ERROR, f"The backend refused the {call.action} request. Nothing was changed.")
    if reply.json() is None:
        raise _malformed(call.action)
    return call.data_of(reply)


def _malformed(action: str) -> ToolError:
    log.warning("backend %s returned data the gateway does not understand", action)
    return ToolError(Code.BACKEND_ERROR, f"The backend returned a malformed {action} result. Nothing was changed.")
