"""The gateway's secret keys: they seal 2026 ``requestState`` and sign list cursors.

From ``GATEWAY_SECRET_KEY`` (comma-separated; the first signs, all verify, for rotation), or generated once
into the state directory so that a demo needs no setup and a restart still accepts old cursors and states.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

ENV_VAR = "GATEWAY_SECRET_KEY"
KEY_FILE = "secret.key"


def load_keys(state_dir: Path) -> list[bytes]:
    """The key ring, newest first."""
    configured = os.environ.get(ENV_VAR, "").strip()
    if configured:
        keys = [part.strip().encode() for part in configured.split(",") if part.strip()]
        if any(len(key) < 32 for key in keys):
            raise ValueError(f"{ENV_VAR}: every key must be at least 32 characters of secret randomness")
        return keys
    file = state_dir / KEY_FILE
    if not file.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32))
    return [file.read_text().strip().encode()]
