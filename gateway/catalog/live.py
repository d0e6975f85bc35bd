"""The catalog as the backends allow it now: one part per backend, each loaded, watched and reloaded on its own.

A part is what the published tools need from one backend: that it answers (a ping), its ``tools/list`` when a
pass-through tool relays one of its tools, the lookups read from it (input enums), and, where the operator lets the
gateway ask (``probe_actions``), the god-tool actions it states it has (a planned write whose action is not among
them is not published, nor its preview). Each part moves on its own:

    new     never loaded: ``serve`` waits for its first load before it answers anyone (``settle``); a call of
            its tools waits for that load, a listing for at most LIST_WAIT seconds after it began (clients list
            before they call, so a listing never waits out a backend that hangs)
    up      loaded, and the last ping answered: its tools are published
    stale   a ping just went unanswered: a reload is started at once, and whoever needs the part waits for it
    down    its last load failed (connect, ping, tools/list or a lookup, each bounded by the backend's own
            timeouts): its tools are left out of tools/list and answer backend_unavailable naming the backend,
            at once; a caller starts another load only when none is running and the last one ended more than
            ``probe_interval_seconds`` ago

``watch`` runs one loop per part (while the gateway runs): it pings an ``up`` part every
``probe_interval_seconds`` and reloads any other, so a backend that dies mid-run leaves tools/list within a ping
and one that comes back returns without a restart. Loads run in the gateway's own task group, never in the
request that asked for one, so a waiter that gives up (a bounded ``/readyz``) cancels nothing. There is no lock
over every backend: a part that hangs stalls nobody but the callers of its own tools, and them no longer than
its timeouts. Whenever the set of published tools changes, ``changed`` is called (the gateway sends
``notifications/tools/list_changed`` to the sessions that listen).

The tools themselves are built from every part's last good data by ``build_catalog`` (gateway.catalog.published),
again after each load; a tool is published while every part it needs is up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

import anyio
import mcp_types as types
from anyio.abc import TaskGroup

from gateway.backend import Backend, BackendUnavailable, OutcomeLost, actions, unreachable
from gateway.backend.reads import TargetReader
from gateway.catalog.published import Catalog, PublishedTool, build_catalog, needs
from gateway.config import GatewayConfig
from gateway.errors import ToolError

log = logging.getLogger(__name__)

State = Literal["new", "up", "stale", "down"]

LIST_WAIT = 3.0
"""How long after a part's load began a listing still waits for it (a stdio child takes a moment to start); a
test that waits it out passes a shorter one (open_gateway's ``list_wait``)."""


class Part:
    """What the published tools need from one backend, and whether they have it now."""

    def __init__(
        self,
        name: str,
        config: GatewayConfig,
        backend: Backend,
        reader: TargetReader,
        loaded: Callable[[], None],
        list_wait: float = LIST_WAIT,
    ) -> None:
        self.name = name
        self.list_wait = list_wait
        self.backend = backend
        self.reader = reader
        self.interval = config.backend_sections()[name].probe_interval_seconds
        self.lookups = {key: lookup for key, lookup in config.lookups.items() if config.lookup_backend(key) == name}
        self.lists = any(
            tool.relays and config.backend_of(tool_name) == name for tool_name, tool in config.tools.items()
        )
        self.state: State = "new"
        self.listing: list[types.Tool] = []
        self.tables: dict[str, dict[str, Any]] = {}
        self.probes_actions = config.backend_sections()[name].probe_actions and any(
            tool.writes and not tool.relays and config.backend_of(tool_name) == name
            for tool_name, tool in config.tools.items()
        )
        self.actions: list[str] | None = None
        """The god-tool actions this backend states are all it has (``probe_actions``), when it states them."""
        self._loaded = loaded
        self._running: anyio.Event | None = None
        self._started_at = self._ended_at = -float("inf")

    @property
    def up(self) -> bool:
        """Whether its tools are published now."""
        return self.state == "up"

    async def ready(self, tasks: TaskGroup, wait: float | None = None, *, now: bool = False) -> bool:
        """Whether the part is up, after waiting (at most ``wait`` seconds) for a load when one is due; ``now``
        (readiness) waits for a running load, or starts one, even while the part is down."""
        if self.state == "up":
            return True
        recent = self._running is not None or anyio.current_time() - self._ended_at < self.interval
        if self.state == "down" and recent and not now:
            return False  # a load is running, or one failed a moment ago: answer at once
        done = self.load(tasks)
        with anyio.move_on_after(wait):
            await done.wait()
        return self.up  # as the load left it

    async def listable(self, tasks: TaskGroup) -> None:
        """Give a part being loaded (new, or stale after a failed ping) until ``list_wait`` (LIST_WAIT) seconds
        after its load started to come up before a listing goes on without it; a part that is down is not waited
        for."""
        if self.state in ("up", "down"):
            return
        done = self.load(tasks)
        with anyio.move_on_after(self.list_wait - (anyio.current_time() - self._started_at)):
            await done.wait()

    def load(self, tasks: TaskGroup) -> anyio.Event:
        """Start a load unless one is running; the event is set when it ends."""
        if self._running is None:
            self._running = anyio.Event()
            self._started_at = anyio.current_time()
            tasks.start_soon(self._load, self._running)
        return self._running

    def lost(self) -> None:
        """A ping went unanswered: the part needs a reload before its tools are published again."""
        if self.state == "up":
            self.state = "stale"
            self._loaded()

    async def watch(self, tasks: TaskGroup) -> None:
        """Ping the part while it is up, reload it otherwise; forever."""
        while True:
            if self.state == "up" and not await self.backend.probe():
                log.warning("backend %s stopped answering; its tools are left out until it is back", self.name)
                self.lost()
            if self.state != "up":
                await self.load(tasks).wait()
            await anyio.sleep(self.interval)

    async def _load(self, done: anyio.Event) -> None:
        try:
            self.state = "up" if await self._read() else "down"
        except Exception as exc:  # a load that fails for any reason leaves the part down, never the gateway
            log.warning("backend %s could not be loaded: %s", self.name, type(exc).__name__)
            self.state = "down"
        finally:
            self._running = None
            self._ended_at = anyio.current_time()
            self._loaded()
            done.set()

    async def _read(self) -> bool:
        """Ping, then read the listing and the lookups the tools need; each step is bounded by the backend's own
        connect, list and call timeouts."""
        if not await self.backend.probe():
            return False
        try:
            listing = await self.backend.list_tools() if self.lists else []
            tables = {key: await self.reader.lookup(key, lookup, fresh=True) for key, lookup in self.lookups.items()}
            stated = await self._stated_actions() if self.probes_actions else None
        except (BackendUnavailable, ToolError) as exc:
            log.warning("backend %s: its tools cannot be built: %s", self.name, type(exc).__name__)
            return False
        self.listing, self.tables, self.actions = listing, tables, stated
        return True

    async def _stated_actions(self) -> list[str] | None:
        """The actions the god-tool's refusal of one that cannot exist lists (gateway.backend.actions)."""
        try:
            reply = await self.backend.read(actions.IMPOSSIBLE, {})
        except OutcomeLost:
            return None
        return actions.listed_in(reply.text) if reply.is_error else None


class LiveCatalog:
    """Every backend's part, and the tools built from them."""

    def __init__(
        self,
        config: GatewayConfig,
        backends: Mapping[str, Backend],
        readers: Mapping[str, TargetReader],
        changed: Callable[[], None] = lambda: None,
        list_wait: float = LIST_WAIT,
    ) -> None:
        self.config = config
        self.parts = {
            name: Part(name, config, backends[name], readers[name], self._rebuild, list_wait) for name in backends
        }
        self.built = Catalog({})
        self._changed = changed
        self._published: frozenset[str] = frozenset()
        self._tasks: TaskGroup | None = None
        self._uses = {name: self._parts_of(name) for name in config.tools}

    def start(self, tasks: TaskGroup) -> None:
        """Load and watch every part in ``tasks`` (the gateway's background) until it is cancelled."""
        self._tasks = tasks
        for part in self.parts.values():
            tasks.start_soon(part.watch, tasks)

    async def tools(self) -> dict[str, PublishedTool]:
        """The tools published now. A part still being loaded (at start, or after a failed ping) is waited for
        until LIST_WAIT seconds after its load began, and no longer: a client lists the tools before it calls one,
        so a listing that waited for a hung backend would stall every tool."""
        async with anyio.create_task_group() as group:
            for part in self.parts.values():
                group.start_soon(part.listable, self._group())
        return self.published()

    async def settle(self, wait: float) -> None:
        """Wait (at most ``wait`` seconds) until every part's first load has ended, up or down: ``serve`` does so
        before it answers anyone, so that a first listing holds the tools of a backend that is slow to start."""
        with anyio.move_on_after(wait):
            for part in self.parts.values():
                if part.state == "new":
                    await part.load(self._group()).wait()

    def published(self) -> dict[str, PublishedTool]:
        """The tools published now, without waiting for anything."""
        return {name: tool for name, tool in self.built.tools.items() if all(p.up for p in self._uses[name])}

    async def tool(self, name: str) -> PublishedTool:
        """One configured tool as it is published now, or the ToolError that says why not: its backend (named) is
        down, or it does not fit what its backend offers."""
        for part in self._uses[name]:
            if not await part.ready(self._group()):
                raise unreachable(part.name)
        found = self.built.tools.get(name)
        if found is None:
            raise self.built.unavailable[name]
        return found

    async def ready(self, name: str, wait: float) -> bool:
        """Whether a backend is up now (``/readyz``): a ping if it is up, else a load, waiting at most ``wait``."""
        part = self.parts[name]
        if part.up and not await part.backend.probe():
            part.lost()
        return await part.ready(self._group(), wait, now=True)

    def _group(self) -> TaskGroup:
        if self._tasks is None:
            raise RuntimeError("the live catalog is not started")
        return self._tasks

    def _parts_of(self, name: str) -> list[Part]:
        """The parts a tool needs: its backend's, and those its input enums' lookups are read from."""
        backends = {self.config.backend_of(name)}
        for need in needs(self.config, name):
            kind, _, key = need.partition(".")
            if kind == "lookups":
                backends.add(self.config.lookup_backend(key))
        return [self.parts[backend] for backend in sorted(backends)]

    def _rebuild(self) -> None:
        """Build every tool from the parts' last good data; tell ``changed`` when the published set moved."""
        listings = {name: part.listing for name, part in self.parts.items() if part.up}
        tables = {key: table for part in self.parts.values() if part.up for key, table in part.tables.items()}
        failures = {f"backends.{name}": unreachable(name) for name, part in self.parts.items() if not part.up}
        failures |= {
            f"lookups.{key}": unreachable(name)
            for name, part in self.parts.items()
            if not part.up
            for key in part.lookups
        }
        stated = {name: part.actions for name, part in self.parts.items() if part.up and part.actions is not None}
        self.built = build_catalog(self.config, tables, listings, failures, stated)
        published = frozenset(self.published())
        if published != self._published:
            self._published = published
            self._changed()
