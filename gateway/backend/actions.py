"""What a god-tool says about its own actions, read without calling any of them (for ``check``, ``inspect`` and the
catalog's load).

named_in     which of some action names a refusal's text names (many servers answer an unknown action
             with "Valid actions: list, get, reseed")
listed_in    the whole list of valid actions such a refusal states, when it states one in a form read here
             ("Valid actions: a, b", "expected one of: 'a', 'b'"), else None
IMPOSSIBLE   the action name a probe sends: no real server has it, so its answer can only be a refusal

The actions a god-tool's schema lists are gateway.config.godtool's ``enumerated``. A refusal is backend text,
untrusted: what is read from it is at most MAX_ACTIONS names of the shape of an action, and it only ever narrows
what the gateway publishes (a write whose action the list lacks is not published), never widens it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

IMPOSSIBLE = "__gateway_probe_no_such_action__"
MAX_ACTIONS = 200
"""More names than this in a refusal is not a list of actions the gateway believes."""

_LIST = re.compile(
    r"(?:\b(?:valid|allowed|supported|known|available)\s+(?:actions?|commands?|operations?|values?)"
    r"(?:\s+(?:are|is|include))?|\b(?:expected|must\s+be)\s+one\s+of|\bone\s+of)\s*[:=]?\s*(?P<names>[^\n]*)",
    re.IGNORECASE,
)
_NAME = re.compile(r"[A-Za-z_][\w.-]{0,63}")


def named_in(text: str, names: Iterable[str]) -> list[str]:
    """The names that appear in ``text`` as whole words (``reseed`` in "Valid actions: list, reseed")."""
    return [name for name in names if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", text)]


def listed_in(text: str) -> list[str] | None:
    """The valid actions a refusal lists after words such as "Valid actions:" (the rest of that line: names
    separated by commas, ``or``, quotes or brackets), or None when it lists none in a form read here."""
    found = _LIST.search(text)
    if found is None:
        return None
    names = [name.rstrip(".-") for name in _NAME.findall(found.group("names")) if name.lower() not in {"or", "and"}]
    names = [name for name in names if name]
    if not names or len(names) > MAX_ACTIONS or IMPOSSIBLE in names:
        return None
    return names
