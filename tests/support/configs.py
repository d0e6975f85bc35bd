"""Config files for tests and benchmarks, built from a profile's own config file (so they test what ships)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.config import GatewayConfig, load_config, parse_config, to_toml
from tests.support.processes import backend_args
from tests.support.profiles import Profile

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
    merged = {**data["backend"], **stdio, **(backend or {})}
    if merged["transport"] == "http":
        merged = {key: value for key, value in merged.items() if key not in ("command", "args", "cwd")}
    data["backend"] = merged
    if tools is not None:
        tools(data["tools"])
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
