"""The small expression language of the config: dotted paths into backend JSON, and ``{name}`` templates.

    path      "data.items"  "meta.rev"  "items.0.id"     ("" is the whole value)
    payload   {id = "{target_id}", fixture = "{fixture}"}  a string that is exactly one ``{name}`` keeps the
              value's type (numbers stay numbers); other strings are text with the names filled in
    message   'Delete {rowsDeleted} rows in {target_id}?'

Names are plain identifiers; nothing else is evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NAME = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
MISSING = object()


class TemplateError(ValueError):
    """A template names a value that does not exist."""


def at_path(data: Any, path: str) -> Any:
    """The value at a dotted path, or MISSING."""
    if path == "":
        return data
    for part in path.split("."):
        if (type(data) is dict or isinstance(data, Mapping)) and part in data:  # a dict skips the ABC hook
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return MISSING
    return data


def render(template: Any, names: Mapping[str, Any]) -> Any:
    """Fill a payload template (nested tables and arrays included) from ``names``."""
    if isinstance(template, str):
        whole = NAME.fullmatch(template)
        if whole:
            return _lookup(names, whole.group(1))
        return NAME.sub(lambda match: str(_lookup(names, match.group(1))), template)
    if isinstance(template, Mapping):
        return {key: render(value, names) for key, value in template.items()}
    if isinstance(template, list):
        return [render(value, names) for value in template]
    return template


def names_in(template: Any) -> set[str]:
    """Every ``{name}`` a template uses, for checking a config before it runs."""
    if isinstance(template, str):
        return set(NAME.findall(template))
    if isinstance(template, Mapping):
        return set().union(*(names_in(value) for value in template.values()))
    if isinstance(template, list):
        return set().union(*(names_in(value) for value in template))
    return set()


def _lookup(names: Mapping[str, Any], name: str) -> Any:
    if name not in names:
        raise TemplateError(f"template names {{{name}}}, which is not available here")
    return names[name]
