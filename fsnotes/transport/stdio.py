"""The stdio transport: the only code that reads stdin and writes stdout.

Newline-delimited UTF-8 JSON, one compact message per line, written whole and unbuffered.
Each client request runs as a task in one anyio task group, in its own cancel scope
(``notifications/cancelled`` cancels that scope). Logs go to stderr only; while serving, fd 1
is pointed at stderr so a stray ``print()`` cannot corrupt the message stream. The server exits
promptly and quietly on stdin EOF (in-flight requests get :data:`EOF_GRACE_S` to answer) and on
SIGTERM/SIGINT, leaving no task running. A client that stops reading cannot pin the server: EOF is
noticed even while a write to stdout is blocked, and a write that makes no progress for
:data:`WRITE_STALL_S` ends the server (exit status 0, one warning on stderr). Neither holds when
stdout is a regular file, a terminal or the same file as stderr: those are written in blocking
mode. Nor can it make answers pile up: while the answers it has not read fill half of
:data:`~fsnotes.protocol.limits.MAX_PENDING_ANSWER_BYTES`, no more requests are read (they wait
in its pipe), as over any pipe a client must read while it writes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import select
import signal
import stat
import sys

import anyio
import anyio.abc
import anyio.lowlevel

from fsnotes.protocol.framing import LineSplitter, Oversized, encode_message
from fsnotes.protocol.registry import App, JSONObject
from fsnotes.runtime.connection import Job, Out, ServerConnection, Write
from fsnotes.transport.process import (
    MAX_WORKER_THREADS,
    configure_logging,
    limit_worker_threads,
    return_freed_memory_promptly,
)

# Imported from here before the HTTP transport shared them (process.py).
__all__ = ["EOF_GRACE_S", "MAX_WORKER_THREADS", "WRITE_STALL_S", "run_stdio", "serve_stdio"]

_log = logging.getLogger("fsnotes.transport")

# Bytes asked of stdin per read: large enough that a 4 KiB request is one read, small enough
# that skipping an oversized line never holds more than this beyond the line limit.
READ_CHUNK = 64 * 1024

# After stdin EOF, in-flight requests may still answer (a client that pipes a request and closes
# stdin still gets its response) for this long; then they are cancelled. Kept under the 2 s the
# SDK clients wait after closing stdin before they escalate to SIGTERM.
EOF_GRACE_S = 1.0

# Longest a write to stdout may make no progress (the client is alive but does not read) before
# the server gives up on the client and exits. Far longer than a live client's pauses (a garbage
# collection, a busy UI thread), and half the TypeScript SDK's 60 s default request timeout, by
# which such a client has given up on the answers anyway. Without it, a client that never reads
# holds the server (and every task waiting to write) until it is killed.
WRITE_STALL_S = 30.0

# While a write waits for the client to read, stdin is checked this often for the client having
# closed it: the reader cannot see that EOF while it is itself waiting to write an answer. Small
# against EOF_GRACE_S, and costs nothing while writes flow.
HANGUP_POLL_S = 0.1

# poll() bits meaning the other end of stdin is gone even if unread data remains: POLLHUP for a
# pipe with no writer left (or a hung-up terminal), POLLRDHUP (Linux) for a socket whose peer shut
# down writing (libuv, hence Node hosts, give children socketpairs, not pipes).
_POLLRDHUP = getattr(select, "POLLRDHUP", 0)
_HANGUP = select.POLLHUP | _POLLRDHUP


def _is_pipe(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _input_pollable(fd: int) -> bool:
    # Pipes, sockets and terminals can wait in the event loop. Regular files and /dev/null
    # cannot be polled, but reading them never blocks, so they are read directly. No reader
    # thread: a thread stuck in read() on a terminal would keep the process from exiting.
    return _is_pipe(fd) or os.isatty(fd)


def _hung_up(fd: int) -> bool:
    """Has the client's end of ``fd`` closed? Never reads: buffered input stays for the reader."""
    poller = select.poll()
    poller.register(fd, _POLLRDHUP)  # POLLHUP is always reported
    return any(events & _HANGUP for _fd, events in poller.poll(0))


class _WriteStalled(Exception):
    """stdout took nothing for the write-stall grace."""


def _same_file(a: int, b: int) -> bool:
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


class _NonBlocking:
    """Puts a pipe/socket fd in O_NONBLOCK mode for the event loop, and restores it afterwards."""

    def __init__(self, fd: int, enable: bool) -> None:
        self.fd = fd
        self.enabled = enable
        self._saved: int | None = None

    def __enter__(self) -> _NonBlocking:
        if self.enabled:
            self._saved = fcntl.fcntl(self.fd, fcntl.F_GETFL)
            fcntl.fcntl(self.fd, fcntl.F_SETFL, self._saved | os.O_NONBLOCK)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            with contextlib.suppress(OSError):
                fcntl.fcntl(self.fd, fcntl.F_SETFL, self._saved)


class _StdioServer:
    """Runs a :class:`ServerConnection` over two file descriptors; the jobs' :class:`Peer`."""

    def __init__(
        self, conn: ServerConnection, in_fd: int, out_fd: int, write_stall_s: float = WRITE_STALL_S
    ) -> None:
        self._conn = conn
        self._write_stall_s = write_stall_s
        self._in = _NonBlocking(in_fd, _input_pollable(in_fd))
        # A stdout shared with stderr (2>&1) stays blocking so log writes never see EAGAIN.
        self._out = _NonBlocking(out_fd, _is_pipe(out_fd) and not _same_file(out_fd, 2))
        self._write_lock = anyio.Lock()
        self._write_scope: anyio.CancelScope | None = None
        self._out_broken = False
        self._running = 0  # jobs started and not yet ended
        self._idle = anyio.Event()
        self._idle.set()
        self._shutting_down = False
        self._group: anyio.CancelScope | None = None
        # Set when the client's input ended: read at EOF, or seen hung up during a blocked write.
        self._input_ended = anyio.Event()
        self._reader_done = anyio.Event()

    # --- Peer ------------------------------------------------------------------------------

    async def send(self, message: JSONObject) -> None:
        await self._write(encode_message(message))

    async def answer(self, line: bytes, error_code: int | None) -> None:
        await self._write(line)

    # --- I/O -------------------------------------------------------------------------------

    async def _write(self, data: bytes) -> None:
        async with self._write_lock:
            if self._out_broken:
                return
            stalled = False
            # Shielded so a cancelled task never leaves half a line on stdout; shutdown cancels
            # this scope explicitly if the client stopped reading.
            with anyio.CancelScope(shield=True) as scope:
                self._write_scope = scope
                try:
                    await self._write_all(data)
                except _WriteStalled:
                    stalled = True
                except OSError as exc:
                    self._out_broken = True
                    if exc.errno not in (errno.EPIPE, errno.EBADF):
                        _log.warning("stdout write failed: %s", exc)
                finally:
                    self._write_scope = None
            if scope.cancelled_caught or stalled:
                self._out_broken = True
            if stalled and not self._shutting_down:
                _log.warning(
                    "stdout accepted nothing for %g s (the client stopped reading); shutting down",
                    self._write_stall_s,
                )
                if self._group is not None:
                    self._shutdown(self._group)

    async def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        fd = self._out.fd
        while view:
            if self._out.enabled:
                try:
                    n = os.write(fd, view)
                except BlockingIOError:
                    await self._wait_writable(fd)
                    continue
            else:
                n = os.write(fd, view)
            view = view[n:]

    async def _wait_writable(self, fd: int) -> None:
        """Wait until ``fd`` takes more bytes; raise :class:`_WriteStalled` after the write-stall
        grace without progress. Meanwhile watch for the client closing stdin."""
        deadline = anyio.current_time() + self._write_stall_s
        while True:
            with anyio.move_on_after(HANGUP_POLL_S):
                await anyio.wait_writable(fd)
                return
            if not self._input_ended.is_set() and self._in.enabled and _hung_up(self._in.fd):
                _log.info("stdin closed while a write to stdout was blocked")
                self._input_ended.set()
            if anyio.current_time() >= deadline:
                raise _WriteStalled

    async def _read(self) -> bytes:
        fd = self._in.fd
        if not self._in.enabled:
            await (
                anyio.lowlevel.checkpoint()
            )  # stay cancellable and fair on a file that never blocks
            await self._conn.answers_drained()
            return os.read(fd, READ_CHUNK)
        while True:
            # Backpressure: while the client leaves answers unread, read no more requests (they
            # wait in its pipe, not here), also when they arrived while we waited for input.
            # EOF is still noticed meanwhile: a write is blocked, and it watches for the hang-up.
            await self._conn.answers_drained()
            try:
                return os.read(fd, READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(fd)

    # --- what the connection gives -----------------------------------------------------------

    async def _perform(self, tg: anyio.abc.TaskGroup, outs: list[Out]) -> None:
        for out in outs:
            if isinstance(out, Write):
                await self.send(out.message)
            else:
                self._running += 1
                self._idle = anyio.Event()
                tg.start_soon(self._run_job, out)

    async def _run_job(self, job: Job) -> None:
        try:
            await job.run(self)
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def _watch_signals(
        self,
        scope: anyio.CancelScope,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                _log.info("received signal %d; shutting down", signum)
                self._shutdown(scope)
                return

    def _shutdown(self, scope: anyio.CancelScope) -> None:
        self._shutting_down = True
        self._conn.client_closed()
        if self._write_scope is not None:
            self._write_scope.cancel()
        scope.cancel()

    async def _read_input(self, tg: anyio.abc.TaskGroup) -> None:
        splitter = LineSplitter()
        try:
            while True:
                try:
                    data = await self._read()
                except OSError as exc:
                    _log.warning("stdin read failed: %s", exc)
                    data = b""
                items = splitter.feed(data) if data else splitter.end()
                for item in items:
                    if isinstance(item, Oversized):
                        outs = self._conn.line_too_long(item.limit)
                    else:
                        outs = self._conn.receive_line(item)
                    await self._perform(tg, outs)
                if not data:
                    break
        finally:
            self._reader_done.set()
            self._input_ended.set()

    async def run(self) -> None:
        with self._in, self._out:
            async with anyio.create_task_group() as tg:
                self._group = tg.cancel_scope
                # SIGTERM/SIGINT handling is in place before any input is read, so a client that
                # got any answer knows a signal now ends the server cleanly.
                await tg.start(self._watch_signals, tg.cancel_scope)
                tg.start_soon(self._read_input, tg)
                await self._input_ended.wait()
                # EOF: no answer to a server-to-client request can arrive any more.
                self._conn.client_closed()
                # The reader may still be writing an answer (or reading what was sent before the
                # EOF); it and the request tasks get the grace together.
                with anyio.move_on_after(EOF_GRACE_S):
                    await self._reader_done.wait()
                    await self._idle.wait()
                self._shutdown(tg.cancel_scope)


async def serve_stdio(
    app: App,
    *,
    principal: str,
    stdin_fd: int | None = None,
    stdout_fd: int | None = None,
    write_stall_s: float = WRITE_STALL_S,
) -> None:
    """Serve ``app`` over stdio until stdin ends or SIGTERM/SIGINT arrives, every request acting
    for ``principal`` (stdio has no MCP authentication: it comes from configuration).

    With the default descriptors, the real stdout is moved to a private descriptor and fd 1 is
    pointed at stderr for the duration, so nothing but protocol messages reaches the client.
    """
    conn = ServerConnection(app, principal=principal)
    in_fd = 0 if stdin_fd is None else stdin_fd
    lifespan = app.lifespan() if app.lifespan is not None else contextlib.nullcontext()
    async with lifespan:
        await _serve_fds(conn, in_fd, stdout_fd, write_stall_s)


async def _serve_fds(
    conn: ServerConnection, in_fd: int, stdout_fd: int | None, write_stall_s: float
) -> None:
    if stdout_fd is not None:
        await _StdioServer(conn, in_fd, stdout_fd, write_stall_s).run()
        return
    sys.stdout.flush()
    private_out = os.dup(1)
    saved_stdout = os.dup(1)
    os.dup2(2, 1)
    saved_sys_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        await _StdioServer(conn, in_fd, private_out, write_stall_s).run()
    finally:
        sys.stdout = saved_sys_stdout
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)
        os.close(private_out)


async def _serve_process(app: App, principal: str, write_stall_s: float) -> None:
    limit_worker_threads()
    await serve_stdio(app, principal=principal, write_stall_s=write_stall_s)


def run_stdio(app: App, *, principal: str, write_stall_s: float = WRITE_STALL_S) -> None:
    """Blocking entry point: configure stderr logging (if nothing did) and serve ``app`` for
    ``principal`` (see :func:`serve_stdio`), with at most :data:`MAX_WORKER_THREADS` worker
    threads and freed memory given back promptly.

    ``write_stall_s`` exists for tests; the server always runs with :data:`WRITE_STALL_S`.
    """
    configure_logging()
    # A signal that arrives before the handler is installed: exit quietly all the same.
    with contextlib.suppress(KeyboardInterrupt):
        return_freed_memory_promptly()
        anyio.run(_serve_process, app, principal, write_stall_s)
