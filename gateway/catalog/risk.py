"""Every published tool's risk in the shape of SEP-2793 (draft, "Tool Risk Metadata"), from the config alone.

    RISK_META  the tool's ``_meta`` key it is published under: the draft adds its fields to ``ToolAnnotations``,
               but neither mcp 2.3's ``ToolAnnotations`` model nor the TypeScript SDKs' (``@modelcontextprotocol/sdk``
               1.32, ``@modelcontextprotocol/client`` 2.4) carry a field they do not know (both drop it when they
               parse a tool), while a tool's ``_meta`` reaches clients as sent; the fields keep the draft's names,
               so moving them into the annotations is a rename
    risk_of    the fields for one tool: what its kind or its operator states (gateway.config.risk), the rest
               derived from its four hints and its approval settings, the worst case where those cannot tell

    riskLevel               low for a tool that changes nothing; medium for a write that is not destructive; high
                            for a destructive one; critical for a destructive one whose reach is unknown or wider
                            than a namespace
    category                read for a tool that changes nothing; destroy for a destructive write; mutate otherwise
    blastRadius             none for a read; item for a planned write (its plan names one target); what the
                            operator states for a pass-through write, global when unstated (and for a statement
                            write: a statement may touch every row of its tables)
    reversibility           none for a read; none for a destructive write, manual otherwise, unless stated
    sideEffects             what the operator states (an open vocabulary), else none
    approvalRecommendation  none for a tool that never asks; multi when the tool's confirm or any of its rules puts a
                            write to more than one person or to four eyes (a statement write: or a class it may run
                            needs four eyes); single otherwise
    minTrustLevel           what the operator states, else none

A backend's own annotations never enter: a pass-through tool's hints are the operator's (gateway.config.passthrough).
Pure: config models in, JSON out.
"""

from __future__ import annotations

from typing import Any

from gateway.config.face import Hints
from gateway.config.kinds import ToolKind
from gateway.config.risk import wire

RISK_META = "mcp-safety-gateway/risk"
WIDE = frozenset({"organization", "global"})


def risk_of(config: ToolKind, hints: Hints) -> dict[str, Any]:
    """A tool's SEP-2793 fields (see the module docstring), in the draft's order."""
    stated = wire(config.stated_risk())
    if hints.read_only:
        derived: dict[str, Any] = {"riskLevel": "low", "category": "read"}
    else:
        blast = stated.get("blastRadius", "global")
        destructive = hints.destructive
        level = ("critical" if blast in WIDE else "high") if destructive else "medium"
        derived = {
            "riskLevel": level,
            "category": "destroy" if destructive else "mutate",
            "blastRadius": blast,
            "reversibility": "none" if destructive else "manual",
        }
    found = {**derived, **stated, "approvalRecommendation": config.approval_recommendation()}
    order = ("riskLevel", "category", "blastRadius", "reversibility", "sideEffects", "approvalRecommendation")
    return {name: found[name] for name in (*order, "minTrustLevel") if name in found}
