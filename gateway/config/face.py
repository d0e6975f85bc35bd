"""A tool's face as a client sees it, in the config's own terms: its four hints and its JSON Schemas.

``Face`` is what every tool kind (gateway.config.kinds) answers with; the catalog (gateway.catalog.published)
makes its schemas portable and compiles their checks. The gateway's own wire fields (``planId``,
``idempotencyKey``, a cursor) are spelled here once, for every kind that shows them. ``Misfit``: a face that
cannot be built from what the backend offers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import model_validator

from gateway.config.sections import Model

IDEMPOTENCY_KEY = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{8,128}$"}
PLAN_ID = {"type": "string", "pattern": "^pl_[A-Za-z0-9_-]{16,64}$"}
CURSOR = {"type": "string", "minLength": 1, "maxLength": 512}


def object_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A strict object schema: no other properties; every one required unless ``required`` says otherwise."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


class Hints(Model):
    """All four annotations, each stated by the operator (none has a default)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool

    @model_validator(mode="after")
    def _consistent(self) -> Hints:
        if self.read_only and self.destructive:
            raise ValueError("a read-only tool cannot be destructive: set destructive = false")
        return self


READ_ONLY = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)


class Misfit(Exception):
    """A tool does not fit what its backend offers; ``key`` names the config key to change."""

    def __init__(self, key: str, sentence: str) -> None:
        super().__init__(f"{key}: {sentence}")
        self.key = key
        self.sentence = sentence


@dataclass(frozen=True)
class Face:
    """What a client sees of a tool, before the catalog makes its schemas portable and compiles their checks."""

    title: str | None
    description: str | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    hints: Hints
