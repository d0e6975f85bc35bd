"""Structured logs: one JSON object per line on stderr (stdout may carry the protocol).

Every tool call logs one line from ``gateway.calls`` with its request id, caller (the client id, never a token),
tool, outcome and duration. Other records carry their logger, level and message. Every line logged while a
call runs, by the gateway, the SDK or the backend client, also carries that call's ``request_id`` (unique per
call, unlike the JSON-RPC id, which every terminal call sends as 2) and, when tracing is on, its ``trace_id``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from gateway.observability.tracing import trace_id

_bound: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("log_fields", default=())


@contextmanager
def bound(**fields: str) -> Iterator[None]:
    """Add fields to every line logged inside the block (and in tasks it starts)."""
    token = _bound.set((*_bound.get(), *fields.items()))
    try:
        yield
    finally:
        _bound.reset(token)


def context_fields() -> dict[str, str]:
    """The bound fields and the current trace id, for a log line."""
    fields = dict(_bound.get())  # a later binding of a name wins
    trace = trace_id()
    if trace is not None:
        fields["trace_id"] = trace
    return fields


def stack_of(exc_info: Any) -> list[str]:
    """Where an exception came from, innermost last, as ``file:line in function``: the traceback an operator needs
    to find an internal fault, without the exception's text or any value (those may carry payloads or secrets)."""
    frames = traceback.extract_tb(exc_info[2]) if exc_info and exc_info[2] is not None else []
    return [f"{frame.filename}:{frame.lineno} in {frame.name}" for frame in frames]


class JsonLines(logging.Formatter):
    """A record as one JSON line; an exception as its type and its stack of frames, never its text."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **context_fields(),
        }
        call = getattr(record, "call", None)
        if isinstance(call, dict):
            line.update(call)
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = record.exc_info[0].__name__
            line["stack"] = stack_of(record.exc_info)
        return json.dumps(line, default=str)


class PlainText(logging.Formatter):
    """``LEVEL logger message``, then the call's ids."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s %(message)s")

    def formatException(self, ei: Any) -> str:
        """The exception's type and frames, never its text (as in JSON lines)."""
        return "\n".join([f"{ei[0].__name__}, raised at:", *(f"  {frame}" for frame in stack_of(ei))])

    def format(self, record: logging.LogRecord) -> str:
        ids = " ".join(f"{key}={value}" for key, value in context_fields().items())
        return f"{super().format(record)} {ids}" if ids else super().format(record)


def configure(level: str, fmt: str) -> None:
    """Send every log record to stderr, as JSON lines or as plain text."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonLines())
    else:
        handler.setFormatter(PlainText())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The SDK and the HTTP server log every request at INFO; the gateway's own call line says more.
    for noisy in ("mcp", "uvicorn.access", "httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
