"""The real server process under hostile or careless input: it answers what it must, skips what
it must, keeps serving, keeps its memory bounded, and exits cleanly on EOF and SIGTERM."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from fsnotes.protocol.limits import MAX_BATCH_MEMBERS, MAX_LINE_BYTES
from tests.interop.interop_support import server_command

pytestmark = [pytest.mark.anyio, pytest.mark.interop, pytest.mark.timeout(90)]

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
MIB = 1024 * 1024


class RawServer:
    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None and process.stdin is not None
        self.stdin = process.stdin
        self.stdout = BufferedByteReceiveStream(process.stdout)

    async def write(self, data: bytes) -> None:
        await self.stdin.send(data)

    async def send(self, message: Any) -> None:
        await self.write(json.dumps(message).encode() + b"\n")

    async def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            line = await self.stdout.receive_until(b"\n", 10 * MIB)
        parsed: dict[str, Any] = json.loads(line)  # stdout carries only JSON messages
        return parsed

    async def response(self, rid: Any, timeout: float = 10.0) -> dict[str, Any]:
        while True:
            msg = await self.recv(timeout)
            if msg.get("id") == rid and "method" not in msg:
                return msg

    async def collect_until(self, rid: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Every message up to and including the response to ``rid``."""
        seen: list[dict[str, Any]] = []
        while True:
            msg = await self.recv(timeout)
            seen.append(msg)
            if msg.get("id") == rid and "method" not in msg:
                return seen

    async def ping_ok(self, rid: str = "alive") -> None:
        await self.send({"jsonrpc": "2.0", "id": rid, "method": "ping"})
        assert (await self.response(rid))["result"] == {}

    async def initialize(self, version: str) -> None:
        params = {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        await self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params})
        assert (await self.response("init"))["result"]["protocolVersion"] == version
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def memory_kib(self) -> dict[str, int]:
        fields: dict[str, int] = {}
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    fields[key] = int(value.split()[0])
        return fields

    async def stderr_text(self) -> str:
        assert self.process.stderr is not None
        chunks = []
        with anyio.move_on_after(2):
            async for chunk in self.process.stderr:
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")


@asynccontextmanager
async def spawn() -> AsyncIterator[RawServer]:
    process = await anyio.open_process(server_command())
    try:
        yield RawServer(process)
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.move_on_after(5):
            await process.wait()


def call(rid: Any, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": {**MODERN_META, **meta}},
    }


async def test_garbage_batches_bad_utf8_and_stray_responses_never_stop_the_server() -> None:
    async with spawn() as server:
        await server.write(b"this is not json\n")
        assert (await server.recv())["error"]["code"] == -32700
        await server.write(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff"}\n')
        assert (await server.recv())["error"]["code"] == -32700
        await server.send([{"jsonrpc": "2.0", "id": 2, "method": "ping"}])
        batch = await server.recv()
        assert batch["error"]["code"] == -32600 and "id" not in batch
        await server.send({"id": 3, "method": "ping"})
        assert (await server.recv()) == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32600, "message": 'Invalid request: "jsonrpc" must be "2.0"'},
        }
        await server.send({"jsonrpc": "2.0", "id": 77, "result": {"unsolicited": True}})
        await server.send({"jsonrpc": "2.0", "method": "notifications/unknown"})
        await server.write(b"\n\n   \n")
        await server.ping_ok()


async def test_a_50_mib_line_is_refused_and_skipped_with_bounded_memory() -> None:
    async with spawn() as server:
        await server.ping_ok("warm")
        before = server.memory_kib()
        head = (
            b'{"jsonrpc":"2.0","id":"big","method":"tools/call",'
            b'"params":{"name":"echo","arguments":{"text":"'
        )
        chunk = b"a" * MIB
        await server.write(head)
        for _ in range(50):
            await server.write(chunk)
        await server.write(b'"}}}\n')
        refused = await server.recv(timeout=30)
        assert "id" not in refused and refused["error"]["code"] == -32600
        assert str(MAX_LINE_BYTES) in refused["error"]["message"]
        await server.send(call("after", "echo", {"text": "still here"}))
        assert (await server.response("after"))["result"]["structuredContent"] == {
            "text": "still here"
        }
        after = server.memory_kib()
        growth_mib = (after["VmHWM"] - before["VmRSS"]) / 1024
        print(f"memory before={before} after={after} peak growth={growth_mib:.1f} MiB")
        # Holding the line would add at least 50 MiB; skipping it costs the line limit at most.
        assert growth_mib < MAX_LINE_BYTES / MIB + 8, (before, after)


@pytest.mark.parametrize("size", [1_200_000, 8_000_000], ids=["1.2MB", "8MB"])
async def test_a_huge_2025_03_26_batch_gets_one_error_with_bounded_memory(size: int) -> None:
    # 2025-03-26 is the one revision with batches. A line of tiny members used to become one
    # reply per member, all built before the first was written: 1.2 MB held 287 MiB.
    async with spawn() as server:
        await server.initialize("2025-03-26")
        await server.ping_ok("warm")
        before = server.memory_kib()
        line = b"[" + b"1," * (size // 2 - 1) + b"1]\n"
        after: list[dict[str, int]] = []
        for round_ in range(3):
            await server.write(line)
            await server.send({"jsonrpc": "2.0", "id": round_, "method": "ping"})
            refused = await server.recv(timeout=30)
            assert "id" not in refused and refused["error"]["code"] == -32600, refused
            assert str(MAX_BATCH_MEMBERS) in refused["error"]["message"]
            assert await server.recv(timeout=30) == {"jsonrpc": "2.0", "id": round_, "result": {}}
            after.append(server.memory_kib())
        print(f"{len(line)} B batch: before={before} after={after}")
        peak = (after[-1]["VmHWM"] - before["VmRSS"]) * 1024
        # Parsing the line costs a few times its size while it lasts (the bytes, the decoded
        # text, the list: about 6x for this shape; any line of this shape costs as much, batch
        # or not), and three lines in a row peak no higher than one: nothing stacks up.
        assert peak < 10 * len(line), (before, after)


async def test_two_hundred_concurrent_requests_all_answered() -> None:
    async with spawn() as server:
        payload = b"".join(
            json.dumps(call(i, "slow", {"steps": 1, "delay": 0.2})).encode() + b"\n"
            for i in range(200)
        )
        started = time.monotonic()
        await server.write(payload)
        seen: set[int] = set()
        while len(seen) < 200:
            msg = await server.recv(timeout=20)
            if "id" in msg:
                assert msg["result"]["content"][0]["text"] == "done 1", msg
                seen.add(msg["id"])
        # Handled concurrently: 200 sequential calls would take 40 s.
        assert time.monotonic() - started < 10
        assert seen == set(range(200))
        await server.ping_ok()


async def test_cancellation_mid_call_sends_nothing_for_it_and_server_keeps_serving() -> None:
    async with spawn() as server:
        await server.send(call("long", "slow", {"steps": 100, "delay": 0.05}, progressToken="t"))
        first = await server.recv()
        assert first["method"] == "notifications/progress"
        await server.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}}
        )
        await anyio.sleep(0.5)  # the call would have sent ~10 more progress notifications
        await server.send({"jsonrpc": "2.0", "id": "p", "method": "ping"})
        seen = await server.collect_until("p")
        assert not any(m.get("id") == "long" for m in seen)
        # At most a notification already on its way when the cancel arrived; then silence.
        assert len([m for m in seen if m.get("method") == "notifications/progress"]) <= 1
        await server.ping_ok()


async def test_stdin_closed_mid_call_exits_promptly_and_quietly() -> None:
    async with spawn() as server:
        await server.send(call("long", "slow", {"steps": 200, "delay": 0.05}))
        await anyio.sleep(0.2)
        started = time.monotonic()
        await server.stdin.aclose()
        with anyio.fail_after(5):
            code = await server.process.wait()
        assert time.monotonic() - started < 3
        assert code == 0
        assert "Traceback" not in await server.stderr_text()


async def test_sigterm_mid_call_exits_promptly_and_quietly() -> None:
    async with spawn() as server:
        await server.send(call("long", "slow", {"steps": 200, "delay": 0.05}))
        await anyio.sleep(0.3)
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(5):
            code = await server.process.wait()
        assert time.monotonic() - started < 2
        assert code == 0
        assert "Traceback" not in await server.stderr_text()


async def test_a_piped_request_with_immediate_eof_still_gets_its_answer() -> None:
    async with spawn() as server:
        await server.send(call(1, "echo", {"text": "once"}))
        await server.stdin.aclose()
        assert (await server.response(1))["result"]["structuredContent"] == {"text": "once"}
        with anyio.fail_after(5):
            assert await server.process.wait() == 0


async def test_stray_print_in_a_handler_cannot_reach_stdout() -> None:
    # serve_stdio points fd 1 at stderr while serving; every stdout line must be a message.
    async with spawn() as server:
        await server.send(call(0, "fail", {"kind": "print"}))
        printed = await server.recv()  # json.loads would fail on a stray "print" line
        assert printed["id"] == 0 and printed["result"]["isError"] is False
        await server.send(call(1, "fail", {"kind": "crash"}))
        crash = await server.response(1)
        assert crash["result"]["content"][0]["text"] == "Internal error"
        assert "secret internal detail" not in json.dumps(crash)
        await server.ping_ok()
