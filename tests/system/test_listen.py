"""serve's own listening socket: connections on it send small answers at once."""

from __future__ import annotations

import asyncio
import socket

from gateway.http.listen import bound_socket


def test_a_connection_on_the_bound_socket_sends_without_waiting_for_acks() -> None:
    # asyncio turns Nagle's algorithm off (TCP_NODELAY) only where the socket names IPPROTO_TCP; without it each
    # small answer waited for the client's delayed ACK, ~40 ms per call.
    async def main() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        sock = bound_socket("127.0.0.1", 0)
        server = await asyncio.start_server(accepted, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            nodelay = await asyncio.wait_for(seen, 10)
            writer.close()
        return nodelay

    assert asyncio.run(main()) != 0
