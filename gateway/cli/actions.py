"""What a god-tool says about its own actions, read without calling any of them (for ``check`` and ``inspect``).

named_in     which of some action names a refusal's text names (many servers answer an unknown action
             with "Valid actions: list, get, reseed")
IMPOSSIBLE   the action name a probe sends: no real server has it, so its answer can only be a refusal

The actions a god-tool's schema lists are gateway.config.godtool's ``enumerated``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

IMPOSSIBLE = "__gateway_probe_no_such_action__"


def named_in(text: str, names: Iterable[str]) -> list[str]:
    """The names that appear in ``text`` as whole words (``reseed`` in "Valid actions: list, reseed")."""
    return [name for name in names if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", text)]
