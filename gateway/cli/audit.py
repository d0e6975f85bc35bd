"""``mcp-safety-gateway audit list [--plan ID] | verify [--head SEQ:HASH | --bundle FILE] | export --plan ID | head |
trim --before TIME``.

``verify`` checks the keyed chain and, for every write that waited for people, that its events (proposed,
approval, the backend call, returned) share one facts digest and come in order (gateway.audit.events); that every
passkey approval's signature holds over the facts in its entries, and that no write ran on a yes no signature
backs where passkeys are required (gateway.approvals.evidence); and that the store keeps no approval for such a
tool with an unsigned yes (a row written around the page). ``export --plan`` prints one plan's evidence bundle;
``verify --bundle`` checks one offline, with neither config nor store.

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
from pathlib import Path

from gateway.approvals import evidence, passkeys
from gateway.audit import chain, display, events
from gateway.config import GatewayConfig
from gateway.identity.person import readable_person
from gateway.identity.secrets import load_audit_keys
from gateway.records import TOMBSTONE_SECONDS, AuditEntry
from gateway.stores import Store, codec, open_store
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
        kept = await _unsigned_approvals(config, store) if args.audit_command == "verify" else []
    finally:
        await store.close()
    if args.audit_command == "head":
        print(chain.head(entries) or "(empty)")
        return 0
    if args.audit_command == "verify":
        return _verify(entries, keys, args.head, args.unkeyed_through, kept)
    if args.audit_command == "export":
        print(json.dumps(evidence.bundle(entries, args.plan), indent=1))
        return 0
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


def _verify(
    entries: list[AuditEntry], keys: chain.ChainKeys, head: str | None, unkeyed_through: int, kept: list[str]
) -> int:
    verdict = chain.verify(entries, keys, head=head)
    verdict.problems.extend(events.problems(entries))
    verdict.problems.extend(evidence.problems(entries))
    verdict.problems.extend(kept)
    unkeyed = [entry.seq for entry in entries if not entry.key_id]
    if unkeyed and unkeyed[-1] > unkeyed_through:
        verdict.problems.append(
            f"entries {unkeyed[0]}..{unkeyed[-1]} are unkeyed (plain SHA-256, which anyone who can write the store "
            "can recompute); if they were sealed before an upgrade keyed the chain, accept them with "
            f"--unkeyed-through {unkeyed[-1]}, or trim them (audit trim)"
        )
    for problem in verdict.problems:
        print(f"FAIL  {printable(problem)}")  # names from entries, which callers and backends wrote
    if verdict.problems:
        return 1
    if unkeyed:
        print(f"note  entries {unkeyed[0]}..{unkeyed[-1]} were sealed before the chain was keyed (accepted)")
    against = f", holds head {printable(head)}" if head is not None else ""
    print(f"ok    {len(entries)} entries, chain intact{against}, head {chain.head(entries) or '(empty)'}")
    return 0


async def _unsigned_approvals(config: GatewayConfig, store: Store) -> list[str]:
    """Approvals the store keeps for tools that require passkeys, with a yes no valid signature backs: a row
    written into the store by someone other than the page (the write refuses it; this names it)."""
    now, found = time.time(), []
    url = config.approvals.public_url or ""
    for approval in await store.open_approvals(now - TOMBSTONE_SECONDS):  # all the store still keeps
        if not config.passkey_required(approval.tool):
            continue
        held = await passkeys.signed_with(approval, store)
        for problem in passkeys.unsigned(approval, approval.digest, url, held, when_signed=True):
            found.append(
                f"approval {approval.approval_id} (plan {approval.plan_id}): a yes no person signed: {problem}"
            )
    return found


def verify_bundle(path: Path) -> int:
    """Check an evidence bundle offline: its events together, and every passkey signature in it; the exit code."""
    try:
        bundled = evidence.bundled(json.loads(path.read_text(encoding="utf-8")))
        trail = [codec.load(AuditEntry, json.dumps(entry)) for entry in bundled]
    except (OSError, ValueError, TypeError) as exc:
        print(f"{PROGRAM}: {path}: {exc}", file=sys.stderr)
        return 2
    found = [*events.problems(trail), *evidence.problems(trail)]
    for problem in found:
        print(f"FAIL  {printable(problem)}")  # names from entries: a bundle is anyone's file
    if found:
        return 1
    signed = sum(1 for entry in trail if entry.outcome == "approval" and "passkey" in entry.extra)
    print(f"ok    {len(trail)} entries, {signed} passkey signature(s) verified against the keys in the bundle")
    for credential, key in evidence.keys_of(trail).items():
        # The bundle names its keys itself: compare each with the approver's own (or the gateway's chained audit).
        print(f"key   {printable(f'{credential}  {readable_person(key.approver)}  {key.passkey.public_key}')}")
    return 0


def _timestamp(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f"{text!r} is not a time like 2026-12-02T18:00:00Z") from None
