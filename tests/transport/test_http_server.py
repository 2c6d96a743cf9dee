"""The HTTP server around the endpoint (fsnotes/transport/http_server.py): its listening socket."""

from __future__ import annotations

import asyncio
import socket

import pytest

from fsnotes.transport.http_server import HttpUnavailable, bind


def test_accepted_connections_send_without_nagle_delays() -> None:
    # asyncio turns Nagle's algorithm off only on sockets whose protocol is TCP; a listening
    # socket made with protocol 0 passes that on, and every answer written in two parts (head,
    # body) then waits for the client's delayed ACK: about 40 ms per request on Linux.
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    seen: list[int] = []

    async def main() -> None:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            server_side = writer.get_extra_info("socket")
            seen.append(server_side.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=sock)
        async with server:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(main())
    assert seen and seen[0] != 0


def test_a_taken_port_is_refused_with_a_reason() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(HttpUnavailable, match="already in use"):
            bind("127.0.0.1", port)


def test_an_address_not_on_this_machine_is_refused_with_a_reason() -> None:
    with pytest.raises(HttpUnavailable, match="not on this machine"):
        bind("192.0.2.1", 0)  # TEST-NET-1: never assigned here
