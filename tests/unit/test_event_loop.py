"""``serve`` runs on uvloop's event loop where uvloop is installed (a dependency, but on Windows), and on asyncio's
own where it is not (gateway/cli/serve.py ``run_serving``)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest
import uvloop

from gateway.cli.serve import run_serving


def _loops_seen() -> tuple[list[tuple[asyncio.AbstractEventLoop, str]], Callable[[str], Awaitable[None]]]:
    seen: list[tuple[asyncio.AbstractEventLoop, str]] = []

    async def serving(argument: str) -> None:
        seen.append((asyncio.get_running_loop(), argument))

    return seen, serving


def test_serve_runs_on_uvloop() -> None:
    seen, serving = _loops_seen()
    run_serving(serving, "config")
    [(loop, argument)] = seen
    assert isinstance(loop, uvloop.Loop) and argument == "config"


def test_without_uvloop_serve_runs_on_asyncios_own_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # ``import uvloop`` raises ImportError
    seen, serving = _loops_seen()
    run_serving(serving, "config")
    [(loop, argument)] = seen
    assert isinstance(loop, asyncio.BaseEventLoop) and not isinstance(loop, uvloop.Loop) and argument == "config"
