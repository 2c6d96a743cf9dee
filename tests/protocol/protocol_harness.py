"""Drive a ServerConnection with no I/O: feed messages, collect the messages it would write.

The harness performs the core's actions the way the stdio transport does (tasks in a task
group, each in its own cancel scope; replies delivered to waiters), but "writing" appends to a
list, so tests assert on exact messages.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from fsnotes.protocol.connection import (
    Action,
    CancelTask,
    DeliverReply,
    Peer,
    Send,
    ServerConnection,
    StartTask,
    TaskKey,
)

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


def sends(actions: list[Action]) -> list[dict[str, Any]]:
    """The messages among ``actions`` (for synchronous answers)."""
    return [a.message for a in actions if isinstance(a, Send)]


class Harness:
    def __init__(self, conn: ServerConnection, tg: anyio.abc.TaskGroup) -> None:
        self.conn = conn
        self.tg = tg
        self.out: list[dict[str, Any]] = []
        self.scopes: dict[TaskKey, anyio.CancelScope] = {}
        self.waiters: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        # While set, writes of encoded answers wait for it (a client that does not read).
        self.stalled: anyio.Event | None = None

    # Peer
    async def send(self, message: dict[str, Any]) -> None:
        # Round-trip through JSON so tests see exactly what the wire would carry.
        self.out.append(json.loads(json.dumps(message)))

    async def write(self, line: bytes) -> None:
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

    async def request(self, request_id: int, message: dict[str, Any], timeout: float) -> Any:
        event = anyio.Event()
        box: list[dict[str, Any]] = []
        self.waiters[request_id] = (event, box)
        try:
            await self.send(message)
            with anyio.move_on_after(timeout):
                await event.wait()
            return box[0] if box else None
        finally:
            self.waiters.pop(request_id, None)

    def feed(self, message: Any) -> None:
        self.perform(self.conn.receive_line(json.dumps(message).encode()))

    def perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                self.out.append(json.loads(json.dumps(action.message)))
            elif isinstance(action, StartTask):
                scope = anyio.CancelScope()
                self.scopes[action.key] = scope
                self.tg.start_soon(self._run, scope, action.run)
            elif isinstance(action, CancelTask):
                self.scopes[action.key].cancel()
            elif isinstance(action, DeliverReply):
                event, box = self.waiters[action.request_id]
                box.append(action.message)
                event.set()

    async def _run(self, scope: anyio.CancelScope, run: Callable[[Peer], Any]) -> None:
        with scope:
            await run(self)

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
