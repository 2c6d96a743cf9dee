"""The Streamable HTTP endpoint (``/mcp``): one ASGI app serving both protocol eras.

Every request is checked in this order, and refused at the first failure, before its body is
read: ``Host`` in the allowlist and a present ``Origin`` allowed (403, DNS rebinding; see
:mod:`http_settings`), a bearer token (401 with ``WWW-Authenticate: Bearer`` and nothing else;
with ``[http.oauth]``, the protected resource metadata is served before this check, the
challenge names it, and a token whose scopes allow nothing gets 403 ``insufficient_scope``),
the path (404) and the method (405). A POST then needs ``Content-Type: application/json`` (415)
and an ``Accept`` taking both JSON and SSE (406), and a body of at most
:data:`~fsnotes.transport.http_wire.MAX_BODY_BYTES` (413, unread when ``Content-Length`` says
so) that arrives within :data:`BODY_TIMEOUT_S` (408); it is parsed like a stdio line
(:func:`fsnotes.protocol.inbound.parse`: 400 with the JSON-RPC error). One message per POST: a
batch is 400.

The era is the request's (2026-07-28 versioning, "Backward Compatibility"): a body whose
``_meta`` names a protocol version, or an ``MCP-Protocol-Version`` header naming no legacy
version, is **2026-07-28**, served statelessly (``Mcp-Session-Id`` ignored): the mirrored headers
must match the body (400, -32020), ``initialize`` is an unknown method there (404, -32601), and
errors carry the statuses of :func:`~fsnotes.transport.http_wire.modern_status`. The answer is
JSON, or an SSE stream of that request's progress and log messages ending with it; closing the
stream cancels the request. A notification POST gets 202; a GET or DELETE without a session
405. Anything else is **2025-11-25**: ``initialize`` opens a session
(:mod:`http_sessions`) whose id the response's ``Mcp-Session-Id`` carries; later POSTs name it
(404 once it ended), the client answers our requests (elicitation, roots) by POSTing the
responses, GET opens the session's stream for messages tied to no request, DELETE ends it. In
that era a closed stream does not cancel (the spec: "Disconnection SHOULD NOT be interpreted as
the client cancelling its request"; ``notifications/cancelled`` does).

The core does the rest: one :class:`~fsnotes.protocol.dispatch.Dispatcher` for all, one
:class:`~fsnotes.runtime.connection.ServerConnection` per session, one
:class:`~fsnotes.runtime.runner.Runner` for the stateless requests (the runner stdio and the
sessions use), and one in-flight budget (:class:`~fsnotes.runtime.budget.InFlightBudget`) and
one budget of answers waiting to be written (:class:`~fsnotes.runtime.answers.AnswerBudget`)
shared by every request of both eras, so the number of clients does not multiply what they can
make the server hold.
Not supported (MAY in the spec): resuming streams with ``Last-Event-ID`` (ignored), batches of a
2025-03-26 session, CORS (no browser page can read an answer).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import anyio.abc
from starlette.types import Receive, Scope, Send

from fsnotes.protocol import inbound, limits
from fsnotes.protocol.dispatch import Dispatcher, Reply
from fsnotes.protocol.framing import encode_message
from fsnotes.protocol.registry import App
from fsnotes.protocol.versions import ADVERTISED_VERSIONS, LEGACY_VERSIONS
from fsnotes.protocol.wire import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    Fault,
    RequestId,
    error_message,
    fault_message,
)
from fsnotes.runtime.answers import AnswerBudget
from fsnotes.runtime.budget import InFlightBudget
from fsnotes.runtime.runner import Runner
from fsnotes.security.tokens import Authenticator, Identity, InsufficientScope, Unauthenticated
from fsnotes.transport import http_wire as hw
from fsnotes.transport.http_legacy import LegacySessions
from fsnotes.transport.http_reply import (
    CLOSE,
    RETRY_AFTER,
    HttpReply,
    ModernPeer,
    Stalled,
    refuse,
    respond,
    until_gone,
)
from fsnotes.transport.http_sessions import (
    SESSION_SWEEP_S,
    SessionTable,
)
from fsnotes.transport.http_settings import ENDPOINT_PATH, HttpSettings

_log = logging.getLogger("fsnotes.transport")

# A request body must arrive within this long (after its headers): a client dribbling its body
# holds a connection for no longer. 8 MiB at 1.1 Mbit/s fits; on loopback it is milliseconds.
BODY_TIMEOUT_S = 60.0
# Most 2026-07-28 requests served at once (those of sessions count in their connections): the
# stdio bound (limits.MAX_IN_FLIGHT). Past it, and past the in-flight budget, 503.
MAX_MODERN_IN_FLIGHT = limits.MAX_IN_FLIGHT


def _refusal(request_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    return encode_message(error_message(request_id, code, message, data))


class McpEndpoint:
    """The ASGI app of ``/mcp`` for one :class:`App` (see the module docstring).

    ``port`` is the bound port (the Host allowlist names it); :meth:`run` must run beside the
    HTTP server (it holds the sessions' background tasks and ends idle sessions).
    """

    def __init__(
        self,
        app: App,
        settings: HttpSettings,
        authenticator: Authenticator,
        *,
        port: int,
        sessions: SessionTable | None = None,
        body_timeout: float = BODY_TIMEOUT_S,
    ) -> None:
        self.app = app
        self.settings = settings
        self.authenticator = authenticator
        self.dispatcher = Dispatcher(app)
        self.budget = InFlightBudget(limits.MAX_IN_FLIGHT_BYTES)
        self.answers = AnswerBudget(limits.MAX_PENDING_ANSWER_BYTES)
        self.sessions = sessions or SessionTable()
        # The stateless requests' runner: at most MAX_MODERN_IN_FLIGHT at once.
        self.stateless = Runner(
            self.dispatcher,
            budget=self.budget,
            answers=self.answers,
            max_in_flight=MAX_MODERN_IN_FLIGHT,
        )
        self.body_timeout = body_timeout
        self._hosts = settings.allowed_hosts(port)
        self._origins = settings.allowed_origins(port)
        self.legacy = LegacySessions(app, self.dispatcher, self.budget, self.answers, self.sessions)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The endpoint's own work while it serves: sessions' background tasks (roots
        fetches) and the idle sweep. Ends every session when cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                self.legacy.task_group = tg
                task_status.started()
                while True:
                    await anyio.sleep(SESSION_SWEEP_S)
                    self.sessions.expire(anyio.current_time())
        finally:
            self.legacy.task_group = None
            self.sessions.end_all("the server is stopping")

    # --- the checks every request passes -------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off and websockets are disabled; nothing else reaches us
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        if sum(len(k) + len(v) + 4 for k, v in headers) > hw.MAX_HEADER_BYTES:
            # h11 limits headers still arriving; ones that came in one read are counted here.
            await refuse(send, 431, "Request header fields too large", CLOSE)
            return
        host, repeated = hw.single(headers, "host")
        if host is None or repeated or host.lower() not in self._hosts:
            await refuse(send, 403, "Forbidden: this server does not answer at that Host")
            return
        origin, repeated = hw.single(headers, "origin")
        if repeated or (origin is not None and origin.lower() not in self._origins):
            await refuse(send, 403, "Forbidden: requests from that Origin are refused")
            return
        oauth = self.settings.oauth
        if oauth is not None and scope["path"] in oauth.metadata_paths:
            # RFC 9728 3: the protected resource metadata, for anyone (it holds no secret).
            if scope["method"] not in ("GET", "HEAD"):
                await refuse(send, 405, "Method not allowed", [(b"allow", b"GET")])
                return
            await respond(send, 200, json.dumps(oauth.metadata()).encode())
            return
        try:
            identity = await self._identity(headers)
        except InsufficientScope:
            await respond(
                send,
                403,
                _refusal(None, INVALID_REQUEST, "Forbidden: insufficient scope"),
                [(b"www-authenticate", self._challenge("insufficient_scope"))],
            )
            return
        if identity is None:
            presented = hw.single(headers, "authorization")[0] is not None
            await respond(
                send,
                401,
                _refusal(None, INVALID_REQUEST, "Unauthorized"),
                [(b"www-authenticate", self._challenge("invalid_token" if presented else None))],
            )
            return
        if scope["path"] != ENDPOINT_PATH:
            await refuse(send, 404, f"Not found: the MCP endpoint is {ENDPOINT_PATH}")
            return
        method = scope["method"]
        try:
            if method == "POST":
                await self._post(scope, receive, send, identity)
            elif method in ("GET", "DELETE"):
                await self.legacy.verb(method, scope, receive, send, identity)
            else:
                await refuse(
                    send, 405, f"Method not allowed: {method}", [(b"allow", b"GET, POST, DELETE")]
                )
        except Stalled:
            # Returning with the response unfinished makes uvicorn close the connection (and
            # log one line, where raising would log a traceback for a client's behaviour).
            _log.warning("an HTTP client read nothing for a while; closing its connection")

    def _challenge(self, error: str | None) -> bytes:
        """``WWW-Authenticate``: plain ``Bearer`` with static tokens only; with OAuth, the
        MCP authorization spec's ``resource_metadata`` and ``scope`` (RFC 9728 5.1, RFC 6750
        3), and ``error`` when a token was presented (none when it was absent, RFC 6750 3.1)."""
        oauth = self.settings.oauth
        if oauth is None:
            return b"Bearer"
        parts = [
            f'resource_metadata="{oauth.metadata_url}"',
            f'scope="{" ".join(oauth.scopes_supported)}"',
        ]
        if error is not None:
            parts.insert(0, f'error="{error}"')
        return ("Bearer " + ", ".join(parts)).encode()

    async def _identity(self, headers: list[tuple[bytes, bytes]]) -> Identity | None:
        value, repeated = hw.single(headers, "authorization")
        if value is None or repeated:
            return None
        try:
            return await self.authenticator.authenticate({"authorization": value})
        except Unauthenticated:
            return None

    # --- POST ------------------------------------------------------------------------------

    async def _read_body(
        self, receive: Receive, send: Send, headers: list[tuple[bytes, bytes]]
    ) -> bytes | None:
        """The body, or ``None`` once a refusal was sent (or the client went away)."""
        declared, repeated = hw.single(headers, "content-length")
        too_large = f"Message too large: a POST body is at most {hw.MAX_BODY_BYTES} bytes"
        if declared is not None and (repeated or not declared.strip().isdigit()):
            await refuse(send, 400, "Bad request: malformed Content-Length")
            return None
        if declared is not None and int(declared) > hw.MAX_BODY_BYTES:
            await refuse(send, 413, too_large)
            return None
        body = bytearray()
        with anyio.move_on_after(self.body_timeout) as timer:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                body += message.get("body", b"")
                if len(body) > hw.MAX_BODY_BYTES:
                    await refuse(send, 413, too_large, CLOSE)
                    return None
                if not message.get("more_body", False):
                    return bytes(body)
        if timer.cancelled_caught:
            await refuse(
                send,
                408,
                f"Request timeout: the body did not arrive within {self.body_timeout:g} s",
                CLOSE,
            )
        return None

    async def _post(self, scope: Scope, receive: Receive, send: Send, identity: Identity) -> None:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        content_type, repeated = hw.single(headers, "content-type")
        if repeated or hw.media_type(content_type) != "application/json":
            await refuse(
                send, 415, "Unsupported media type: POST one JSON-RPC message as application/json"
            )
            return
        json_ok, sse_ok = hw.accepts(hw.single(headers, "accept")[0])
        if not (json_ok and sse_ok):
            await refuse(
                send,
                406,
                "Not acceptable: the Accept header must list both application/json and "
                "text/event-stream",
            )
            return
        body = await self._read_body(receive, send, headers)
        if body is None:
            return
        parsed = inbound.parse(body)
        if isinstance(parsed, inbound.Rejected):
            await respond(send, 400, encode_message(parsed.error))
            return
        message = parsed.message
        if isinstance(message, list):
            await refuse(
                send, 400, "Batches are not supported: POST one JSON-RPC message at a time"
            )
            return
        if not isinstance(message, dict):
            await refuse(send, 400, "Invalid request: not a JSON object")
            return
        envelope = inbound.classify(message)
        version, repeated = hw.single(headers, hw.PROTOCOL_VERSION_HEADER)
        session_id, repeated_id = hw.single(headers, hw.SESSION_HEADER)
        request_id = envelope.id if isinstance(envelope, inbound.Request) else None
        if repeated or repeated_id:
            await refuse(
                send,
                400,
                "Header mismatch: MCP-Protocol-Version or Mcp-Session-Id appears more than once",
                request_id=request_id,
                code=hw.HEADER_MISMATCH,
            )
            return
        # The body's era tag (read once, by classify), or a header naming no legacy version.
        modern = (
            isinstance(envelope, inbound.Request | inbound.Notification) and envelope.modern
        ) or (version is not None and version.strip(" \t") not in LEGACY_VERSIONS)
        if modern:
            await self._modern(envelope, parsed, version, scope, receive, send, identity)
        else:
            await self.legacy.post(envelope, parsed, session_id, receive, send, identity)

    # --- 2026-07-28 ------------------------------------------------------------------------

    async def _modern(
        self,
        envelope: inbound.Envelope,
        parsed: inbound.Parsed,
        version: str | None,
        scope: Scope,
        receive: Receive,
        send: Send,
        identity: Identity,
    ) -> None:
        if isinstance(envelope, inbound.Notification):
            # 2026-07-28 defines no client-to-server notification over HTTP (closing the stream
            # cancels): accepted and dropped. Honouring notifications/cancelled by request id
            # would let one caller cancel another's request.
            await respond(send, 202, json=False)
            return
        if isinstance(envelope, inbound.Invalid):
            await respond(send, 400, encode_message(envelope.error))
            return
        if not isinstance(envelope, inbound.Request):
            # streamable-http "Sending Messages": "The client MUST NOT send JSON-RPC responses."
            await refuse(
                send, 400, "Invalid request: a 2026-07-28 client sends no responses over HTTP"
            )
            return
        request_id, method, params = envelope.id, envelope.method, envelope.params
        if envelope.tag is not None:
            fault = hw.check_mirrored_headers(
                scope["headers"], method, params, envelope.tag.version
            ) or self._param_headers(scope["headers"], method, params)
            if fault is not None:
                await respond(send, 400, encode_message(fault_message(request_id, fault)))
                return
        elif version is not None and version.strip(" \t") not in ADVERTISED_VERSIONS:
            await refuse(
                send,
                400,
                "Unsupported protocol version",
                request_id=request_id,
                code=UNSUPPORTED_PROTOCOL_VERSION,
                data={"supported": list(ADVERTISED_VERSIONS), "requested": version.strip()},
            )
            return
        if method == "initialize":
            # 2026-07-28 has no handshake: to a request in this era, initialize is unknown
            # (streamable-http: unknown method -> 404 with -32601).
            await refuse(
                send,
                404,
                "Method not found: initialize (2026-07-28 has no handshake: send _meta on "
                "every request, or initialize without _meta for 2025-11-25)",
                request_id=request_id,
                code=METHOD_NOT_FOUND,
            )
            return
        # Admitted before it is routed, so that a client at the bound is told to back off
        # (503, Retry-After) whatever it asks; routing is pure, so nothing changed meanwhile.
        if not self.stateless.has_room(parsed.cost.charge):
            await self._busy(send, request_id)
            return
        routed = self.dispatcher.route(
            envelope,
            session=None,
            principal=identity.principal,
            ceiling=identity.ceiling_label,
        )
        if isinstance(routed, Reply):
            message = routed.message
            await respond(send, hw.modern_status(message), encode_message(message))
            return
        try:
            job = self.stateless.start(routed, parsed.cost.charge, keyed=False)
        except Fault:  # not reached: room was checked above, with no wait since
            await self._busy(send, request_id)
            return
        reply = HttpReply(send)
        # Closing the stream cancels the request (2026-07-28 streamable-http).
        await until_gone(receive, reply, lambda: job.run(ModernPeer(reply)), cancel=True)
        if reply.gone and not reply.done:
            _log.debug("request %r: its stream closed, so it was cancelled", request_id)
        if reply.stalled:
            raise Stalled

    def _param_headers(
        self, headers: list[tuple[bytes, bytes]], method: str, params: dict[str, Any]
    ) -> Fault | None:
        """A tools/call's Mcp-Param-* headers against its arguments, for a tool with
        mirrored parameters (an unknown tool is the core's to answer)."""
        name = params.get("name")
        if method != "tools/call" or not isinstance(name, str):
            return None
        entry = self.dispatcher.tools.get(name)
        if entry is None or not entry.headers:
            return None
        return hw.check_param_headers(headers, entry.headers, params.get("arguments"))

    async def _busy(self, send: Send, request_id: RequestId | None) -> None:
        await refuse(
            send,
            503,
            f"Server busy: too many requests in flight (at most {MAX_MODERN_IN_FLIGHT}, "
            f"{self.budget.max_bytes} bytes); retry later",
            [RETRY_AFTER],
            request_id=request_id,
            code=INTERNAL_ERROR,
        )
