"""The tool mapping of the config: which backend call backs which published tool, and how its data is read.

A ``Call`` is one god-tool action with a payload template (gateway.config.expressions) and the path of its useful data;
it is also the one interpreter of that mapping (``payload_for``, ``data_of``), for reads and writes alike. A
``Target`` knows where its version and its protection sit in the backend's state. A read, preview or write tool
(gateway.config.read, gateway.config.planned) is built from these pieces: calls, a target, input, summary and
output fields.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from gateway.config.expressions import MISSING, at_path, names_in, render
from gateway.config.sections import Model
from gateway.errors import Code
from gateway.records import Reply
from gateway.text import MAX_NAME

NON_NEGATIVE_INTEGER: dict[str, Any] = {"type": "integer", "minimum": 0}


class Call(Model):
    """One god-tool action: its payload template and where the useful data sits in its result."""

    action: str
    payload: dict[str, Any] = {}
    path: str = ""
    timeout_seconds: float | None = Field(None, gt=0)

    def payload_for(self, names: Mapping[str, Any]) -> Any:
        """The payload to send, with the template's names filled in (TemplateError for a name not given)."""
        return render(self.payload, names)

    def data_of(self, reply: Reply) -> Any:
        """The useful data in a successful answer: the value at ``path`` of its JSON, or MISSING."""
        data = reply.json()
        return MISSING if data is None else at_path(data, self.path)


class Lookup(Model):
    """A table of values: inline, or read from a backend action (afresh for each preview). The action's data at
    ``call.path`` is a JSON object (name -> value), or, with ``key`` and ``value`` paths, a list of objects
    (``[{"id": "blank", "rows": 0}, ...]`` with ``key = "id"``, ``value = "rows"``)."""

    call: Call | None = None
    values: dict[str, Any] | None = None
    key: str | None = None
    value: str | None = None
    backend: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Lookup:
        if (self.call is None) == (self.values is None):
            raise ValueError("a lookup needs exactly one of 'call' or 'values'")
        if (self.key is None) != (self.value is None):
            raise ValueError("a lookup read from a list needs both 'key' and 'value' (paths into each item)")
        if self.key is not None and self.call is None:
            raise ValueError("'key' and 'value' read a list from 'call'; inline 'values' are a table already")
        return self

    def table_of(self, data: Any) -> dict[str, Any] | None:
        """The table in an action's data, or None when the data does not have the configured shape."""
        if self.key is None or self.value is None:
            return data if isinstance(data, dict) else None
        if not isinstance(data, list):
            return None
        table: dict[str, Any] = {}
        for item in data:
            key, value = at_path(item, self.key), at_path(item, self.value)
            if not isinstance(key, str | int) or isinstance(key, bool) or value is MISSING or str(key) in table:
                return None
            table[str(key)] = value
        return table


class OutputField(Model):
    """A field of a tool's output, projected from a path in the backend's item."""

    source: str = Field(alias="from")
    json_schema: dict[str, Any] = Field(alias="schema")


class Target(Model):
    """The object a preview plans a change to: how to read it, its id and version, what protects it."""

    noun: str = Field("target", pattern="^[a-z][a-z0-9_]{0,31}$")
    get: Call
    id_field: str = "id"
    version_field: str = "version"
    version_schema: dict[str, Any] = {"type": "integer"}
    version_output: str = Field("version", pattern="^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    not_found_text: str = "not found"
    protected_field: str | None = None
    protected_ids: list[str] = []
    name_field: str | None = None
    """Where the target's name is in its state: the approval page shows it beside the id, quoted (the backend's
    report, never trusted for anything)."""

    @model_validator(mode="after")
    def _get_names_the_target(self) -> Target:
        if names_in(self.get.payload) - {"target_id"}:
            raise ValueError("get.payload may only use {target_id}")
        return self

    @field_validator("noun")
    @classmethod
    def _noun_spells_its_own_codes(cls, noun: str) -> str:
        taken = {code.value for code in Code if not code.per_noun}
        clash = [code.spelled(noun) for code in Code if code.per_noun and code.spelled(noun) in taken]
        if clash:
            raise ValueError(f"noun {noun!r} would spell {clash[0]!r}, which is another error code")
        return noun

    def id_in(self, state: Any) -> Any:
        """The target's id in its state as the backend spells it (MISSING when it has none)."""
        target_id = at_path(state, self.id_field)
        return target_id if isinstance(target_id, str) else MISSING

    def version_in(self, state: Any) -> Any:
        """The target's version in its state as the backend reports it (MISSING when it has none)."""
        version = at_path(state, self.version_field)
        return version if isinstance(version, str | int) and not isinstance(version, bool) else MISSING

    def name_in(self, state: Any) -> str | None:
        """The target's name as the backend reports it (None when no name_field is configured or it is absent)."""
        name = at_path(state, self.name_field) if self.name_field is not None else None
        return name[:MAX_NAME] if isinstance(name, str) and name else None

    def is_protected(self, target_id: str, state: Any) -> bool:
        """Protection is the gateway's job: a flag field, or an id matching a configured glob."""
        if self.protected_field is not None and at_path(state, self.protected_field) is True:
            return True
        return any(fnmatch.fnmatchcase(target_id, pattern) for pattern in self.protected_ids)


class InputField(Model):
    """One argument of a preview: a JSON Schema, plus what the gateway does with it."""

    json_schema: dict[str, Any] = Field(alias="schema")
    target: bool = False
    enum_from: str | None = None
    required: bool = True


class SummaryField(Model):
    """A number or value the preview computes: from the target's state, or from a lookup keyed by an argument."""

    target: str | None = None
    lookup: str | None = None
    key: str | None = None
    json_schema: dict[str, Any] = Field(NON_NEGATIVE_INTEGER, alias="schema")

    @model_validator(mode="after")
    def _one_source(self) -> SummaryField:
        if (self.target is None) == (self.lookup is None):
            raise ValueError("a summary field needs exactly one of 'target' or 'lookup'")
        if self.lookup is not None and self.key is None:
            raise ValueError("a summary field from a lookup needs 'key' (the argument whose value selects the entry)")
        return self
