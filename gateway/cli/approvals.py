"""``mcp-safety-gateway approvals list | approve ID... | reject ID...``: the approval page's decisions from a terminal.

It talks to a running gateway's JSON side of the page (``/approvals/api``) with an approver token read from an
environment variable (never from the command line, where ``ps`` would show it). Every value from the gateway is
printed escaped (gateway/text.py), so a backend's name cannot repaint the terminal.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx

from gateway.text import escaped, quoted

TIMEOUT = 15.0


def run(base_url: str, command: str, ids: list[str], token_env: str, as_json: bool) -> int:
    """The subcommand: 0 when everything asked was done, 1 when a decision was refused, 2 when nothing could be."""
    token = os.environ.get(token_env, "").strip()
    if not token:
        print(f"mcp-safety-gateway approvals: set {token_env} to your approver token", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=TIMEOUT) as http:
            if command == "list":
                return _list(http, as_json)
            return _decide(http, command, ids, as_json)
    except httpx.HTTPError as exc:
        print(f"mcp-safety-gateway approvals: cannot reach {base_url} ({type(exc).__name__})", file=sys.stderr)
        return 2


def _list(http: httpx.Client, as_json: bool) -> int:
    response = http.get("/approvals/api/open")
    if not _ok(response):
        return 2
    approvals = response.json()["approvals"]
    if as_json:
        for approval in approvals:
            print(json.dumps(approval))
        return 0
    if not approvals:
        print("nothing is waiting for approval")
        return 0
    rows = [("id", "state", "tool", "target", "numbers", "caller", "expires")]
    for approval in approvals:
        numbers = ", ".join(f"{name}={escaped(str(value))}" for name, value in approval["summary"].items())
        state = approval["state"] + (" (yours)" if approval["yours"] else "")
        rows.append(
            (
                approval["approvalId"],
                state,
                escaped(approval["tool"]),
                quoted(approval["target"]),
                numbers,
                quoted(approval["caller"]),
                approval["expiresAt"],
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _decide(http: httpx.Client, command: str, ids: list[str], as_json: bool) -> int:
    verdict = {"approve": "approve", "reject": "reject"}[command]
    refused = False
    for approval_id in ids:
        response = http.post(f"/approvals/api/{approval_id}", json={"decision": verdict})
        if response.status_code in (401, 403):
            _ok(response)
            return 2
        body: dict[str, Any] = (
            response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        )
        if as_json:
            print(json.dumps({"approvalId": approval_id, "status": response.status_code, **body}))
        elif response.status_code == 404:
            print(f"{escaped(approval_id)}: no such approval")
        elif body.get("refused"):
            print(f"{approval_id}: refused ({body['refused']}); state {body.get('state')}")
        else:
            print(f"{approval_id}: {verdict}d; state {body.get('state')}")
        refused = refused or response.status_code != 200
    return 1 if refused else 0


def _ok(response: httpx.Response) -> bool:
    if response.status_code == 401:
        print("mcp-safety-gateway approvals: the gateway did not accept that approver token", file=sys.stderr)
        return False
    if response.status_code == 404:
        print("mcp-safety-gateway approvals: this gateway serves no approval page (no [approvals])", file=sys.stderr)
        return False
    if not response.is_success:
        print(f"mcp-safety-gateway approvals: the gateway answered HTTP {response.status_code}", file=sys.stderr)
        return False
    return True
