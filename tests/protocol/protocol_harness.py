"""Drive a ServerConnection with no I/O: feed messages, collect the messages it would write.

The harness does with what the connection gives what the stdio transport does (writes a
message at once; runs each job as a task of one group), but "writing" appends to a list, so
tests assert on exact messages. Cancellation and the client's answers to our requests are the
runner's own: the harness sees neither.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from fsnotes.runtime.connection import Out, ServerConnection, Write

MODERN = "2026-07-28"


def meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A modern ``_meta`` envelope declaring ``caps`` (default: none)."""
    out: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps if caps is not None else {},
        "io.modelcontextprotocol/clientInfo": {"name": "unit", "version": "1"},
    }
    out.update(extra)
    return out


def request(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def sends(outs: list[Out]) -> list[dict[str, Any]]:
    """The messages among ``outs`` (for synchronous answers)."""
    return [o.message for o in outs if isinstance(o, Write)]


class Harness:
    def __init__(self, conn: ServerConnection, tg: anyio.abc.TaskGroup) -> None:
        self.conn = conn
        self.tg = tg
        self.out: list[dict[str, Any]] = []
        # While set, writes of encoded answers wait for it (a client that does not read).
        self.stalled: anyio.Event | None = None

    # Peer
    async def send(self, message: dict[str, Any]) -> None:
        # Round-trip through JSON so tests see exactly what the wire would carry.
        self.out.append(json.loads(json.dumps(message)))

    async def answer(self, line: bytes, error_code: int | None) -> None:
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        while self.stalled is not None:
            await self.stalled.wait()
        self.out.append(json.loads(line))

    def stall(self) -> None:
        """Hold every write of an encoded answer until :meth:`resume`."""
        self.stalled = anyio.Event()

    def resume(self) -> None:
        stalled, self.stalled = self.stalled, None
        if stalled is not None:
            stalled.set()

    def feed(self, message: Any) -> None:
        self.perform(self.conn.receive_line(json.dumps(message).encode()))

    def perform(self, outs: list[Out]) -> None:
        for out in outs:
            if isinstance(out, Write):
                self.out.append(json.loads(json.dumps(out.message)))
            else:
                self.tg.start_soon(out.run, self)

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 3.0
    ) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            while True:
                for msg in self.out:
                    if predicate(msg):
                        return msg
                await anyio.sleep(0.001)

    async def response(self, rid: Any, timeout: float = 3.0) -> dict[str, Any]:
        return await self.wait_for(
            lambda m: m.get("id") == rid and ("result" in m or "error" in m), timeout
        )

    async def call(self, message: dict[str, Any], timeout: float = 3.0) -> dict[str, Any]:
        self.feed(message)
        return await self.response(message["id"], timeout)

    async def settle(self) -> None:
        """Let started tasks run to their next wait."""
        for _ in range(20):
            await anyio.sleep(0)


@asynccontextmanager
async def running(conn: ServerConnection) -> AsyncIterator[Harness]:
    async with anyio.create_task_group() as tg:
        harness = Harness(conn, tg)
        yield harness
        tg.cancel_scope.cancel()
