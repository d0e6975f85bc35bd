"""``mcp-safety-gateway approvals list | approve ID... | reject ID...``: the approval page's decisions from a terminal.

It talks to a running gateway's JSON side of the page (``/approvals/api``) with an approver token, never taken from
the command line (where ``ps`` would show it). Every value from the gateway is printed escaped (gateway/text.py),
so a backend's name cannot repaint the terminal.

A decision is a person's: ``approve`` and ``reject`` refuse a stdin that is not a terminal, ask for the token at the
terminal (an environment variable is readable by every program in the shell, an agent's included), show each
write's full facts and question, and ask once more. ``--unattended`` is the explicit way round for a script: it
takes the token from the environment variable and asks nothing (it still prints the facts). ``list`` only reads,
with the token from the environment.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from typing import Any

import httpx

from gateway.text import escaped, quoted, shown

TIMEOUT = 15.0


NOT_A_PERSON = (
    "mcp-safety-gateway approvals: {command} asks a person at a terminal, and stdin is not one; decide on the "
    "approval page, or run this at a terminal (a script that must decide says --unattended)"
)


def run(base_url: str, command: str, ids: list[str], token_env: str, as_json: bool, unattended: bool = False) -> int:
    """The subcommand: 0 when everything asked was done, 1 when a decision was refused or not confirmed, 2 when
    nothing could be."""
    asks = command != "list" and not unattended
    if asks and not sys.stdin.isatty():
        print(NOT_A_PERSON.format(command=command), file=sys.stderr)
        return 2
    token = _token_at_terminal() if asks else os.environ.get(token_env, "").strip()
    if not token:
        how = "type it at the prompt" if asks else f"export {token_env}=<token> (or name another with --token-env)"
        where = "at the prompt" if asks else f"in ${token_env}"
        print(f"mcp-safety-gateway approvals: no approver token {where}: {how}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=TIMEOUT) as http:
            if command == "list":
                return _list(http, as_json)
            return _decide(http, command, ids, as_json, asks)
    except httpx.HTTPError as exc:
        why = "nothing answers there" if isinstance(exc, httpx.ConnectError) else type(exc).__name__
        print(
            f"mcp-safety-gateway approvals: cannot reach a gateway at {escaped(base_url)} ({why}): is it running? "
            "check --url (its base URL)",
            file=sys.stderr,
        )
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
    rows = [("id", "state", "tool", "target", "arguments", "numbers", "caller", "expires", "question")]
    for approval in approvals:
        state = approval["state"] + (" (yours)" if approval["yours"] else "")
        rows.append(
            (
                approval["approvalId"],
                state,
                escaped(approval["tool"]),
                quoted(approval["target"]),
                _pairs(approval["arguments"]),
                _pairs(approval["summary"]),
                quoted(approval["caller"]),
                approval["expiresAt"],
                quoted(approval["question"]),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _decide(http: httpx.Client, command: str, ids: list[str], as_json: bool, asks: bool) -> int:
    verdict = {"approve": "approve", "reject": "reject"}[command]
    listed = http.get("/approvals/api/open")
    if not _ok(listed):
        return 2
    open_ones = {approval["approvalId"]: approval for approval in listed.json()["approvals"]}
    refused = False
    for approval_id in ids:
        facts = open_ones.get(approval_id)
        if facts is None:
            print(f"{escaped(approval_id)}: no such approval waiting")
            refused = True
            continue
        print(json.dumps(facts) if as_json else _facts(facts))
        if asks and not _confirmed(f"{verdict.capitalize()} this write? [y/N] "):
            print(f"{approval_id}: not {verdict}d")
            refused = True
            continue
        response = http.post(f"/approvals/api/{approval_id}", json={"decision": verdict})
        if response.status_code in (401, 403, 429):
            _ok(response)
            return 2
        body: dict[str, Any] = (
            response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        )
        if as_json:
            print(json.dumps({"approvalId": approval_id, "status": response.status_code, **body}))
        elif response.status_code == 404:
            print(f"{escaped(approval_id)}: no such approval")
        elif body.get("refused") == "unsigned":
            print(
                f"{approval_id}: refused (unsigned): it needs your passkey's signature; decide on its page,"
                f" {escaped(str(body.get('url')))}"
            )
        elif body.get("refused"):
            print(f"{approval_id}: refused ({body['refused']}); state {body.get('state')}")
        elif response.status_code != 200:
            print(f"{approval_id}: not {verdict}d; the gateway answered HTTP {response.status_code}")
        else:
            print(f"{approval_id}: {verdict}d; state {body.get('state')}")
        refused = refused or response.status_code != 200
    return 1 if refused else 0


def _facts(approval: dict[str, Any]) -> str:
    """Everything a decision binds, one fact a line, every value from outside escaped."""
    lines = [
        f"approval {escaped(approval['approvalId'])}",
        f"  tool       {escaped(approval['tool'])} on {quoted(approval['target'])}{_named(approval)}",
        f"  version    {shown(approval['version'])}",
        f"  arguments  {_pairs(approval['arguments'])}",
        f"  numbers    {_pairs(approval['summary'])}",
        f"  asked by   {quoted(approval['caller'])}",
        f"  needs      {approval['approversNeeded']} approver(s){', four eyes' if approval['fourEyes'] else ''}",
        f"  expires    {escaped(approval['expiresAt'])}",
        f"  question   {quoted(approval['question'])}",
    ]
    return "\n".join(lines)


def _named(approval: dict[str, Any]) -> str:
    name = approval.get("targetName")
    return f" named {quoted(name)}" if isinstance(name, str) else ""


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{escaped(name)}={shown(value)}" for name, value in values.items())


def _token_at_terminal() -> str:
    try:
        return getpass.getpass("Approver token: ").strip()
    except (EOFError, KeyboardInterrupt):
        return ""


def _confirmed(question: str) -> bool:
    try:
        return input(question).strip().lower() in ("y", "yes")
    except (EOFError, KeyboardInterrupt):
        return False


def _ok(response: httpx.Response) -> bool:
    if response.status_code == 401:
        print("mcp-safety-gateway approvals: the gateway did not accept that approver token", file=sys.stderr)
        return False
    if response.status_code == 404:
        base = escaped(str(response.url).removesuffix(response.url.path))
        print(
            f"mcp-safety-gateway approvals: no approval page at {escaped(str(response.url))}: check --url (the "
            f"gateway's base URL, without /mcp, like {base}), and that its config has [approvals]",
            file=sys.stderr,
        )
        return False
    if response.status_code == 429:
        wait = escaped(response.headers.get("retry-after", "a few"))
        print(
            f"mcp-safety-gateway approvals: too many approver-token attempts; retry in {wait} seconds", file=sys.stderr
        )
        return False
    if not response.is_success:
        print(f"mcp-safety-gateway approvals: the gateway answered HTTP {response.status_code}", file=sys.stderr)
        return False
    return True
