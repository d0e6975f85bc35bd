"""A kind of tool as one object: its config model, its ``check`` step and how a call of it is carried out.

    Kind       one kind, built once and shared by every call: ``model`` (its config model, which answers what is
               data about a tool: its face, default scopes and hints, whether it writes; gateway.config.kinds),
               ``warnings`` and ``check`` (what ``check`` says of a tool of this kind), ``opened`` (a writing call's
               audit entry, opened before admission) and ``call``
    Reads      a kind whose calls change nothing in the backend, so they open no audit entry
    Split      one config kind carried out by either of two kinds, as the config's ``writes`` answers
    ToolCall   one call of a published tool, routed to its kind: what the MCP surface's chain passes along and
               ``call`` gets
    narrowed   a config as its kind's model: the one test of a config's class in the gateway

The registry (gateway.tools.kinds.registry) finds a tool's kind by its config's ``kind``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import mcp_types as types
from mcp.server import ServerRequestContext

from gateway.catalog.published import PublishedTool
from gateway.config import ConfirmedTool, ToolKind
from gateway.runtime import Gateway
from gateway.tools.kinds.checking import Checking, Probe
from gateway.write.audited import Answer, AuditedCall

C = TypeVar("C", bound=ToolKind)
"""A kind's config model."""
E = TypeVar("E", bound=AuditedCall | None)
"""What a call of a kind opens before admission: the call as audited (a kind that writes), or None."""
M = TypeVar("M", bound=ToolKind)


def narrowed(config: ToolKind, model: type[M]) -> M:
    """``config`` as ``model``, the model its kind was found by; any other config here is a bug, not a refusal."""
    if not isinstance(config, model):
        raise TypeError(f"a {type(config).__name__} is not a {model.__name__}")
    return config


@dataclass(frozen=True)
class ToolCall(Generic[E]):
    """One call of a published tool as the MCP surface routed it, with the kind that carries it out."""

    gw: Gateway
    published: PublishedTool
    caller: str
    ctx: ServerRequestContext[Any, Any]
    params: types.CallToolRequestParams
    kind: Kind[Any, E]
    audited: E
    """The call as its one audit entry will record it, opened before admission so that a refusal by any step is
    audited too (gateway.mcp.chain): for a tool that writes, the entry its decision leaves; None otherwise."""

    @property
    def arguments(self) -> dict[str, Any]:
        """The call's arguments (none given: none)."""
        return self.params.arguments or {}


@dataclass(frozen=True)
class Explained:
    """What the approval rules would read of a call, for ``check --explain``: the tool's confirmation settings,
    the target as it reads now, the numbers a plan would state, and the arguments."""

    tool: ConfirmedTool
    state: dict[str, Any]
    summary: dict[str, Any]
    arguments: dict[str, Any]


class Kind(ABC, Generic[C, E]):
    """One kind of tool: its config model, what ``check`` does for a tool of it, and how a call of it is carried
    out. Each method that takes a ``config`` is given one of its own model (the registry found it by it)."""

    model: type[C]
    """Its config model (gateway.config): its table, and what is data about a tool of it."""
    checked_before_lookups: ClassVar[bool] = False
    """Its check step runs before the lookups are read (a read: an item it lists is what a target read tries)."""
    explains: ClassVar[bool] = False
    """``check --explain`` can say which approval rule a call of it would hit (``explained``)."""

    def of(self, config: ToolKind) -> Kind[C, E]:
        """The kind that carries out a tool of this config: this one (a registry entry, as a ``Split`` is)."""
        return self

    def kinds(self) -> tuple[Kind[Any, Any], ...]:
        """Every kind this registry entry may give: this one."""
        return (self,)

    def typed(self, config: ToolKind) -> C:
        """``config`` as this kind's model."""
        return narrowed(config, self.model)

    @abstractmethod
    def opened(self, gw: Gateway, published: PublishedTool, caller: str, ctx: ServerRequestContext[Any, Any]) -> E:
        """What a call opens before admission: the call as its audit entry will record it, or None."""

    def warnings(self, name: str, config: C) -> list[str]:
        """What ``check`` warns of in a tool's own table, before any backend is asked."""
        return []

    async def check(self, checking: Checking, name: str, config: C) -> None:
        """``check``'s step for a tool of this kind against its backend; nothing that writes is ever called."""

    async def explained(self, probe: Probe, name: str, config: C, target: str, pairs: dict[str, Any]) -> Explained:
        """What the approval rules would read of a call on ``target`` with ``pairs`` (a kind that ``explains``)."""
        raise NotImplementedError(f"check cannot explain a {self.model.__name__}")

    @abstractmethod
    async def call(self, request: ToolCall[E], arguments: dict[str, Any]) -> Answer:
        """Carry out the admitted call (gateway.mcp.chain ran authorization, rate limit, caps and schema): the
        answer's body, to check against the outputSchema, or an interim answer (a request for input, a task)."""


class Reads(Kind[C, None]):
    """A kind whose calls change nothing in the backend: a call opens no audit entry."""

    def opened(self, gw: Gateway, published: PublishedTool, caller: str, ctx: ServerRequestContext[Any, Any]) -> None:
        return None


class Entry(Protocol):
    """A registry entry: the kind that carries out a tool of one config kind."""

    def of(self, config: ToolKind) -> Kind[Any, Any]:
        """The kind for this tool."""
        ...

    def kinds(self) -> tuple[Kind[Any, Any], ...]:
        """Every kind ``of`` may give."""
        ...


@dataclass(frozen=True)
class Split:
    """One config kind carried out by either of two kinds, as its config's ``writes`` answers (a pass-through tool:
    relayed when it only reads, confirmed and keyed like a write when it writes)."""

    reads: Kind[Any, None]
    writes: Kind[Any, Any]

    def of(self, config: ToolKind) -> Kind[Any, Any]:
        """The kind for this tool, by whether it writes."""
        return self.writes if config.writes else self.reads

    def kinds(self) -> tuple[Kind[Any, Any], ...]:
        """Both kinds."""
        return (self.reads, self.writes)
