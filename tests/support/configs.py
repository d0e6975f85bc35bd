"""Config files for tests and benchmarks, built from a profile's own config file (so they test what ships)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.config import GatewayConfig, load_config, parse_config, to_toml
from tests.support.processes import ROOT, backend_args
from tests.support.profiles import FLAGS, TENANTS, Profile

BACKEND_NAMES = {TENANTS.name: "tenants", FLAGS.name: "flags"}
"""What the two-backend gateway calls each profile's backend."""
HINTS_READ = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}
PASSTHROUGH: dict[str, dict[str, Any]] = {
    "flag_history": {
        "kind": "passthrough",
        "backend": "flags",
        "scopes": ["flags:read"],
        "title": "Flag history",
        "description": "How often a flag was written, and its last change. Changes nothing.",
        "annotations": HINTS_READ,
    },
    "describe_flag": {
        "kind": "passthrough",
        "backend": "flags",
        "source": "set_flag_description",
        "scopes": ["flags:write"],
        "title": "Describe a flag",
        "description": "Set a flag's description. Asks the user to confirm; a retry with the same idempotencyKey "
        "returns the first result and never writes twice.",
        "annotations": {**HINTS_READ, "read_only": False},
        "target_argument": "key",
        "message": "Set the description of flag {key} to {description}?",
        "output_schema": {
            "type": "object",
            "properties": {
                "flag": {
                    "type": "object",
                    "properties": {"key": {"type": "string"}, "description": {"type": "string"}},
                    "required": ["key", "description"],
                }
            },
            "required": ["flag"],
            "additionalProperties": False,
        },
    },
}
"""The flags backend's own tools, passed through on purpose: one read, one confirmed write. Its other tools
(``delete_flag``, ``set_flag_description`` under its own name, the god-tool) stay hidden."""

UNLIMITED = {"per_second": 1e9, "burst": 1_000_000_000}


def config_data(
    profile: Profile,
    db: Path,
    *extra_backend_args: str,
    store: str = "memory",
    state_dir: Path,
    tools: Callable[[dict[str, Any]], None] | None = None,
    backend: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The profile's config file as data, over a stdio backend on ``db`` (or ``backend``'s overrides, e.g. an
    HTTP URL), with state under ``state_dir`` and no practical per-caller rate limit (one test or load caller is
    far faster than a person; TOML has no null, so the bucket is made too big to empty rather than left out)."""
    data = load_config(profile.config).model_dump(by_alias=True, exclude_none=True)
    data["gateway"] = {**data["gateway"], "store": store, "state_dir": str(state_dir)}
    data["rate_limits"] = {"per_caller": UNLIMITED}
    command, *args = backend_args(profile, db, *extra_backend_args)
    stdio = {"transport": "stdio", "command": command, "args": args, "cwd": str(state_dir), "call_timeout_seconds": 20}
    if not profile.backend_module.startswith("legacy_backend"):  # a test server: not installed, found in the checkout
        stdio["env"] = {"PYTHONPATH": str(ROOT)}
    merged = {**data["backend"], **stdio, **(backend or {})}
    if merged["transport"] == "http":
        merged = {key: value for key, value in merged.items() if key not in ("command", "args", "cwd")}
    data["backend"] = merged
    if tools is not None:
        tools(data["tools"])
    return data


def together_data(
    profile: Profile,
    db: Path,
    *extra_backend_args: str,
    state_dir: Path,
    store: str = "memory",
    backends: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Both profiles' config files joined into one gateway over two backends (``tenants`` and ``flags``), every
    tool and lookup naming its backend, plus the PASSTHROUGH tools. ``profile``'s backend uses ``db`` (and the
    extra arguments); the other's database is beside it. ``backends`` overrides a backend's table by name."""
    data: dict[str, Any] = {"backends": {}, "lookups": {}, "tools": {}}
    for each in (TENANTS, FLAGS):
        own = each is profile
        path = db if own else db.with_name(f"{each.name}.db")
        extra = extra_backend_args if own else each.seed_demo
        single = config_data(each, path, *extra, store=store, state_dir=state_dir)
        name = BACKEND_NAMES[each.name]
        data["backends"][name] = {**single["backend"], **(backends or {}).get(name, {})}
        if data["backends"][name]["transport"] == "http":
            data["backends"][name] = {
                k: v for k, v in data["backends"][name].items() if k not in ("command", "args", "cwd")
            }
        data["lookups"].update({lookup: {**body, "backend": name} for lookup, body in single["lookups"].items()})
        for tool, body in single["tools"].items():
            data["tools"][tool] = body if body["kind"] == "write" else {**body, "backend": name}
        data.update({key: single[key] for key in ("gateway", "rate_limits")})
    data["gateway"] = {**data["gateway"], "name": "two-backend-gateway"}
    data["tools"].update(copy.deepcopy(PASSTHROUGH))  # a copy: a test that changes a tool changes only its own
    return data


SICK_TIMEOUTS = {"connect_timeout_seconds": 2, "list_timeout_seconds": 2, "call_timeout_seconds": 5}
"""Short timeouts for the backends the independence tests make hang or die, so nothing waits long."""


def three_backends_data(db: Path, ports: dict[str, int], *, state_dir: Path, store: str = "memory") -> dict[str, Any]:
    """together_data over HTTP backends on ``ports`` (``tenants``, ``flags``), plus a third, ``notes``
    (tests/hostile_backend), whose one tool is passed through as ``read_note``; flags and notes get SICK_TIMEOUTS."""
    http = {name: {"transport": "http", "url": f"http://127.0.0.1:{port}/mcp"} for name, port in ports.items()}
    data = together_data(
        TENANTS,
        db,
        state_dir=state_dir,
        store=store,
        backends={"tenants": http["tenants"], "flags": {**http["flags"], **SICK_TIMEOUTS}},
    )
    data["backends"]["notes"] = {**http["notes"], **SICK_TIMEOUTS}
    data["tools"]["read_note"] = {"kind": "passthrough", "backend": "notes", "annotations": HINTS_READ}
    return data


def gateway_config(profile: Profile, db: Path, *extra_backend_args: str, **options: Any) -> GatewayConfig:
    """config_data, validated."""
    return parse_config(config_data(profile, db, *extra_backend_args, **options))


def write_toml(data: dict[str, Any], path: Path) -> Path:
    """Write config data as a TOML file."""
    path.write_text(to_toml(data))
    return path


def write_config(profile: Profile, tmp: Path, *extra_backend_args: str, **options: Any) -> Path:
    """The profile's config with the backend's database, the SQLite store and the state kept under ``tmp``."""
    options.setdefault("store", f"sqlite:{tmp}/gateway.db")
    args = extra_backend_args or profile.seed_demo
    data = config_data(profile, tmp / "backend.db", *args, state_dir=tmp / "state", **options)
    return write_toml(data, tmp / "gateway.toml")
