"""Structured logs: one JSON object per line on stderr (stdout may carry the protocol).

Every tool call logs one line from ``gateway.calls`` with its request id, caller (the client id, never a token),
tool, outcome and duration. Other records carry their logger, level and message.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any


class JsonLines(logging.Formatter):
    """A record as one JSON line; exceptions are reduced to their type, never their text or stack."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        call = getattr(record, "call", None)
        if isinstance(call, dict):
            line.update(call)
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = record.exc_info[0].__name__
        return json.dumps(line, default=str)


def configure(level: str, fmt: str) -> None:
    """Send every log record to stderr, as JSON lines or as plain text."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonLines())
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The SDK and the HTTP server log every request at INFO; the gateway's own call line says more.
    for noisy in ("mcp", "uvicorn.access", "httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
