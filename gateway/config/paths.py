"""Where a config's paths point, and where the gateway keeps its state.

A relative path in a config file means "beside this file", whatever the working directory: a desktop host
starts the gateway in ``/``, a service manager somewhere else, and both must find the same database. The
built-in config (used when ``serve`` gets no ``--config``) lives inside the installed package, which is no place
for state, so its paths resolve against the platform's state directory (XDG on Linux) instead.

    gateway.state_dir        unset: ``var`` beside the config (the built-in config: the platform state dir)
    gateway.store            ``sqlite:PATH`` with a relative PATH; ``{state_dir}`` is replaced
    auth.jwt.public_key_file a relative file
    audit_stream.file        a relative file
    backend.cwd              where a stdio backend starts; unset: the config's folder

A backend's arguments are its own: which of them are paths is not knowable in general (``--db x`` is a path,
``--name x`` is not), so the gateway never guesses. Two explicit rules instead. The stdio child starts in
``backend.cwd``, so its relative arguments mean what the config's own relative paths mean (the demo's
``--db var/legacy.db`` lands beside the config). And ``{state_dir}`` and ``{python}`` (the gateway's own
interpreter, so a Python backend runs without a venv on PATH) are replaced in ``backend.command``,
``backend.args`` and ``backend.env``; other braces are left as they are.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gateway.config.sections import AuditStreamSection, AuthSection, BackendSection, GatewaySection

APP = "mcp-safety-gateway"


def platform_state_dir() -> Path:
    """This user's state directory for the gateway: $XDG_STATE_HOME (or ~/.local/state) on Linux and other
    Unixes, ~/Library/Application Support on macOS, %LOCALAPPDATA% on Windows."""
    if sys.platform == "win32":
        root = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        root = Path.home() / "Library" / "Application Support"
    else:
        xdg = os.environ.get("XDG_STATE_HOME", "")
        # The XDG spec says to ignore a relative value.
        root = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return root / APP


def against(base: Path, path: str) -> str:
    """``path`` as an absolute path, a relative one taken from ``base``."""
    return str(base / Path(path).expanduser())


def placeholders(state_dir: str) -> dict[str, str]:
    """The names a backend's command, args and env may use."""
    return {"{state_dir}": state_dir, "{python}": sys.executable}


def fill(text: str, names: dict[str, str]) -> str:
    """Replace each known placeholder in ``text``."""
    for name, value in names.items():
        text = text.replace(name, value)
    return text


def resolve_gateway(section: GatewaySection, base: Path, default_state: Path) -> GatewaySection:
    """The gateway section with an absolute state directory and store path."""
    state_dir = against(base, section.state_dir) if section.state_dir is not None else str(default_state)
    store = section.store.replace("{state_dir}", state_dir)
    if store.startswith("sqlite:"):
        store = "sqlite:" + against(base, store.removeprefix("sqlite:"))
    return section.model_copy(update={"state_dir": state_dir, "store": store})


def resolve_backend(section: BackendSection, base: Path, state_dir: str) -> BackendSection:
    """The backend section with its placeholders filled and its working directory absolute."""
    names = placeholders(state_dir)
    command = section.command
    if command is not None:
        command = fill(command, names)
        if os.sep in command or "/" in command:  # a relative path to a program, not a name looked up on PATH
            command = against(base, command)
    return section.model_copy(
        update={
            "command": command,
            "args": [fill(arg, names) for arg in section.args],
            "env": {key: fill(value, names) for key, value in section.env.items()},
            "cwd": against(base, section.cwd) if section.cwd is not None else str(base),
        }
    )


def resolve_auth(section: AuthSection, base: Path) -> AuthSection:
    """The auth section with an absolute public key file."""
    jwt = section.jwt
    if jwt is None or jwt.public_key_file is None:
        return section
    return section.model_copy(
        update={"jwt": jwt.model_copy(update={"public_key_file": against(base, jwt.public_key_file)})}
    )


def resolve_audit_stream(section: AuditStreamSection, base: Path) -> AuditStreamSection:
    """The audit stream section with an absolute file."""
    if section.file is None:
        return section
    return section.model_copy(update={"file": against(base, section.file)})


def where_state_lives(section: GatewaySection, secret_from_env: bool) -> str:
    """One line for the start-up log: the store (credentials left out) and the state directory."""
    store = section.store
    if "://" in store:
        scheme, _, rest = store.partition("://")
        store = f"{scheme}://{rest.rpartition('@')[2]}"
    key = "keys from GATEWAY_SECRET_KEY" if secret_from_env else f"secret key {section.state_path() / 'secret.key'}"
    return f"state: store {store}; {key}; state_dir {section.state_path()}"
