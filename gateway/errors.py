"""Tool-level errors with stable codes, and their wire form.

Every refusal the gateway makes is a `ToolError`. It becomes an `isError` result whose first text block is
JSON `{"code", "message", "nextTool"?, "details"?}` and which carries no `structuredContent` (some clients
validate `structuredContent` even on error results). Tests match `code`; the message is for the model.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types

CODES = frozenset(
    {
        "invalid_arguments",
        "request_too_large",
        "invalid_cursor",
        "forbidden",
        "rate_limited",
        "tenant_not_found",
        "tenant_protected",
        "plan_not_found",
        "plan_expired",
        "plan_stale",
        "confirmation_unavailable",
        "not_confirmed",
        "idempotency_key_reused",
        "request_in_progress",
        "outcome_unknown",
        "backend_unavailable",
        "backend_error",
    }
)


class ToolError(Exception):
    """A refusal with a stable code, a message naming the next step, and optional details."""

    def __init__(
        self, code: str, message: str, *, next_tool: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        if code not in CODES:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.next_tool = next_tool
        self.details = details

    def __repr__(self) -> str:
        return f"ToolError(code={self.code!r}, message={self.message!r})"

    def body(self) -> dict[str, Any]:
        """The JSON object sent to the client."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.next_tool is not None:
            body["nextTool"] = self.next_tool
        if self.details is not None:
            body["details"] = self.details
        return body

    def to_result(self) -> types.CallToolResult:
        """The `isError` result, without `structuredContent`."""
        text = json.dumps(self.body(), separators=(",", ":"))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def success_result(body: dict[str, Any]) -> types.CallToolResult:
    """A success carries `structuredContent` and the same JSON as text."""
    text = json.dumps(body, separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=body)
