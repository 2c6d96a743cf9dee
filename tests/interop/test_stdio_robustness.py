"""The real server process under hostile or careless input: it answers what it must, skips what
it must, keeps serving, keeps its memory bounded, and exits cleanly on EOF and SIGTERM."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import termios
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from fsnotes.notes.store import MAX_NOTE_BYTES
from fsnotes.protocol.limits import (
    MAX_BATCH_MEMBERS,
    MAX_IN_FLIGHT_BYTES,
    MAX_LINE_BYTES,
    MAX_LINE_VALUES,
    MAX_PENDING_ANSWER_BYTES,
)
from fsnotes.transport.stdio import EOF_GRACE_S, MAX_WORKER_THREADS, WRITE_STALL_S
from tests.interop.interop_support import REPO, server_command
from tests.protocol.shapes import code_note

pytestmark = [pytest.mark.anyio, pytest.mark.interop, pytest.mark.timeout(90)]

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
MIB = 1024 * 1024

# What a client that does not read stdout may make the server hold beyond its resting size, when
# it asks for a 4 MiB note of ASCII code many times: the answers waiting to be written
# (MAX_PENDING_ANSWER_BYTES), the one answer being encoded (about 7 times the note: the note, its
# JSON text block, the encoded line and its copy) and the worker threads reading the note (each
# about 4.2 times the note: the file's bytes, its text, the Markdown analysis). See limits.py.
PENDING_ANSWERS_BOUND = MAX_PENDING_ANSWER_BYTES + (7 + 5 * MAX_WORKER_THREADS) * MAX_NOTE_BYTES


def memory_kib(pid: int) -> dict[str, int]:
    """The process's peak (VmHWM) and current (VmRSS) resident memory, in KiB."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                fields[key] = int(value.split()[0])
    return fields


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def until_idle(pid: int, deadline: float, quiet: float = 1.0) -> float:
    """Wait until the process has used almost no CPU for ``quiet`` seconds (its handlers are
    done and it waits for the client); return how long that took."""
    started = time.monotonic()
    last = cpu_seconds(pid)
    while True:
        time.sleep(quiet)
        now = cpu_seconds(pid)
        if now - last < 0.05 * quiet:
            return time.monotonic() - started
        last = now
        assert time.monotonic() - started < deadline, "the server never went idle"


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
            # A notes_read of a 4 MiB note answers about 10 MiB (the note twice, escaped).
            line = await self.stdout.receive_until(b"\n", 64 * MIB)
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
        return memory_kib(self.process.pid)

    async def stderr_text(self) -> str:
        assert self.process.stderr is not None
        chunks = []
        with anyio.move_on_after(2):
            async for chunk in self.process.stderr:
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")


@asynccontextmanager
async def spawn(command: list[str] | None = None) -> AsyncIterator[RawServer]:
    process = await anyio.open_process(command or server_command(), cwd=REPO)
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


def serve_command(tmp_path: Path, workspace: Path) -> list[str]:
    """The real ``fsnotes serve`` over ``workspace``, its state under ``tmp_path``."""
    return [
        *(sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace)),
        *("--state-dir", str(tmp_path / "state"), "--principal", "ada"),
    ]


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


@pytest.mark.parametrize(
    ("size", "cap"),
    [(20_000, MAX_BATCH_MEMBERS), (1_200_000, MAX_LINE_VALUES), (8_000_000, MAX_LINE_VALUES)],
    ids=["20kB", "1.2MB", "8MB"],
)
async def test_a_huge_2025_03_26_batch_gets_one_error_with_bounded_memory(
    size: int, cap: int
) -> None:
    # 2025-03-26 is the one revision with batches. A line of tiny members used to become one
    # reply per member, all built before the first was written: 1.2 MB held 287 MiB. A batch of
    # more members than the member cap gets one error; one of more values than the per-line cap
    # is not even parsed.
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
            assert str(cap) in refused["error"]["message"]
            assert await server.recv(timeout=30) == {"jsonrpc": "2.0", "id": round_, "result": {}}
            after.append(server.memory_kib())
        print(f"{len(line)} B batch: before={before} after={after}")
        peak = (after[-1]["VmHWM"] - before["VmRSS"]) * 1024
        # Measuring the line costs about two copies of it while it lasts, and three lines in a
        # row peak no higher than one: nothing stacks up.
        assert peak < 3 * len(line) + 4 * MIB, (before, after)


def slow_call_with_junk(rid: Any, junk: bytes) -> bytes:
    """A 10 s slow call whose ``params.junk`` (ignored by the server) is the JSON text ``junk``."""
    message = call(rid, "slow", {"steps": 100, "delay": 0.1})
    message["params"]["junk"] = "@JUNK@"
    return json.dumps(message).encode().replace(b'"@JUNK@"', junk) + b"\n"


async def test_slow_calls_carrying_millions_of_tiny_values_are_refused_unparsed() -> None:
    # 2 MB of "{}," parses to 1.4 million dicts (25 bytes held per byte of line); four such calls
    # in flight used to hold 186 MiB. Such a line is refused before it is parsed.
    async with spawn() as server:
        await server.ping_ok("warm")
        before = server.memory_kib()
        junk = b"[" + b"{}," * 700_000 + b"{}]"
        for i in range(4):
            await server.write(slow_call_with_junk(i, junk))
        await server.send({"jsonrpc": "2.0", "id": "p", "method": "ping"})
        seen = await server.collect_until("p", timeout=30)
        after = server.memory_kib()
        growth_mib = (after["VmHWM"] - before["VmRSS"]) / 1024
        print(f"4 x {len(junk)} B of {{}}: before={before} after={after} +{growth_mib:.1f} MiB")
        refused = [m for m in seen if "error" in m]
        assert len(refused) == 4, seen
        for error in refused:
            assert "id" not in error and error["error"]["code"] == -32600, error
            assert str(MAX_LINE_VALUES) in error["error"]["message"]
        # What is left: the 2 MB line itself and its measurement, never the parsed values.
        assert growth_mib < 16, (before, after)
        await server.ping_ok()


async def test_requests_in_flight_hold_no_more_than_the_byte_budget() -> None:
    # Each call carries 60,000 values (just under the per-line cap) in 150 KB: 4.4 MiB once
    # parsed, held while the call runs. 48 of them used to hold 211 MiB; the budget admits as
    # many as fit and answers the rest "busy" at once, with their id.
    async with spawn() as server:
        await server.ping_ok("warm")
        before = server.memory_kib()
        junk = b"[" + b'{"a":{"a":{}}},' * 9_999 + b'{"a":{"a":{}}}]'
        calls = 48
        for i in range(calls):
            await server.write(slow_call_with_junk(i, junk))
        await server.send({"jsonrpc": "2.0", "id": "p", "method": "ping"})
        seen = await server.collect_until("p", timeout=30)
        after = server.memory_kib()
        growth_mib = (after["VmHWM"] - before["VmRSS"]) / 1024
        busy = [m for m in seen if "error" in m]
        print(
            f"{calls} x {len(junk)} B calls, {len(busy)} refused: before={before} after={after} "
            f"+{growth_mib:.1f} MiB"
        )
        for error in busy:
            assert error["error"]["code"] == -32603 and "busy" in error["error"]["message"], error
        running = sorted(set(range(calls)) - {m["id"] for m in busy})
        assert busy and running, seen
        assert growth_mib < MAX_IN_FLIGHT_BYTES / MIB + 16, (before, after)
        # Cancelled calls give their bytes back: the same call is admitted again.
        for rid in running:
            await server.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": rid},
                }
            )
        await server.ping_ok("cancelled")
        await server.write(slow_call_with_junk("again", junk))
        await server.send({"jsonrpc": "2.0", "id": "p2", "method": "ping"})
        seen = await server.collect_until("p2")
        assert not any(m.get("id") == "again" for m in seen), seen


async def test_several_4_mib_code_notes_written_at_once_all_succeed(tmp_path: Path) -> None:
    # The largest legitimate messages: whole notes at the size limit, full of the characters a
    # hostile line is made of (inside one JSON string they are one value). Four at once, one of
    # them with an emoji (4 bytes per character once parsed), fit the in-flight budget.
    workspace = tmp_path / "notes"
    workspace.mkdir()
    command = serve_command(tmp_path, workspace)
    notes = {f"code{i}.md": code_note(MAX_NOTE_BYTES) for i in range(3)}
    notes["emoji.md"] = code_note(MAX_NOTE_BYTES, tail="\N{GRINNING FACE}\n")
    async with spawn(command) as server:
        await server.ping_ok("warm")
        for path, content in notes.items():
            arguments = {"workspaceUri": workspace.as_uri(), "path": path, "content": content}
            await server.send(call(path, "notes_create", arguments))
        # Answered in whatever order the writes finish.
        answers: dict[str, dict[str, Any]] = {}
        while len(answers) < len(notes):
            msg = await server.recv(timeout=60)
            if "method" not in msg:
                answers[msg["id"]] = msg
        assert set(answers) == set(notes)
        for answer in answers.values():
            assert answer["result"].get("isError") is not True, answer
        for path, content in notes.items():
            assert (workspace / path).read_text(encoding="utf-8") == content
        await server.ping_ok()


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


async def start_long_call(server: RawServer) -> None:
    """Start a 5 s call and wait for its first progress notification: proof that the server is
    serving (its SIGTERM handling is in place before it reads any input) and the call is live."""
    await server.send(call("long", "slow", {"steps": 100, "delay": 0.05}, progressToken="t"))
    first = await server.recv()
    assert first["method"] == "notifications/progress", first


async def test_stdin_closed_mid_call_exits_promptly_and_quietly() -> None:
    async with spawn() as server:
        await start_long_call(server)
        started = time.monotonic()
        await server.stdin.aclose()
        with anyio.fail_after(5):
            code = await server.process.wait()
        assert time.monotonic() - started < 3
        assert code == 0
        assert "Traceback" not in await server.stderr_text()


async def test_sigterm_mid_call_exits_promptly_and_quietly() -> None:
    # No fixed sleep before the signal: a server still importing (0.4 s here, longer on a loaded
    # machine) has no handler yet, and SIGTERM's default action kills it (status -15).
    async with spawn() as server:
        await start_long_call(server)
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


F_GETPIPE_SZ = 1032  # Linux fcntl: a pipe's capacity


def _queued(fd: int, request: int = termios.FIONREAD) -> int:
    buf = bytearray(4)
    fcntl.ioctl(fd, request, buf)
    return int.from_bytes(buf, sys.byteorder)


class _Unread:
    """A server process whose stdout nobody reads. stdin is a pipe, or a socketpair as libuv
    (so every Node host) gives a child."""

    def __init__(self, command: list[str], stdin_kind: str = "pipe") -> None:
        self.sock: socket.socket | None = None
        stdin: Any = subprocess.PIPE
        if stdin_kind == "socket":
            self.sock, child = socket.socketpair()
            stdin = child.fileno()
        self.proc = subprocess.Popen(
            command, cwd=REPO, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        if self.sock is not None:
            child.close()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stdout = self.proc.stdout
        self.stderr = self.proc.stderr

    def write(self, data: bytes) -> None:
        if self.sock is not None:
            self.sock.sendall(data)
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def unread_input(self) -> int:
        if self.sock is not None:
            return _queued(self.sock.fileno(), termios.TIOCOUTQ)
        assert self.proc.stdin is not None
        return _queued(self.proc.stdin.fileno())

    def close_stdin(self) -> None:
        # A Node host's stdin.end() shuts the socket down for writing; a pipe is closed.
        if self.sock is not None:
            self.sock.shutdown(socket.SHUT_WR)
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.close()

    def stall_stdout(self) -> None:
        """Send pings nobody reads the answers to, until the server is blocked writing one."""
        # 2,500 answers (95 KB) overflow the 64 KiB pipe; the 110 KB of pings fit in what the
        # server reads before it blocks plus stdin's own buffer, so this write never waits long.
        self.write(
            b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(2500))
        )
        capacity = fcntl.fcntl(self.stdout.fileno(), F_GETPIPE_SZ)
        deadline = time.monotonic() + 20
        # Blocked: all input read, stdout within a page of capacity (a pipe holds whole pages; a
        # short answer that does not fit in the last page's rest waits for a free page), and
        # answers still owed.
        while self.unread_input() or _queued(self.stdout.fileno()) < capacity - 4096:
            assert time.monotonic() < deadline, "stdout never filled"
            time.sleep(0.02)

    def finish(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)
        if self.sock is not None:
            self.sock.close()
        elif self.proc.stdin is not None:
            self.proc.stdin.close()
        return self.stderr.read().decode(errors="replace")


@pytest.mark.parametrize(
    ("product", "stdin_kind"),
    [("demo", "pipe"), ("demo", "socket"), ("fsnotes serve", "pipe")],
)
def test_stdin_closed_while_a_write_is_blocked_exits_within_the_eof_grace(
    product: str, stdin_kind: str, tmp_path: Path
) -> None:
    # The client stopped reading, then closed stdin (its normal shutdown). The server is stuck
    # in a write and must still notice the EOF, not wait for SIGTERM.
    command = server_command()
    if product == "fsnotes serve":
        (tmp_path / "notes").mkdir()
        command = serve_command(tmp_path, tmp_path / "notes")
    server = _Unread(command, stdin_kind)
    try:
        server.stall_stdout()
        started = time.monotonic()
        server.close_stdin()
        try:
            code = server.proc.wait(EOF_GRACE_S + 3)
        except subprocess.TimeoutExpired:
            pytest.fail("the server never noticed stdin closing while its stdout was full")
        elapsed = time.monotonic() - started
        print(f"exited {code} {elapsed:.2f} s after stdin closed")
        assert code == 0 and elapsed < EOF_GRACE_S + 1
    finally:
        stderr = server.finish()
    assert "Traceback" not in stderr, stderr


def test_a_write_that_makes_no_progress_for_the_grace_ends_the_server_with_one_line() -> None:
    # The client is alive and keeps stdin open but never reads: after the write-stall grace the
    # server gives up, says so once on stderr, and exits cleanly. The grace is shortened here
    # (it is WRITE_STALL_S in the product) so the test does not wait half a minute.
    grace = 2.0
    code_text = (
        "from tests.servers.demo_server import build_app\n"
        "from fsnotes.transport.stdio import run_stdio\n"
        f"run_stdio(build_app(), principal='demo', write_stall_s={grace!r})\n"
    )
    server = _Unread([sys.executable, "-c", code_text])
    try:
        server.stall_stdout()
        started = time.monotonic()
        try:
            code = server.proc.wait(grace + 10)
        except subprocess.TimeoutExpired:
            pytest.fail("a write that could not progress kept the server alive")
        elapsed = time.monotonic() - started
        print(f"exited {code} {elapsed:.2f} s after its write blocked")
        assert code == 0 and grace - 0.5 < elapsed < grace + 2
    finally:
        stderr = server.finish()
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "stdout" in lines[0] and f"{grace:g} s" in lines[0], stderr


def test_answers_a_client_leaves_unread_are_held_within_the_answer_budget(tmp_path: Path) -> None:
    # Each notes_read of a 4 MiB note answers 9.6 MiB (the note in structuredContent and again in
    # its JSON text block). A client that sent 16 and did not read stdout used to make the server
    # hold all 16 answers, about 28 MiB each (the answer, its JSON text, its encoding): +450 MiB.
    # Now at most MAX_PENDING_ANSWER_BYTES of answers wait; the other reads are dropped and run
    # again once the client reads, and meanwhile the server reads no more requests.
    workspace = tmp_path / "notes"
    workspace.mkdir()
    note = code_note(MAX_NOTE_BYTES)
    (workspace / "big.md").write_text(note, encoding="utf-8")
    uri = (workspace / "big.md").as_uri()

    def read_call(rid: Any) -> bytes:
        return json.dumps(call(rid, "notes_read", {"uri": uri})).encode() + b"\n"

    server = _Unread(serve_command(tmp_path, workspace))

    def response() -> dict[str, Any]:
        while True:
            msg: dict[str, Any] = json.loads(server.stdout.readline())
            if "method" not in msg:
                return msg

    try:
        pid = server.proc.pid
        server.write(read_call("first"))
        assert response()["result"]["structuredContent"]["content"] == note
        before = memory_kib(pid)
        calls, later_calls = 16, 4
        started = time.monotonic()
        server.write(b"".join(read_call(i) for i in range(calls)))
        # Left unread until every handler is done (well within the write-stall grace).
        idle_after = until_idle(pid, deadline=WRITE_STALL_S - 10)
        held = memory_kib(pid)
        growth_mib = (held["VmHWM"] - before["VmRSS"]) / 1024
        print(f"{calls} unread notes_read: idle after {idle_after:.1f} s, +{growth_mib:.1f} MiB")
        assert growth_mib < PENDING_ANSWERS_BOUND / MIB, (before, held)
        # What stays while nobody reads is the kept answers (freed buffers went back at once).
        assert held["VmRSS"] - before["VmRSS"] < (MAX_PENDING_ANSWER_BYTES + 16 * MIB) / 1024
        # Backpressure: the server has stopped reading, so more requests stay in the pipe.
        later = b"".join(read_call(100 + i) for i in range(later_calls))
        server.write(later)
        time.sleep(1)
        assert server.unread_input() == len(later)
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < calls + later_calls:
            msg = response()
            assert msg["id"] not in answers, msg
            answers[msg["id"]] = msg
        after = memory_kib(pid)
        print(
            f"{calls} + {later_calls} unread notes_read, all answered after "
            f"{time.monotonic() - started:.1f} s; before={before} held={held} after={after}; "
            f"+{(after['VmHWM'] - before['VmRSS']) / 1024:.1f} MiB in all"
        )
        assert set(answers) == set(range(calls)) | set(range(100, 100 + later_calls))
        for answer in answers.values():
            # A read is never answered "busy": it runs again once its answer fits.
            assert answer["result"]["structuredContent"]["content"] == note, answer.get("error")
        assert (after["VmHWM"] - before["VmRSS"]) / 1024 < PENDING_ANSWERS_BOUND / MIB
        # Everything read: the server is back at its resting size.
        assert after["VmRSS"] - before["VmRSS"] < 16 * 1024, (before, after)
        # Once the client reads again, the server serves as before.
        server.write(b'{"jsonrpc":"2.0","id":"p","method":"ping"}\n')
        assert response() == {"jsonrpc": "2.0", "id": "p", "result": {}}
        server.write(read_call("again"))
        assert response()["result"]["structuredContent"]["content"] == note
    finally:
        stderr = server.finish()
    assert "Traceback" not in stderr, stderr


def test_stdin_closed_while_reads_wait_for_the_client_exits_within_the_eof_grace(
    tmp_path: Path,
) -> None:
    # The client left large answers unread (so the server stopped reading requests, and reads
    # wait to run again), then closed stdin: the server still notices, and exits promptly.
    workspace = tmp_path / "notes"
    workspace.mkdir()
    (workspace / "big.md").write_text(code_note(MAX_NOTE_BYTES), encoding="utf-8")
    uri = (workspace / "big.md").as_uri()
    server = _Unread(serve_command(tmp_path, workspace))
    try:
        server.write(
            b"".join(
                json.dumps(call(i, "notes_read", {"uri": uri})).encode() + b"\n" for i in range(16)
            )
        )
        until_idle(server.proc.pid, deadline=WRITE_STALL_S - 10)
        started = time.monotonic()
        server.close_stdin()
        try:
            code = server.proc.wait(EOF_GRACE_S + 3)
        except subprocess.TimeoutExpired:
            pytest.fail("the server never noticed stdin closing while answers waited")
        elapsed = time.monotonic() - started
        print(f"exited {code} {elapsed:.2f} s after stdin closed")
        assert code == 0 and elapsed < EOF_GRACE_S + 1
    finally:
        stderr = server.finish()
    assert "Traceback" not in stderr, stderr


# The demo app plus a tool whose blocking step (in a worker thread) says how many such steps
# have run at once so far.
THREADS_APP = """
import threading, time
from dataclasses import replace
import anyio.to_thread
from fsnotes.protocol import ToolResult
from fsnotes.transport.stdio import run_stdio
from tests.servers.demo_server import build_app

lock = threading.Lock()
running = [0, 0]  # now, most

def step():
    with lock:
        running[0] += 1
        running[1] = max(running)
    time.sleep(0.2)
    with lock:
        running[0] -= 1

async def threads(ctx, args):
    await anyio.to_thread.run_sync(step)
    return ToolResult(text=str(running[1]))

app = build_app()
app.tools = [*app.tools, replace(app.tools[0], name="threads", handler=threads)]
run_stdio(app, principal='demo')
"""


async def test_at_most_max_worker_threads_blocking_steps_run_at_once() -> None:
    # Each running step may hold a note several times over, so the pool size multiplies what
    # handlers hold (limits.py); anyio's default limiter would run 40 at once.
    calls = 3 * MAX_WORKER_THREADS
    async with spawn([sys.executable, "-c", THREADS_APP]) as server:
        await server.write(
            b"".join(
                json.dumps(call(i, "threads", {"text": ""})).encode() + b"\n" for i in range(calls)
            )
        )
        most = 0
        for _ in range(calls):
            answer = await server.recv(timeout=20)
            most = max(most, int(answer["result"]["content"][0]["text"]))
        assert most == MAX_WORKER_THREADS
