"""The gateway's secret keys, each a ring (comma-separated; the first signs, all verify, for rotation) from the
environment (the variable, or a file its ``_FILE`` twin names: gateway.config.environ), or generated once into the
state directory so that a demo needs no setup and a restart still accepts what it signed before:

    GATEWAY_SECRET_KEY   secret.key   seals 2026 ``requestState`` and signs list cursors
    GATEWAY_AUDIT_KEY    audit.key    seals the audit chain (gateway.audit.chain); kept apart from the audit
                                      store, so whoever can edit the store cannot re-seal an edited entry

Several processes may start at once on one state directory (replicas on a shared volume, a supervisor restarting
fast), so a key file is never seen half-made: the key is written to a temporary file beside it and hard-linked
into place, which fails if the name exists; a process that loses that race reads the winner's key. A key file
that is empty or shorter than MIN_KEY characters (damaged, or truncated by hand) is refused with a sentence
naming it, never taken as a key.

Before anything starts, ``secret_refusal`` checks these and every other secret the config names by variable (each
``*_env`` key, ``GATEWAY_STORE_PASSWORD``): a short key or a ``_FILE`` that cannot be read is refused in a sentence
naming the variable and the config key.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from gateway.config import GatewayConfig
from gateway.config.environ import FILE_SUFFIX, SecretError, is_set, secret
from gateway.config.store_url import store_password

ENV_VAR = "GATEWAY_SECRET_KEY"
KEY_FILE = "secret.key"
AUDIT_ENV_VAR = "GATEWAY_AUDIT_KEY"
AUDIT_KEY_FILE = "audit.key"
MIN_KEY = 32
"""The shortest key accepted, in characters (a generated key has 64 hex digits)."""
RINGS = {ENV_VAR: KEY_FILE, AUDIT_ENV_VAR: AUDIT_KEY_FILE}


def load_keys(state_dir: Path) -> list[bytes]:
    """The secret key ring, newest first."""
    return _ring(state_dir, ENV_VAR, KEY_FILE)


def load_audit_keys(state_dir: Path) -> list[bytes]:
    """The audit chain's key ring, newest first."""
    return _ring(state_dir, AUDIT_ENV_VAR, AUDIT_KEY_FILE)


def from_environment() -> bool:
    """Whether the secret key ring comes from the environment (else from the state directory)."""
    return is_set(ENV_VAR)


def secret_refusal(config: GatewayConfig) -> str | None:
    """A sentence naming the first secret that cannot be used (a key too short, a ``_FILE`` that cannot be read,
    a variable set both ways), or None: checked before ``serve``, ``check`` or ``audit`` opens anything."""
    refusal = key_refusal(config.gateway.state_path())
    if refusal is not None:
        return refusal
    for key, name in _named_secrets(config):
        try:
            secret(name)
        except SecretError as exc:
            return f"{key}: {exc}"
    try:
        store_password()
    except ValueError as exc:
        return str(exc)
    return None


def _named_secrets(config: GatewayConfig) -> list[tuple[str, str]]:
    """(config key, variable) for each secret the config names by variable."""
    named: list[tuple[str, str | None]] = []
    if config.auth.introspection is not None:
        for field in ("client_id_env", "client_secret_env"):
            named.append((f"auth.introspection.{field}", getattr(config.auth.introspection, field)))
    if config.approvals.oidc is not None:
        named.append(("approvals.oidc.client_secret_env", config.approvals.oidc.client_secret_env))
    for hook, webhook in config.approvals.webhooks.items():
        named.append((f"approvals.webhooks.{hook}.secret_env", webhook.secret_env))
    named.append(("audit_stream.webhook_secret_env", config.audit_stream.webhook_secret_env))
    for backend, section in config.backend_sections().items():
        table = "backend" if section is config.backend else f"backends.{backend}"
        named.extend((f"{table}.headers_from_env.{header}", var) for header, var in section.headers_from_env.items())
    return [(key, name) for key, name in named if name is not None]


def key_refusal(state_dir: Path) -> str | None:
    """A sentence naming the variable or key file that holds a key too short to trust (or a variable that cannot
    be read), or None. Checked before anything starts; a key file not made yet is not a refusal."""
    for env_var, file_name in RINGS.items():
        try:
            if _configured(env_var):
                continue
            _read(state_dir / file_name)
        except FileNotFoundError:
            continue
        except ValueError as exc:
            return str(exc)
    return None


def _configured(env_var: str) -> list[bytes]:
    """The ring the environment gives (empty when it gives none); ValueError naming the variable if it holds a
    short key or cannot be read."""
    try:
        text = secret(env_var) or ""
    except SecretError as exc:
        raise ValueError(str(exc)) from None
    keys = [part.strip().encode() for part in text.split(",") if part.strip()]
    if any(len(key) < MIN_KEY for key in keys):
        where = env_var if os.environ.get(env_var) else f"{env_var}{FILE_SUFFIX}"
        raise ValueError(f"{where}: every key must be at least {MIN_KEY} characters of secret randomness")
    return keys


def _ring(state_dir: Path, env_var: str, file_name: str) -> list[bytes]:
    keys = _configured(env_var)
    if keys:
        return keys
    file = state_dir / file_name
    try:
        return [_read(file)]
    except FileNotFoundError:
        pass
    state_dir.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=state_dir, prefix=f".{file_name}.")  # mode 0600
    try:
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process linked its key first: all take that one
            os.link(temporary, file)
    finally:
        os.unlink(temporary)
    return [_read(file)]


def _read(file: Path) -> bytes:
    """The key in a key file; FileNotFoundError when there is none yet, ValueError naming it when it is short or
    cannot be read (a state volume owned by another user, say)."""
    try:
        key = file.read_text(encoding="utf-8", errors="replace").strip().encode()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ValueError(
            f"cannot read the key file {file}: {exc.strerror or exc}; the state directory (gateway.state_dir) must "
            "hold it as a file that the gateway's user can read"
        ) from None
    if len(key) < MIN_KEY:
        held = "is empty" if not key else f"holds {len(key)} characters"
        raise ValueError(
            f"the key file {file} {held}, fewer than {MIN_KEY} characters: restore it from a backup, or delete it "
            "so that a new key is made at the next start (what the old key signed will no longer verify)"
        )
    return key
