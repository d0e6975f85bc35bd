"""``mcp-safety-gateway audit list [--plan ID] | verify [--head SEQ:HASH] | head | trim --before TIME``.

``verify`` checks the keyed chain and, for every write that waited for people, that its events (proposed,
approval, the backend call, returned) share one facts digest and come in order (gateway.audit.events).

They open the configured store with the audit key ring (gateway/identity/secrets.py), never take it for serving, and
print for an operator's terminal (every table cell escaped by gateway.text). ``trim`` is the only one that
writes: one atomic step of the store that deletes the oldest entries and appends the checkpoint that keeps the
rest verifiable (gateway.audit.chain).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime

from gateway.audit import chain, display, events
from gateway.config import GatewayConfig
from gateway.identity.secrets import load_audit_keys
from gateway.records import AuditEntry
from gateway.stores import open_store
from gateway.text import printable

PROGRAM = "mcp-safety-gateway audit"


async def run(config: GatewayConfig, args: argparse.Namespace) -> int:
    """Run one audit subcommand; the exit code."""
    if config.gateway.store == "memory":
        print(f"{PROGRAM}: the memory store keeps no audit beyond its process", file=sys.stderr)
        return 2
    times = {"since": getattr(args, "since", None), "before": getattr(args, "before", None)}
    try:
        parsed = {name: _timestamp(text) for name, text in times.items() if text}
    except ValueError as exc:
        print(f"{PROGRAM}: {exc}", file=sys.stderr)
        return 2
    keys = chain.ChainKeys(load_audit_keys(config.gateway.state_path()))
    store = open_store(config.gateway.store, keys)
    try:
        if args.audit_command == "trim":
            stored = await store.trim_audit(parsed["before"], time.time())
            count = stored.extra["trimmed_entries"] if stored is not None else 0
            print(f"trimmed {count} entries" + (f"; checkpoint {stored.seq}" if stored is not None else ""))
            return 0
        entries = [entry async for entry in store.audit_entries()]
    finally:
        await store.close()
    if args.audit_command == "head":
        print(chain.head(entries) or "(empty)")
        return 0
    if args.audit_command == "verify":
        return _verify(entries, keys, args.head, args.unkeyed_through)
    shown = [
        entry
        for entry in entries
        if display.matches(entry, target=args.tenant, caller=args.caller, since=parsed.get("since"), plan=args.plan)
    ]
    if args.json:
        for entry in shown:
            print(json.dumps(display.entry_json(entry)))
    else:
        print(display.table(shown))
    return 0


def _verify(entries: list[AuditEntry], keys: chain.ChainKeys, head: str | None, unkeyed_through: int) -> int:
    verdict = chain.verify(entries, keys, head=head)
    verdict.problems.extend(events.problems(entries))
    unkeyed = [entry.seq for entry in entries if not entry.key_id]
    if unkeyed and unkeyed[-1] > unkeyed_through:
        verdict.problems.append(
            f"entries {unkeyed[0]}..{unkeyed[-1]} are unkeyed (plain SHA-256, which anyone who can write the store "
            "can recompute); if they were sealed before an upgrade keyed the chain, accept them with "
            f"--unkeyed-through {unkeyed[-1]}, or trim them (audit trim)"
        )
    for problem in verdict.problems:
        print(f"FAIL  {problem}")
    if verdict.problems:
        return 1
    if unkeyed:
        print(f"note  entries {unkeyed[0]}..{unkeyed[-1]} were sealed before the chain was keyed (accepted)")
    against = f", holds head {printable(head)}" if head is not None else ""
    print(f"ok    {len(entries)} entries, chain intact{against}, head {chain.head(entries) or '(empty)'}")
    return 0


def _timestamp(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f"{text!r} is not a time like 2026-12-02T18:00:00Z") from None
