"""The 2025-11-25 half of the MCP endpoint: sessions over Streamable HTTP.

``initialize`` (with no ``Mcp-Session-Id``) opens a session: a
:class:`~fsnotes.runtime.connection.ServerConnection` for the principal whose token sent it,
sharing the endpoint's dispatcher and its in-flight and answer budgets, kept in the
:class:`~fsnotes.transport.http_sessions.SessionTable` under a fresh id that the response's
``Mcp-Session-Id`` carries. Later POSTs name the id: a request's job runs in the POST's own
handler and writes through a :class:`~fsnotes.transport.http_reply.PostPeer` (JSON, or an SSE
stream when a notification or our request goes first); a notification or a response to our
request is handed to the connection and answered 202. GET opens the session's stream (messages
tied to no request: the roots fetch, completion notices); DELETE ends the session, cancelling
what it runs. A closed POST stream does not cancel its request (2025-11-25 transports:
"Disconnection SHOULD NOT be interpreted as the client cancelling its request").
"""

from __future__ import annotations

import logging

import anyio
import anyio.abc
from starlette.types import Receive, Scope, Send

from fsnotes.protocol import inbound
from fsnotes.protocol.dispatch import Dispatcher, Reply
from fsnotes.protocol.framing import encode_message
from fsnotes.protocol.registry import App
from fsnotes.protocol.wire import INTERNAL_ERROR
from fsnotes.runtime.answers import AnswerBudget
from fsnotes.runtime.budget import InFlightBudget
from fsnotes.runtime.connection import Job, Out, ServerConnection, Write
from fsnotes.security.tokens import Identity
from fsnotes.transport import http_wire as hw
from fsnotes.transport.http_reply import (
    RETRY_AFTER,
    SSE_HEADERS,
    HttpReply,
    PostPeer,
    Stalled,
    StreamPeer,
    refuse,
    respond,
    until_gone,
    write_body,
)
from fsnotes.transport.http_sessions import (
    HttpSession,
    SessionsFull,
    SessionTable,
)

_log = logging.getLogger("fsnotes.transport")

# An open GET stream gets an SSE comment this often when nothing else is sent, so proxies and
# client idle timeouts do not close it (2026-07-28 streamable-http suggests it for long streams).
KEEPALIVE_S = 15.0


class LegacySessions:
    """The endpoint's 2025-11-25 requests (see the module docstring). ``task_group`` is where
    sessions' own tasks run; the endpoint sets it while it runs."""

    def __init__(
        self,
        app: App,
        dispatcher: Dispatcher,
        budget: InFlightBudget,
        answers: AnswerBudget,
        sessions: SessionTable,
    ) -> None:
        self.app = app
        self.dispatcher = dispatcher
        self.budget = budget
        self.answers = answers
        self.sessions = sessions
        self.task_group: anyio.abc.TaskGroup | None = None

    async def post(
        self,
        envelope: inbound.Envelope,
        parsed: inbound.Parsed,
        session_id: str | None,
        receive: Receive,
        send: Send,
        identity: Identity,
    ) -> None:
        """A POST of the 2025-11-25 era: without a session id, or naming one."""
        if session_id is None:
            await self.sessionless(envelope, parsed, send, identity)
            return
        request_id = envelope.id if isinstance(envelope, inbound.Request) else None
        session = self.sessions.get(session_id.strip(" \t"), identity)
        if session is None:
            await refuse(
                send,
                404,
                "Session not found: it ended or never existed; initialize a new one",
                request_id=request_id,
            )
            return
        session.busy += 1
        session.last_active = anyio.current_time()
        try:
            await self.in_session(session, envelope, parsed, receive, send)
        finally:
            session.busy -= 1
            session.last_active = anyio.current_time()

    async def sessionless(
        self, envelope: inbound.Envelope, parsed: inbound.Parsed, send: Send, identity: Identity
    ) -> None:
        if isinstance(envelope, inbound.Invalid):
            await respond(send, 400, encode_message(envelope.error))
            return
        if not isinstance(envelope, inbound.Request):
            await refuse(
                send,
                400,
                "Bad request: no Mcp-Session-Id (initialize first for 2025-11-25, or send "
                "_meta on every request for 2026-07-28)",
            )
            return
        if envelope.method == "initialize":
            await self._initialize(envelope, parsed, send, identity)
            return
        # ping is answered without a session (2025-11-25 lifecycle); anything else is refused
        # by the dispatcher, which says what to send instead (400: a session is required).
        routed = self.dispatcher.route(
            envelope, session=None, principal=identity.principal, ceiling=identity.ceiling_label
        )
        if isinstance(routed, Reply):
            await respond(send, hw.modern_status(routed.message), encode_message(routed.message))
        else:  # not reached: without a session and _meta the dispatcher starts nothing
            await refuse(send, 400, "Bad request: no Mcp-Session-Id", request_id=envelope.id)

    async def _initialize(
        self, request: inbound.Request, parsed: inbound.Parsed, send: Send, identity: Identity
    ) -> None:
        try:
            self.sessions.make_room(identity.principal)
        except SessionsFull as exc:
            await refuse(
                send,
                503,
                f"Server busy: {exc}",
                [RETRY_AFTER],
                request_id=request.id,
                code=INTERNAL_ERROR,
            )
            return
        conn = ServerConnection(
            self.app,
            principal=identity.principal,
            ceiling=identity.ceiling_label,
            dispatcher=self.dispatcher,
            budget=self.budget,
            answers=self.answers,
        )
        outs = conn.receive_parsed(parsed)
        answer = next((o.message for o in outs if isinstance(o, Write)), None)
        if answer is None or conn.session is None:
            await respond(send, 400, encode_message(answer or {}))
            return
        session = HttpSession(self.sessions.new_id(), identity, conn, anyio.current_time())
        self.sessions.add(session)
        _log.info("opened an HTTP session (%s) for %r", conn.legacy_version, identity.principal)
        await respond(
            send, 200, encode_message(answer), [(hw.SESSION_HEADER.encode(), session.id.encode())]
        )

    async def in_session(
        self,
        session: HttpSession,
        envelope: inbound.Envelope,
        parsed: inbound.Parsed,
        receive: Receive,
        send: Send,
    ) -> None:
        if isinstance(envelope, inbound.Invalid):
            await respond(send, 400, encode_message(envelope.error))
            return
        outs = session.conn.receive_parsed(parsed)
        if not isinstance(envelope, inbound.Request):
            # A notification or our request's answer: whatever it starts runs on its own.
            self._perform(session, outs)
            await respond(send, 202, json=False)
            return
        for out in outs:
            if isinstance(out, Write):
                await respond(send, 200, encode_message(out.message))
            else:
                await self._run_in_session(out, receive, send, session)

    async def _run_in_session(
        self, job: Job, receive: Receive, send: Send, session: HttpSession
    ) -> None:
        reply = HttpReply(send)
        # 2025-11-25: a closed stream is not a cancellation; the request runs on.
        await until_gone(receive, reply, lambda: job.run(PostPeer(session, reply)), cancel=False)
        if reply.stalled:
            raise Stalled
        await reply.finish()  # cancelled: the stream ends without an answer

    def _perform(self, session: HttpSession, outs: list[Out]) -> None:
        for out in outs:
            if isinstance(out, Write):
                session.to_stream(encode_message(out.message))
            else:
                self._spawn(session, out)

    def _spawn(self, session: HttpSession, job: Job) -> None:
        """Run a session's own job (a roots fetch) beside the requests, until the session
        ends; it writes to the session's GET stream."""
        tg = self.task_group
        if tg is not None:
            tg.start_soon(job.run, StreamPeer(session))

    async def verb(
        self, method: str, scope: Scope, receive: Receive, send: Send, identity: Identity
    ) -> None:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        session_id, _ = hw.single(headers, hw.SESSION_HEADER)
        if session_id is None:
            # 2026-07-28 streamable-http "Backward Compatibility": GET or DELETE -> 405. The
            # 2025-11-25 era needs a session for either.
            await refuse(
                send,
                405,
                f"Method not allowed: {method} needs an Mcp-Session-Id",
                [(b"allow", b"POST")],
            )
            return
        session = self.sessions.get(session_id.strip(" \t"), identity)
        if session is None:
            await refuse(
                send, 404, "Session not found: it ended or never existed; initialize a new one"
            )
            return
        if method == "DELETE":
            self.sessions.remove(session.id, "the client ended it (DELETE)")
            await respond(send, 204, json=False)
            return
        if not hw.accepts(hw.single(headers, "accept")[0])[1]:
            await refuse(send, 406, "Not acceptable: a GET stream is text/event-stream")
            return
        if session.streaming:
            await refuse(send, 409, "Conflict: this session's GET stream is already open")
            return
        await self._stream(session, receive, send)

    async def _stream(self, session: HttpSession, receive: Receive, send: Send) -> None:
        """The session's GET stream: messages tied to no request (the roots fetch's request,
        completion notices), until the client closes it or the session ends."""
        session.streaming = True
        session.busy += 1
        reply = HttpReply(send)

        async def pump() -> None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": SSE_HEADERS,
                }
            )
            while not session.ended:
                line = await session.next_for_stream(KEEPALIVE_S)
                if session.ended:
                    break
                await write_body(send, hw.sse_event(line) if line else hw.SSE_KEEPALIVE, more=True)
            await write_body(send, b"", more=False)

        try:
            await until_gone(receive, reply, pump, cancel=True)
        finally:
            session.streaming = False
            session.busy -= 1
            session.last_active = anyio.current_time()
