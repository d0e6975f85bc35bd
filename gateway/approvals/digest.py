"""One digest over the facts a person approves, so that what they saw is provably what ran.

    facts_of   the canonical facts of a write as it is asked for: tool, target, arguments, the numbers, the
               question exactly as rendered, the plan and its version, the rule (or the tool's own confirm) and
               the version of its definition
    digest_of  SHA-256 over the facts' canonical JSON (RFC 8785, JCS: keys sorted, no whitespace, UTF-8; a
               number as ECMAScript prints it), lowercase hex
    short      the first 16 hex digits in groups of four, as the page, the form and the terminal show it

The approval stores the digest when it is made; the write recomputes it from the plan, the question and the
config as they are when it runs, and one that no longer matches is refused as ``plan_stale`` before anything is
sent (gateway.write.ask.people). Every audit event of the write carries it (gateway.audit.entries).

Pure: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from gateway.records import Plan


def canonical(value: Any) -> bytes:
    """RFC 8785 canonical JSON of a JSON value (dicts with string keys, lists, strings, numbers, bools, None).
    Object keys sort by their UTF-16 code units: big-endian UTF-16 bytes compare in that same order."""
    return _encode(value).encode("utf-8")


def _encode(value: Any) -> str:
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda item: str(item[0]).encode("utf-16-be"))
        return (
            "{" + ",".join(json.dumps(str(key), ensure_ascii=False) + ":" + _encode(item) for key, item in items) + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(_encode(item) for item in value) + "]"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _number(value: float) -> str:
    """A float as ECMAScript's Number.prototype.toString prints it (shortest round trip)."""
    if not math.isfinite(value):
        raise ValueError("JSON has no NaN or Infinity")
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        text = f"{mantissa.removesuffix('.0')}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return text


def rule_version(policy: dict[str, Any]) -> str:
    """The version of a rule's definition (or of the tool's own confirm): the first 16 hex digits of its digest."""
    return hashlib.sha256(canonical(policy)).hexdigest()[:16]


def facts_of(plan: Plan, question: str, rule: str | None, policy: dict[str, Any]) -> dict[str, Any]:
    """The canonical facts a person approves (see the module docstring)."""
    return {
        "tool": plan.tool,
        "target": plan.target,
        "arguments": plan.arguments,
        "numbers": plan.summary,
        "question": question,
        "plan": plan.plan_id,
        "version": plan.version,
        "rule": rule,
        "ruleVersion": rule_version(policy),
    }


def digest_of(facts: dict[str, Any]) -> str:
    """SHA-256 over the facts' canonical JSON, lowercase hex."""
    return hashlib.sha256(canonical(facts)).hexdigest()


def short(digest: str) -> str:
    """The digest as a person compares it: its first 16 hex digits in groups of four."""
    return " ".join(digest[index : index + 4] for index in range(0, 16, 4))
