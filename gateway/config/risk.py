"""A tool's risk in the terms of SEP-2793 (draft, "Tool Risk Metadata"): what the config states or implies, and the
rules that keep it from contradicting the tool's four hints.

    StatedRisk       ``tools.NAME.risk``: the operator's own decisions about a pass-through tool, which the
                     gateway cannot derive (how far its effect reaches, whether it can be undone), each optional
    contradictions   what a tool's risk says against its hints (a read-only tool that mutates, a non-destructive
                     one that deletes, a destructive one undone by itself, a write nobody is asked about), each
                     naming the field: the config refuses a stated risk that contradicts its hints (``refusal``),
                     and a test holds every published tool to the same rules

The published form (gateway.catalog.risk) fills in what is not stated from the hints and the tool's approval
settings, never from what a backend says of its own tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from gateway.config.sections import Model

Level = Literal["low", "medium", "high", "critical"]
Category = Literal["read", "observe", "mutate", "delete", "destroy", "utility"]
BlastRadius = Literal["item", "namespace", "cluster", "organization", "global"]
Reversibility = Literal["auto", "manual", "none"]
Recommendation = Literal["none", "single", "multi"]

READ_CATEGORIES = frozenset({"read", "observe", "utility"})
"""The categories of a tool that changes nothing (``readOnlyHint: true``)."""
REMOVING = frozenset({"delete", "destroy"})
"""The categories of a tool that removes what exists: destructive by definition."""


class StatedRisk(Model):
    """The operator's decisions about a tool's risk (SEP-2793's fields, snake_case); what is left out is derived from
    the tool's hints, the worst case where the hints cannot tell (gateway.catalog.risk)."""

    level: Level | None = None
    category: Category | None = None
    blast_radius: BlastRadius | None = None
    reversibility: Reversibility | None = None
    side_effects: list[str] = Field(default_factory=list, max_length=16)
    min_trust_level: int | None = Field(None, ge=1, le=5)


NOTHING_STATED = StatedRisk()


def contradictions(hints: Mapping[str, Any], risk: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Where ``risk`` (SEP-2793's wire names) contradicts ``hints`` (the MCP annotations' wire names): each as the
    risk field and a sentence that starts with it; empty when they agree."""
    read_only, destructive = hints.get("readOnlyHint") is True, hints.get("destructiveHint") is True
    category, reversibility = risk.get("category"), risk.get("reversibility")
    found = []
    if category is not None and read_only != (category in READ_CATEGORIES):
        kind = "read-only" if read_only else "not read-only"
        found.append(("category", f"{category!r} contradicts a {kind} tool (readOnlyHint {str(read_only).lower()})"))
    if category in REMOVING and not read_only and not destructive:
        found.append(("category", f"{category!r} removes what exists, and the tool is not destructive"))
    if destructive and reversibility == "auto":
        found.append(("reversibility", "'auto' contradicts a destructive tool (destructiveHint true)"))
    if read_only:
        found += [(name, "is stated for a read-only tool, which changes nothing") for name in _effects(risk)]
    recommendation = risk.get("approvalRecommendation")
    if recommendation is not None and read_only != (recommendation == "none"):
        whom = "a read-only tool, which nobody is asked about" if read_only else "a write, which a person confirms"
        found.append(("approvalRecommendation", f"{recommendation!r} contradicts {whom}"))
    return found


def _effects(risk: Mapping[str, Any]) -> list[str]:
    return [name for name in ("blastRadius", "reversibility") if risk.get(name) is not None]


WIRE_NAMES = {
    "level": "riskLevel",
    "category": "category",
    "blast_radius": "blastRadius",
    "reversibility": "reversibility",
    "side_effects": "sideEffects",
    "min_trust_level": "minTrustLevel",
}
"""Each ``tools.NAME.risk`` key and the SEP-2793 field it states."""


def wire(stated: StatedRisk) -> dict[str, Any]:
    """The fields the operator stated, under SEP-2793's names."""
    return {WIRE_NAMES[key]: value for key, value in stated.model_dump().items() if value not in (None, [])}


def refusal(stated: StatedRisk, read_only: bool, destructive: bool) -> str | None:
    """Why a stated risk cannot stand beside the tool's hints (a sentence naming ``risk.KEY``), or None."""
    hints = {"readOnlyHint": read_only, "destructiveHint": destructive}
    config_names = {wire_name: key for key, wire_name in WIRE_NAMES.items()}
    found = contradictions(hints, wire(stated))
    return None if not found else f"risk.{config_names[found[0][0]]} {found[0][1]}"
