"""The god-tools the safety suite runs against, each wrapped by its own config file and nothing else.

A profile tells the shared tests the tool names, some target ids, sample arguments, and how to read and
move state in that backend's own SQLite file. The tests never branch on the profile.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.config import DEFAULT_CONFIG

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURE_ROWS = {"empty": 0, "smoke": 25}
PRESETS = {"off": 0, "canary": 5}


def _query(db: Path, sql: str, *params: Any) -> Any:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchone()[0]


def _execute(db: Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, params)


@dataclass(frozen=True)
class Profile:
    name: str
    config: Path
    backend_module: str
    seed_demo: tuple[str, ...]
    seed_many: Callable[[int], tuple[str, ...]]
    list_tool: str
    preview_tool: str
    write_tool: str
    items_key: str
    id_field: str
    target_arg: str
    choice_arg: str
    choices: tuple[str, str]
    main: str
    other: str
    spare: str
    protected: str
    absent: str
    snapshot: Callable[[Path, str], tuple[Any, ...]]
    version: Callable[[Path, str], int]
    bump: Callable[[Path, str], None]
    set_protected: Callable[[Path, str, bool], None]
    applied: Callable[[Path, str, str], bool]
    message: Callable[[dict[str, Any]], str]
    write_log: str = "write_log"

    def __str__(self) -> str:
        return self.name

    def preview_args(self, target: str | None = None, variant: int = 0) -> dict[str, Any]:
        """Arguments for a preview of ``target`` (the main one by default) with one of two choices."""
        return {self.target_arg: target or self.main, self.choice_arg: self.choices[variant]}

    def write_count(self, db: Path) -> int:
        """Writes the backend committed, from its own log table."""
        return int(_query(db, f"SELECT COUNT(*) FROM {self.write_log}"))


TENANTS = Profile(
    name="manage_tenant",
    config=DEFAULT_CONFIG,
    backend_module="legacy_backend",
    seed_demo=("--seed-demo",),
    seed_many=lambda n: ("--seed-tenants", str(n)),
    list_tool="list_tenants",
    preview_tool="preview_tenant_reset",
    write_tool="reset_tenant",
    items_key="tenants",
    id_field="id",
    target_arg="tenantId",
    choice_arg="fixture",
    choices=("empty", "smoke"),
    main="tn_checkout01",
    other="tn_search02",
    spare="tn_billing03",
    protected="tn_prod_eu",
    absent="tn_nobody",
    snapshot=lambda db, t: (
        _query(db, "SELECT version FROM tenants WHERE id = ?", t),
        _query(db, "SELECT COUNT(*) FROM rows WHERE tenant_id = ?", t),
    ),
    version=lambda db, t: int(_query(db, "SELECT version FROM tenants WHERE id = ?", t)),
    bump=lambda db, t: _execute(db, "UPDATE tenants SET version = version + 1 WHERE id = ?", t),
    set_protected=lambda db, t, on: _execute(db, "UPDATE tenants SET protected = ? WHERE id = ?", int(on), t),
    applied=lambda db, t, choice: (
        _query(db, "SELECT COUNT(*) FROM rows WHERE tenant_id = ?", t) == FIXTURE_ROWS[choice]
    ),
    message=lambda plan: (
        f"Delete {plan['rowsDeleted']} rows in {plan['tenantId']} and load fixture "
        f'"{plan["fixture"]}" ({plan["rowsInserted"]} rows)?'
    ),
)

FLAGS = Profile(
    name="manage_flags",
    config=ROOT / "config" / "flags.toml",
    backend_module="legacy_backend.flags",
    seed_demo=("--seed-demo",),
    seed_many=lambda n: ("--seed-flags", str(n)),
    list_tool="list_flags",
    preview_tool="preview_flag_rollout",
    write_tool="apply_flag_rollout",
    items_key="flags",
    id_field="key",
    target_arg="flagKey",
    choice_arg="preset",
    choices=("off", "canary"),
    main="checkout.new_ui",
    other="search.ranking_v2",
    spare="billing.retry",
    protected="prod.kill_switch",
    absent="nope.nothing",
    snapshot=lambda db, f: (
        _query(db, "SELECT rev FROM flags WHERE key = ?", f),
        _query(db, "SELECT rollout FROM flags WHERE key = ?", f),
    ),
    version=lambda db, f: int(_query(db, "SELECT rev FROM flags WHERE key = ?", f)),
    bump=lambda db, f: _execute(db, "UPDATE flags SET rev = rev + 1 WHERE key = ?", f),
    set_protected=lambda db, f, on: _execute(db, "UPDATE flags SET locked = ? WHERE key = ?", int(on), f),
    applied=lambda db, f, choice: _query(db, "SELECT rollout FROM flags WHERE key = ?", f) == PRESETS[choice],
    message=lambda plan: (
        f"Change the rollout of {plan['flagKey']} from {plan['currentRollout']}% to "
        f"{plan['newRollout']}% ({plan['preset']})?"
    ),
)

PROFILES = [TENANTS, FLAGS]
