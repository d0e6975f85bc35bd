"""The listening socket of ``serve``, bound before anything else starts.

Binding first means a port already in use is reported in one sentence before the backend is spawned or the
store opened, and "listening" is logged only once it is true.
"""

from __future__ import annotations

import errno
import socket


class ListenError(Exception):
    """The address cannot be listened on; the message says what to do."""


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (uvicorn listens on it); ListenError with one sentence if it cannot be."""
    # As uvicorn binds when it makes the socket itself: IPv6 for an address with a colon, else IPv4. The protocol
    # is named: asyncio sets TCP_NODELAY only on connections whose socket says IPPROTO_TCP, and without it every
    # small answer waited ~40 ms for the client's delayed ACK (Nagle).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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
