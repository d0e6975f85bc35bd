"""A read tool's config: one bounded page of a backend list, read by one mapped action (``kind = "read"``).

Its face is a page: ``limit`` and ``cursor`` in; the projected ``fields`` of each item and ``nextCursor`` out.
What the call does is the registry's (gateway.tools.kinds.read); gateway.config.kinds lists what every kind's
model answers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gateway.config.face import CURSOR, READ_ONLY, Face, object_schema
from gateway.config.kinds import Sources, ToolKind
from gateway.config.mapping import Call, OutputField


class ReadTool(ToolKind):
    kind: Literal["read"]
    call: Call
    title: str | None = None
    description: str
    items_key: str = "items"
    sort_key: str = "id"
    listing_seconds: float = Field(5.0, ge=0)
    fields: dict[str, OutputField]
    default_limit: int = Field(20, ge=1)
    max_limit: int = Field(50, ge=1, le=50)

    @model_validator(mode="after")
    def _default_within_max(self) -> ReadTool:
        if self.default_limit > self.max_limit:
            raise ValueError("default_limit must not exceed max_limit")
        return self

    def backend_action(self, name: str) -> str:
        return self.call.action

    def face(self, name: str, sources: Sources) -> Face:
        limit = {"type": "integer", "minimum": 1, "maximum": self.max_limit, "default": self.default_limit}
        item = object_schema({field_name: field.json_schema for field_name, field in self.fields.items()})
        items = {"type": "array", "maxItems": self.max_limit, "items": item}
        return Face(
            self.title,
            self.description,
            object_schema({"limit": limit, "cursor": CURSOR}, required=[]),
            object_schema({self.items_key: items, "nextCursor": CURSOR}, required=[self.items_key]),
            READ_ONLY,
        )
