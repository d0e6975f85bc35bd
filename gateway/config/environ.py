"""Secrets from the environment, the container way: an environment variable ``NAME``, or the file that
``NAME_FILE`` names (a mounted Kubernetes Secret, a compose or swarm secret under ``/run/secrets/``), so a secret
need be neither in the config file nor in the environment that ``ps e`` and ``podman inspect`` show.

    secret(NAME)    NAME's value, else the content of the file $NAME_FILE without its final line break; None
                    when neither is set; SecretError (naming both) when both are set, or naming the file when it
                    cannot be read or is empty (a Secret whose value was never filled in is refused, not taken
                    as "unset": a ring left empty would otherwise fall back to a key of this replica's own)
    is_set(NAME)    whether either is set
    current(NAME)   as secret(), read again at each use (a rotated Secret file is picked up), "" when unset; a
                    file that became unreadable since start is logged by name and reads as ""

Start-up checks that every secret the config names can be read (gateway.identity.secrets.secret_refusal), so
``check`` and ``serve`` refuse a missing file at once, naming the variable.

Every secret the serving gateway reads comes through here (docs/configuration.md, "Secrets"): the key rings
``GATEWAY_SECRET_KEY`` and ``GATEWAY_AUDIT_KEY``, the store's password ``GATEWAY_STORE_PASSWORD``, and each
variable a config key ending in ``_env`` names (OIDC and introspection client secrets, webhook secrets, a backend's
headers, token hashes).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

FILE_SUFFIX = "_FILE"
log = logging.getLogger(__name__)


class SecretError(ValueError):
    """A secret's variables are set both ways, or its file cannot be read; the message names them."""


def secret(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The secret ``name`` from the environment or from the file ``name_FILE`` names; None when neither is set."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    path = env.get(name + FILE_SUFFIX)
    if path is None or path == "":
        return value
    if value is not None and value != "":
        raise SecretError(f"{name} and {name}{FILE_SUFFIX} are both set: keep one of them")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SecretError(f"{name}{FILE_SUFFIX}: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SecretError(f"{name}{FILE_SUFFIX}: {path} is not UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise SecretError(f"{name}{FILE_SUFFIX}: {path} is empty (a secret not filled in?)")
    return text


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the secret ``name`` is given, by its variable or by a file."""
    env = os.environ if environ is None else environ
    return bool(env.get(name) or env.get(name + FILE_SUFFIX))


def current(name: str) -> str:
    """The secret ``name`` as it is now ("" when unset or unreadable, which is logged, never the value)."""
    try:
        return secret(name) or ""
    except SecretError as exc:
        log.warning("%s", exc)
        return ""
