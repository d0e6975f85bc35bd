"""The gateway's secret keys, each a ring (comma-separated; the first signs, all verify, for rotation) from the
environment, or generated once into the state directory so that a demo needs no setup and a restart still
accepts what it signed before:

    GATEWAY_SECRET_KEY   secret.key   seals 2026 ``requestState`` and signs list cursors
    GATEWAY_AUDIT_KEY    audit.key    seals the audit chain (gateway.audit.chain); kept apart from the audit
                                      store, so whoever can edit the store cannot re-seal an edited entry
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

ENV_VAR = "GATEWAY_SECRET_KEY"
KEY_FILE = "secret.key"
AUDIT_ENV_VAR = "GATEWAY_AUDIT_KEY"
AUDIT_KEY_FILE = "audit.key"
MIN_KEY = 32
"""The shortest key accepted from the environment, in characters (a generated key has 64 hex digits)."""


def load_keys(state_dir: Path) -> list[bytes]:
    """The secret key ring, newest first."""
    return _ring(state_dir, ENV_VAR, KEY_FILE)


def load_audit_keys(state_dir: Path) -> list[bytes]:
    """The audit chain's key ring, newest first."""
    return _ring(state_dir, AUDIT_ENV_VAR, AUDIT_KEY_FILE)


def env_refusal() -> str | None:
    """A sentence naming the environment variable whose key ring holds a key too short to trust, or None."""
    for env_var in (ENV_VAR, AUDIT_ENV_VAR):
        if any(len(key) < MIN_KEY for key in _configured(env_var)):
            return f"{env_var}: every key must be at least {MIN_KEY} characters of secret randomness"
    return None


def _configured(env_var: str) -> list[bytes]:
    return [part.strip().encode() for part in os.environ.get(env_var, "").split(",") if part.strip()]


def _ring(state_dir: Path, env_var: str, file_name: str) -> list[bytes]:
    keys = _configured(env_var)
    if keys:
        refusal = env_refusal()
        if refusal is not None:
            raise ValueError(refusal)
        return keys
    file = state_dir / file_name
    if not file.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32))
    return [file.read_text().strip().encode()]
