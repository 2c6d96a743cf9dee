"""One HTTP response of the MCP endpoint, and the ways a request's messages reach it.

:class:`HttpReply` is one POST's answer: a single JSON object when the answer is the first thing
to send, or an SSE stream scoped to that request when something must go before it (progress,
log messages, and in the 2025-11-25 era our own requests to the client), as both revisions'
transports pages allow. :class:`ModernPeer` is what a 2026-07-28 request's job writes through
(its own response; the runner never asks the client anything in that era: that is MRTR);
:class:`PostPeer` and :class:`StreamPeer` are the :class:`~fsnotes.runtime.runner.Peer` a
legacy session's jobs write through (the request's own stream, or the session's GET stream).

Every write is bounded in time: a client that stops reading for :data:`WRITE_STALL_S` loses its
connection (the response is marked stalled and left unfinished, so uvicorn closes it), and
large bodies go out in :data:`WRITE_CHUNK_BYTES` pieces, so what waits in the socket's buffer
for a client that does not read stays small.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.types import Receive, Send

from fsnotes.protocol.framing import encode_message
from fsnotes.protocol.registry import JSONObject
from fsnotes.protocol.wire import INVALID_REQUEST, RequestId, error_message
from fsnotes.transport.http_sessions import HttpSession
from fsnotes.transport.http_wire import sse_event, status_of

# Longest a write may make no progress before the client is given up on: as stdio's
# WRITE_STALL_S (half the TypeScript SDK's 60 s default request timeout).
WRITE_STALL_S = 30.0
# Body pieces handed to the server at a time: uvicorn pauses the writer once 64 KiB wait in the
# socket buffer, so at most about this much more is held for a client that stops reading.
WRITE_CHUNK_BYTES = 256 * 1024

JSON_TYPE = (b"content-type", b"application/json")
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    # 2026-07-28 streamable-http: servers SHOULD send it on SSE streams, so that reverse
    # proxies (nginx) pass events on at once instead of buffering them.
    (b"x-accel-buffering", b"no"),
]


class Stalled(Exception):
    """The client read nothing for :data:`WRITE_STALL_S`; its connection is to be closed."""


async def write_body(send: Send, data: bytes, *, more: bool) -> None:
    """Send ``data`` as body pieces of at most :data:`WRITE_CHUNK_BYTES`, each within
    :data:`WRITE_STALL_S`; raises :class:`Stalled`."""
    view = memoryview(data)
    while True:
        piece, view = view[:WRITE_CHUNK_BYTES], view[WRITE_CHUNK_BYTES:]
        last = not view
        with anyio.move_on_after(WRITE_STALL_S) as timer:
            await send(
                {"type": "http.response.body", "body": bytes(piece), "more_body": more or not last}
            )
        if timer.cancelled_caught:
            raise Stalled
        if last:
            return


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    json: bool = True,
) -> None:
    """A whole response: status, headers (content type and length added) and body."""
    out = list(headers or [])
    if body and json:
        out.append(JSON_TYPE)
    out.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await write_body(send, body, more=False)


RETRY_AFTER = (b"retry-after", b"1")
CLOSE = [(b"connection", b"close")]


async def refuse(
    send: Send,
    status: int,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    request_id: RequestId | None = None,
    code: int = INVALID_REQUEST,
    data: Any = None,
) -> None:
    """A refusal: ``status`` with a JSON-RPC error (its id when the request's was read)."""
    body = encode_message(error_message(request_id, code, message, data))
    await respond(send, status, body, headers)


async def until_gone(
    receive: Receive, reply: HttpReply, work: Callable[[], Awaitable[Any]], *, cancel: bool
) -> Any:
    """Run ``work`` while watching for the client to disconnect (then ``reply.gone``); with
    ``cancel``, a disconnect cancels it (and the result is ``None``)."""
    result: Any = None
    async with anyio.create_task_group() as tg:
        work_scope = anyio.CancelScope()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            reply.gone = True
            if cancel:
                work_scope.cancel()

        tg.start_soon(watch)
        with work_scope:
            result = await work()
        tg.cancel_scope.cancel()
    return result


class HttpReply:
    """One POST's response: JSON until a message must precede the answer, then SSE.

    ``gone``: the client disconnected (set by the endpoint's watcher); ``stalled``: it stopped
    reading. Either way nothing more is written. Writes are serialised (a request's task and
    the legacy completion notices may both write).
    """

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        self._send = send
        self._headers = headers or []
        self._lock = anyio.Lock()
        self.streaming = False
        self.done = False
        self.gone = False
        self.stalled = False

    @property
    def open(self) -> bool:
        """Can a message still go out on this response?"""
        return not (self.done or self.gone or self.stalled)

    async def _write(self, data: bytes, *, more: bool) -> None:
        if not self.streaming:
            await self._send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [*SSE_HEADERS, *self._headers],
                }
            )
            self.streaming = True
        await write_body(self._send, data, more=more)

    async def event(self, line: bytes) -> bool:
        """Send one message (a notification, or our request) before the answer; say whether
        it went out (False once the response is over or the client has gone)."""
        async with self._lock:
            if not self.open:
                return False
            try:
                await self._write(sse_event(line), more=True)
            except Stalled:
                self.stalled = True
                return False
            return True

    async def answer(self, line: bytes, status: int = 200) -> None:
        """Send the answer and end the response: JSON with ``status``, or the stream's last
        event (its status was 200 already). Dropped if the response is over."""
        async with self._lock:
            if not self.open:
                return
            self.done = True
            try:
                if self.streaming:
                    await write_body(self._send, sse_event(line), more=False)
                else:
                    await respond(self._send, status, line, self._headers)
            except Stalled:
                self.stalled = True

    async def finish(self) -> None:
        """End a response that got no answer (its request was cancelled): the stream ends, or
        an empty stream is sent (a JSON-RPC response is never invented)."""
        async with self._lock:
            if self.done or self.gone or self.stalled:
                return
            self.done = True
            try:
                await self._write(b"", more=False)
            except Stalled:
                self.stalled = True


class ModernPeer:
    """A 2026-07-28 request's way to its client: notifications go on its own response (which
    then becomes an SSE stream), and the answer ends it with the status its error maps to."""

    def __init__(self, reply: HttpReply) -> None:
        self._reply = reply

    async def send(self, message: JSONObject) -> None:
        await self._reply.event(encode_message(message))

    async def answer(self, line: bytes, error_code: int | None) -> None:
        await self._reply.answer(line, status_of(error_code))


class PostPeer:
    """A legacy request's way to its client: its POST's stream while that is open, the
    session's GET stream after (a completion notice sent once the request has ended)."""

    def __init__(self, session: HttpSession, reply: HttpReply) -> None:
        self._session = session
        self._reply = reply

    async def send(self, message: JSONObject) -> None:
        line = encode_message(message)
        if not await self._reply.event(line):
            self._session.to_stream(line)

    async def answer(self, line: bytes, error_code: int | None) -> None:
        # The answer goes on the request's own response only (2025-11-25: never on the GET
        # stream, and always 200); a client that disconnected meanwhile does not get it (no
        # resumability).
        await self._reply.answer(line)


class StreamPeer:
    """The session's own jobs' way to the client (the roots fetch): the GET stream."""

    def __init__(self, session: HttpSession) -> None:
        self._session = session

    async def send(self, message: JSONObject) -> None:
        self._session.to_stream(encode_message(message))

    async def answer(self, line: bytes, error_code: int | None) -> None:
        self._session.to_stream(line)
