"""The stdio transport around the runner, over real pipes: a live elicitation answered on the
next line, withdrawn when its request is cancelled, and given up when stdin ends while it
waits (the server answers "no answer" within the EOF grace and exits). The transport keeps no
waiter of its own: the client's answer goes to the runner's table.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from fsnotes.transport.stdio import EOF_GRACE_S, serve_stdio
from tests.servers.demo_server import build_app

pytestmark = pytest.mark.anyio

FORM_CAPS = {"elicitation": {"form": {}}}


class Client:
    """The client's ends of the server's stdin and stdout."""

    def __init__(self, to_server: int, from_server: int) -> None:
        self.to_server = to_server
        self.from_server = from_server
        self._buffer = b""
        os.set_blocking(from_server, False)

    def send(self, message: dict[str, Any]) -> None:
        os.write(self.to_server, (json.dumps(message) + "\n").encode())

    def close(self) -> None:
        os.close(self.to_server)
        self.to_server = -1

    async def read(self, timeout: float = 5.0) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while b"\n" not in self._buffer:
                try:
                    chunk = os.read(self.from_server, 65536)
                except BlockingIOError:
                    await anyio.wait_readable(self.from_server)
                    continue
                if not chunk:
                    raise EOFError("the server closed stdout")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def unread(self) -> bytes:
        """What the server wrote that was not read yet (without waiting)."""
        try:
            return self._buffer + os.read(self.from_server, 65536)
        except BlockingIOError:
            return self._buffer

    async def initialize(self) -> None:
        params = {"protocolVersion": "2025-11-25", "capabilities": FORM_CAPS, "clientInfo": {}}
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert (await self.read())["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def confirm(self, rid: int, title: str) -> None:
        params = {"name": "confirm", "arguments": {"title": title}}
        self.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


@asynccontextmanager
async def stdio_server() -> AsyncIterator[tuple[Client, anyio.Event]]:
    """The demo app served over stdio on two pipes; the event is set once the server ended."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    client = Client(in_w, out_r)
    ended = anyio.Event()

    async def serve() -> None:
        try:
            await serve_stdio(build_app(), principal="unit", stdin_fd=in_r, stdout_fd=out_w)
        finally:
            ended.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            yield client, ended
            if client.to_server >= 0:
                client.close()
            with anyio.fail_after(5):
                await ended.wait()
    finally:
        for fd in (in_r, out_r, out_w):
            os.close(fd)


async def test_a_live_elicitation_answered_on_the_next_line_resumes_its_call() -> None:
    async with stdio_server() as (client, _ended):
        await client.initialize()
        client.confirm(1, "groceries")
        ask = await client.read()
        assert ask["method"] == "elicitation/create" and isinstance(ask["id"], int)
        answer = {"action": "accept", "content": {"ok": True}}
        client.send({"jsonrpc": "2.0", "id": ask["id"], "result": answer})
        done = await client.read()
        assert done["id"] == 1 and done["result"]["structuredContent"] == {"deleted": True}
        # A second answer to the same request of ours is ignored; the server serves on.
        client.send({"jsonrpc": "2.0", "id": ask["id"], "result": answer})
        client.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert await client.read() == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_a_cancelled_call_withdraws_its_live_elicitation_and_answers_nothing() -> None:
    async with stdio_server() as (client, _ended):
        await client.initialize()
        client.confirm(1, "x")
        ask = await client.read()
        cancel = {"requestId": 1, "reason": "the user moved on"}
        client.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        withdrawn = await client.read()
        assert withdrawn["method"] == "notifications/cancelled"
        assert withdrawn["params"]["requestId"] == ask["id"]
        client.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        # Nothing for request 1 comes before the ping's answer (nor after: the call is gone).
        assert await client.read() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        client.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}})
        client.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert (await client.read())["id"] == 3


async def test_stdin_closed_while_a_live_elicitation_waits_answers_it_and_exits() -> None:
    async with stdio_server() as (client, ended):
        await client.initialize()
        client.confirm(1, "x")
        assert (await client.read())["method"] == "elicitation/create"
        start = anyio.current_time()
        client.close()
        done = await client.read()
        assert done["id"] == 1 and done["result"]["isError"] is True
        assert "did not answer" in done["result"]["content"][0]["text"]
        with anyio.fail_after(EOF_GRACE_S + 3):
            await ended.wait()
        # Within the grace: the wait ended at EOF, not at the input timeout.
        assert anyio.current_time() - start < EOF_GRACE_S + 3
        # The client is gone: no withdrawal of our request is written after the EOF.
        assert client.unread() == b""
