"""``mcp-safety-gateway init [DIR]``: write the built-in config, comments and all, as a file to edit."""

from __future__ import annotations

from pathlib import Path

from gateway.config import DEFAULT_CONFIG

FILE_NAME = "gateway.toml"


class InitError(Exception):
    """The config cannot be written; the message says why."""


def write_config(directory: Path, *, force: bool = False) -> Path:
    """Write ``DIR/gateway.toml`` (the folder is created); refuse to overwrite unless ``force``."""
    target = directory / FILE_NAME
    if target.exists() and not force:
        raise InitError(f"{target} already exists: edit it, or pass --force to overwrite it")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        target.write_text(DEFAULT_CONFIG.read_text(encoding="utf-8"), encoding="utf-8")
    except OSError as exc:
        raise InitError(f"cannot write {target}: {exc.strerror}") from None
    return target
