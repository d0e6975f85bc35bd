"""The caller as plans, keys, locks, rate-limit buckets and the audit name it: one string, unambiguous.

A token's caller is the triple (issuer, client, subject). Joining client and subject with a separator made
``client_id = "console/alice"`` the same caller as client ``console`` with subject ``alice``, so the triple is
encoded as a JSON array instead: ``["https://login.example.com","console","alice"]``, ``null`` for a part the token
lacks (a static token has no issuer). Every layer below keeps seeing one ``str``; gateway.identity.caller builds it, and
nothing else does. A caller without a token is the configured local name (``local``), which the config keeps from
starting with ``[``, so it never reads as a principal.

Standard library only: the audit listing renders callers with ``readable`` without loading the HTTP stack.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import quote

STATIC = "static token"
"""What ``readable`` shows for the issuer of a caller whose token had none (the config's static tokens)."""
_SIMPLE = re.compile(r"[A-Za-z0-9._:@+=-]+")


@dataclass(frozen=True)
class Principal:
    """Who a verified token speaks for."""

    issuer: str | None
    client: str
    subject: str | None


def encode(principal: Principal) -> str:
    """The caller string for a principal."""
    return json.dumps([principal.issuer, principal.client, principal.subject], separators=(",", ":"))


def decode(caller: str) -> Principal | None:
    """The principal a caller string encodes, or None for a local name (or a name an older gateway stored)."""
    if not caller.startswith("["):
        return None
    try:
        parts = json.loads(caller)
    except ValueError:
        return None
    if not (isinstance(parts, list) and len(parts) == 3 and isinstance(parts[1], str)):
        return None
    issuer, client, subject = parts
    if not (isinstance(issuer, str | None) and isinstance(subject, str | None)):
        return None
    principal = Principal(issuer, client, subject)
    return principal if encode(principal) == caller else None


def readable(caller: str) -> str:
    """A caller as a person reads it, still unambiguous: ``console/alice (https://login.example.com)``.

    Client and subject are percent-escaped wherever they hold a ``/``, a space, a bracket, a quote or anything
    unprintable, so ``console%2Falice (static token)`` (client ``console/alice``) is not ``console/alice (static
    token)`` (client ``console``, subject ``alice``). A local name shows as itself when it is a plain word, else
    quoted; a principal always shows its issuer in parentheses, so the two never meet."""
    principal = decode(caller)
    if principal is None:
        return caller if _SIMPLE.fullmatch(caller) else json.dumps(caller)
    who = _escaped(principal.client)
    if principal.subject is not None:
        who += "/" + _escaped(principal.subject)
    issuer = STATIC if principal.issuer is None else quote(principal.issuer, safe=":/?#[]@!$&'()*+,;=~")
    return f"{who} ({issuer})"


def _escaped(part: str) -> str:
    return quote(part, safe=":@+=!$&'*,;~")
