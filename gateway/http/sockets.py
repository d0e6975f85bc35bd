"""The listening socket of ``serve``, bound before anything else starts, and the stdio approval page's kept port.

Binding first means a port already in use is reported in one sentence before the backend is spawned or the
store opened, and "listening" is logged only once it is true. The page beside a stdio gateway keeps its port in
the state directory (``kept_port_socket``): the first one derived from the directory's path, then whichever it
bound, so the links it gave out keep working when the desktop host restarts the gateway.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import socket
from pathlib import Path

log = logging.getLogger(__name__)

KEPT_PORT_FILE = "approval-page.port"
"""Where the stdio gateway's approval page keeps its port, in the state directory."""
FIRST_PORTS = range(20000, 30000)
"""Where a state directory's first port is taken from: below the kernel's ephemeral ports (32768 on), above the
well-known ones, so that no outgoing connection holds it by chance."""


class ListenError(Exception):
    """The address cannot be listened on; the message says what to do."""


def bound_socket(host: str, port: int, *, shared: bool = False) -> socket.socket:
    """A TCP socket bound to ``host:port`` (uvicorn listens on it); ListenError with one sentence if it cannot be.
    ``shared``: with SO_REUSEPORT, so that each worker of ``serve --workers N`` listens on a socket of its own on
    the one port, and the kernel spreads new connections evenly over them (gateway/cli/workers.py)."""
    # As uvicorn binds when it makes the socket itself: IPv6 for an address with a colon, else IPv4. The protocol
    # is named: asyncio sets TCP_NODELAY only on connections whose socket says IPPROTO_TCP, and without it every
    # small answer waited ~40 ms for the client's delayed ACK (Nagle).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except socket.gaierror:
        sock.close()
        raise ListenError(f"cannot listen on {host}: no such address (check --host)") from None
    except OverflowError:
        sock.close()
        raise ListenError(f"{port} is not a port number: give one in 0-65535") from None
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(
                f"port {port} on {host} is already in use (another gateway?): stop it, or pick another --port"
            ) from None
        if exc.errno == errno.EACCES:
            raise ListenError(f"not allowed to listen on port {port}: pick one above 1023 with --port") from None
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def kept_port_socket(state_dir: Path, host: str) -> socket.socket:
    """A socket on ``host`` at the port kept in ``state_dir`` (the first time: one derived from its path), or,
    when that port is taken, at a free one, which is kept from then on."""
    file = state_dir / KEPT_PORT_FILE
    try:
        kept: int | None = int(file.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        kept = None
    if kept is not None and not 1024 <= kept <= 65535:
        kept = None
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).digest()
    wanted = kept if kept is not None else FIRST_PORTS[int.from_bytes(digest[:4], "big") % len(FIRST_PORTS)]
    try:
        sock = bound_socket(host, wanted)
    except ListenError:
        sock = bound_socket(host, 0)
        if kept is not None:
            log.warning(
                "the approval page's port %d (kept in %s) is taken; serving it on %d from now on: links given out "
                "before this start point at the old port",
                kept,
                file,
                sock.getsockname()[1],
            )
    port = sock.getsockname()[1]
    if port != kept:
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            file.write_text(f"{port}\n", encoding="ascii")
        except OSError as exc:
            log.warning("cannot keep the approval page's port in %s (%s): it may move at the next start", file, exc)
    return sock
