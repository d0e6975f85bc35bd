"""A store wrapper that times every operation into the gateway's metrics, each in a trace span of its own.

It forwards whatever the store protocols declare (gateway.stores.base.OPERATIONS), so an operation added to a
role is timed without a line here, and the metric's ``operation`` label is one of those names (bounded). Passed
through untimed: what runs once per process (``serve_from``, ``recover_in_flight``, ``close``), the operator's
``trim_audit``, and what is not one awaited call (``lock``, ``audit_entries``).
"""

from __future__ import annotations

import functools
import inspect
import time
from typing import Any

from prometheus_client import Histogram

from gateway.observability.tracing import span
from gateway.stores.base import OPERATIONS, Store

UNTIMED = frozenset({"serve_from", "recover_in_flight", "trim_audit", "close"})


class TimedStore:
    """Delegates to ``inner``, observing each call's duration under its operation name."""

    def __init__(self, inner: Store, seconds: Histogram) -> None:
        self.inner = inner
        self._seconds = seconds

    def __getattr__(self, name: str) -> Any:
        if name not in OPERATIONS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        operation = getattr(self.inner, name)
        if name in UNTIMED or not inspect.iscoroutinefunction(operation):
            return operation
        seconds = self._seconds.labels(name)

        @functools.wraps(operation)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                with span(f"store {name}"):
                    return await operation(*args, **kwargs)
            finally:
                seconds.observe(time.perf_counter() - started)

        self.__dict__[name] = timed  # looked up once per operation: later calls find it as an attribute
        return timed
