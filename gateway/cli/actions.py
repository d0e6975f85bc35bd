"""What a god-tool says about its own actions, read without calling any of them (for ``check`` and ``inspect``).

enumerated   the actions its input schema lists for the action argument (an ``enum``, or ``const``
             alternatives), or None when the schema leaves the argument free
named_in     which of some action names a refusal's text names (many servers answer an unknown action
             with "Valid actions: list, get, reseed")
IMPOSSIBLE   the action name a probe sends: no real server has it, so its answer can only be a refusal
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

IMPOSSIBLE = "__gateway_probe_no_such_action__"


def enumerated(input_schema: Mapping[str, Any], argument: str) -> list[str] | None:
    """The actions the schema allows for ``argument``, or None when it does not enumerate them."""
    properties = input_schema.get("properties")
    schema = properties.get(argument) if isinstance(properties, Mapping) else None
    if not isinstance(schema, Mapping):
        return None
    if isinstance(schema.get("enum"), list):
        return [value for value in schema["enum"] if isinstance(value, str)]
    for combinator in ("oneOf", "anyOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options and all(isinstance(o, Mapping) and "const" in o for o in options):
            return [o["const"] for o in options if isinstance(o["const"], str)]
    return None


def named_in(text: str, names: Iterable[str]) -> list[str]:
    """The names that appear in ``text`` as whole words (``reseed`` in "Valid actions: list, reseed")."""
    return [name for name in names if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", text)]
