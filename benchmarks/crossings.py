"""Layer crossings of one request: calls between the transport and the core, counted.

    .venv/bin/python benchmarks/crossings.py [--json FILE]

Serves the test-only demo app in this process, under a profiler (``sys.setprofile``), and
counts, while one request is served, every call whose caller runs in one of
``fsnotes/transport/``, ``fsnotes/runtime/``, ``fsnotes/protocol/`` and whose callee runs in
another; plus what the connection's ``receive_*`` hands the transport back (``Write``,
``Job``). A coroutine counts once, when it starts (its resumptions are not calls). Three
requests: a 2025-11-25 ``tools/call`` that asks the user once (a live ``elicitation/create``,
answered on the next line) and the same call of a tool that asks nothing, both over stdio
(the real ``_StdioServer`` on two pipes), and a 2026-07-28 ``tools/call`` over Streamable HTTP
(the real ``/mcp`` endpoint, driven as an ASGI app without a socket).

Not a timed benchmark: nothing here is measured in seconds (the profiler slows everything).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from fsnotes.security.tokens import Identity

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LAYERS = ("transport", "runtime", "protocol")


def _layer(path: str) -> str | None:
    for name in LAYERS:
        if f"{os.sep}fsnotes{os.sep}{name}{os.sep}" in path:
            return name
    return None


class Crossings:
    """A profiler hook counting calls from one layer into another while :attr:`on`."""

    def __init__(self) -> None:
        self.on = False
        self.edges: Counter[tuple[str, str, str]] = Counter()
        self._started: dict[int, FrameType] = {}  # coroutine frames already counted

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on:
            return
        name = frame.f_code.co_name
        if event == "return" and name in ("receive_line", "receive_parsed"):
            for item in arg if isinstance(arg, list) else ():
                self.edges[("runtime", "transport", f"hands back {type(item).__name__}")] += 1
            return
        if event != "call" or self._started.get(id(frame)) is frame:
            return
        self._started[id(frame)] = frame
        caller = frame.f_back
        if caller is None:
            return
        a, b = _layer(caller.f_code.co_filename), _layer(frame.f_code.co_filename)
        if a and b and a != b:
            self.edges[(a, b, f"{caller.f_code.co_name} -> {name}")] += 1

    def totals(self) -> dict[str, int]:
        into_core = sum(n for (a, b, _), n in self.edges.items() if a == "transport")
        into_transport = sum(n for (a, b, _), n in self.edges.items() if b == "transport")
        inside = sum(n for (a, b, _), n in self.edges.items() if "transport" not in (a, b))
        return {
            "transport -> core": into_core,
            "core -> transport": into_transport,
            "protocol <-> runtime": inside,
        }


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


async def over_stdio(tool: str, arguments: dict[str, Any]) -> Crossings:
    from fsnotes.runtime.connection import ServerConnection
    from fsnotes.transport.stdio import _StdioServer
    from tests.servers.demo_server import build_app

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(out_r, False)
    buffer = b""

    async def read() -> dict[str, Any]:
        nonlocal buffer
        with anyio.fail_after(10):
            while b"\n" not in buffer:
                try:
                    buffer += os.read(out_r, 65536)
                except BlockingIOError:
                    await anyio.wait_readable(out_r)
        line, buffer = buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    counted = Crossings()
    server = _StdioServer(ServerConnection(build_app(), principal="bench"), in_r, out_w)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run)
            caps = {"elicitation": {"form": {}}}
            init = {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {}}
            os.write(
                in_w, _line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            )
            await read()
            os.write(in_w, _line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            await anyio.sleep(0.05)
            sys.setprofile(counted)
            counted.on = True
            params = {"name": tool, "arguments": arguments}
            os.write(
                in_w, _line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
            )
            message = await read()
            if message.get("method") == "elicitation/create":
                answer = {"action": "accept", "content": {"ok": True}}
                os.write(in_w, _line({"jsonrpc": "2.0", "id": message["id"], "result": answer}))
                message = await read()
            counted.on = False
            sys.setprofile(None)
            assert message.get("id") == 1 and "result" in message, message
            os.close(in_w)
            in_w = -1
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            if fd >= 0:
                os.close(fd)
    return counted


class _Anyone:
    async def authenticate(self, headers: Any) -> Identity:
        from fsnotes.security.tokens import Identity

        return Identity("bench")


async def over_http() -> Crossings:
    from fsnotes.transport.http import McpEndpoint
    from fsnotes.transport.http_settings import HttpSettings
    from tests.servers.demo_server import build_app

    endpoint = McpEndpoint(build_app(), HttpSettings(port=8000), _Anyone(), port=8000)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    raw = body.encode()
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"authorization", b"Bearer any"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-length", str(len(raw)).encode()),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"echo"),
    ]
    sent: list[dict[str, Any]] = []
    delivered = anyio.Event()
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": raw, "more_body": False}
        await delivered.wait()  # the client stays until its answer is written
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    counted = Crossings()
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    sys.setprofile(counted)
    counted.on = True
    await endpoint(scope, receive, send)
    counted.on = False
    sys.setprofile(None)
    delivered.set()
    answer = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert sent[0]["status"] == 200 and "result" in answer, answer
    return counted


async def walk() -> dict[str, Crossings]:
    return {
        "stdio 2025-11-25 tools/call with one live elicitation": await over_stdio(
            "confirm", {"title": "x"}
        ),
        "stdio 2025-11-25 tools/call asking nothing": await over_stdio("echo", {"text": "hi"}),
        "http 2026-07-28 tools/call": await over_http(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the counts to this file")
    args = parser.parse_args()
    results = anyio.run(walk)
    out: dict[str, Any] = {}
    for name, counted in results.items():
        totals = counted.totals()
        print(f"\n{name}: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
        for (a, b, what), n in sorted(counted.edges.items()):
            print(f"  {a:>9} -> {b:<9} {n}x {what}")
        out[name] = {
            "totals": totals,
            "edges": [[a, b, what, n] for (a, b, what), n in sorted(counted.edges.items())],
        }
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
