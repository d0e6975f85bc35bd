"""A backend's own tool's answer as its published tool admits it (a pass-through tool, read-only or writing).

The backend's own output schema may bound nothing, so an answer counts only when it is a JSON object within the
``[limits]`` caps a caller's arguments are held to and fits the output schema the gateway publishes for the tool
(a tool that writes publishes ``replayed`` beside the backend's fields). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from gateway.catalog.published import PublishedTool, beyond_limits
from gateway.config import Limits
from gateway.records import Reply


def answer_of(published: PublishedTool, reply: Reply | None, limits: Limits) -> dict[str, Any] | None:
    """A successful answer as the published output schema describes it (without ``replayed``) and within the
    ``[limits]`` caps, or None (no answer, an error, or one that does not fit)."""
    if reply is None or reply.is_error:
        return None
    body = reply.json()
    if not isinstance(body, dict) or beyond_limits(body, limits) is not None:
        return None
    checked = {**body, "replayed": False} if published.config.writes else body
    try:
        published.validate_output(checked)
    except ValueError:
        return None
    return body
