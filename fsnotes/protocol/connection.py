"""One client's channel: parsed messages in, actions out (a stdio process, or one Streamable
HTTP legacy session).

:class:`ServerConnection` is what a stdio process holds for its client, and what the HTTP
transport holds for each ``Mcp-Session-Id``: line parsing and batches (stdio), the budgets
(requests and bytes in flight, answers waiting to be written), the table of requests in flight
and their cancellation, our server-to-client request ids and their replies, and the one legacy
:class:`~fsnotes.protocol.session.Session` an ``initialize`` opens. What a request means is the
:class:`~fsnotes.protocol.dispatch.Dispatcher`'s to say; this module only feeds it, with the
principal the transport names.

It never reads, writes, sleeps or looks at a clock: the transport performs the actions
(:class:`Send`, :class:`StartTask`, :class:`CancelTask`, :class:`DeliverReply`), runs each
:class:`StartTask` in its own cancel scope, and supplies a :class:`Peer` (send a message; send a
request and wait, bounded by a timeout the transport measures).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import anyio

from fsnotes.protocol import inbound, limits
from fsnotes.protocol.budget import Hold, InFlightBudget
from fsnotes.protocol.calls import Call, Channel
from fsnotes.protocol.dispatch import Dispatcher, Reply
from fsnotes.protocol.framing import encode_message
from fsnotes.protocol.linecost import LineCost, line_cost
from fsnotes.protocol.registry import App, JSONObject
from fsnotes.protocol.session import Session
from fsnotes.protocol.wire import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    META_SERVER_INFO,
    Action,
    CancelTask,
    DeliverReply,
    Fault,
    Peer,
    RequestId,
    Send,
    StartTask,
    TaskKey,
    cancelled,
    error_message,
    fault_message,
    valid_id,
)

# Imported from here before the core was split; their home is wire.py now.
__all__ = [
    "META_SERVER_INFO",
    "Action",
    "CancelTask",
    "DeliverReply",
    "Peer",
    "Send",
    "ServerConnection",
    "StartTask",
    "TaskKey",
    "error_message",
]

_log = logging.getLogger("fsnotes.protocol")


def _cost_of(message: Any) -> LineCost:
    """The cost of ``message`` measured as the compact JSON line it would be (a batch member,
    or a message handed over already parsed)."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return LineCost(1, 0)  # not from JSON (a test's value): nothing a peer sent to count
    return line_cost(text.encode("utf-8", "surrogatepass"))


@dataclass
class _Entry:
    """A request in flight: its call, and what the connection keeps for it."""

    call: Call
    charge: int  # what the request's line holds once parsed (LineCost.charge)
    # Charged for the request and the answers it waits for; given back when its task ends.
    hold: Hold = field(default_factory=Hold)
    # Did it ask the client anything? Then it may not run again (a second run would ask again).
    asked: bool = False


class _Channel:
    """A request's (or the roots fetch's) way to the client, over the task's :class:`Peer`:
    the :class:`~fsnotes.protocol.calls.Channel` the dispatcher is given."""

    def __init__(
        self, conn: ServerConnection, peer: Peer, hold: Hold, entry: _Entry | None
    ) -> None:
        self._conn = conn
        self._peer = peer
        self._hold = hold
        self._entry = entry

    @property
    def closed(self) -> bool:
        return self._conn._closed

    async def send(self, message: JSONObject) -> None:
        await self._peer.send(message)

    async def ask(
        self, method: str, params: JSONObject | None, timeout: float
    ) -> JSONObject | None:
        if self._entry is not None:
            self._entry.asked = True
        return await self._conn._ask(self._peer, method, params, timeout, self._hold)


class ServerConnection:
    """One client's MCP server channel (both eras). See the module docstring.

    ``principal`` is who every request on this connection acts for: on stdio it comes from the
    server's configuration (stdio has no MCP authentication); an HTTP session acts for the
    principal whose token opened it. It is handed to the dispatcher with each request, in
    whose context it travels (nothing below keeps it).

    ``dispatcher`` and ``budget`` may be shared between connections (the HTTP transport shares
    both between its sessions); by default each connection makes its own, with
    ``max_in_flight_bytes``.
    """

    def __init__(
        self,
        app: App,
        *,
        principal: str,
        tools_page_size: int = limits.TOOLS_PAGE_SIZE,
        max_in_flight: int = limits.MAX_IN_FLIGHT,
        max_in_flight_bytes: int = limits.MAX_IN_FLIGHT_BYTES,
        max_pending_answer_bytes: int = limits.MAX_PENDING_ANSWER_BYTES,
        input_timeout: float = limits.INPUT_REQUEST_TIMEOUT_S,
        roots_timeout: float = limits.ROOTS_REQUEST_TIMEOUT_S,
        max_input_rounds: int = limits.MAX_INPUT_ROUNDS,
        dispatcher: Dispatcher | None = None,
        budget: InFlightBudget | None = None,
    ) -> None:
        self.app = app
        self.principal = principal
        self.max_in_flight = max_in_flight
        self.budget = budget if budget is not None else InFlightBudget(max_in_flight_bytes)
        self.max_pending_answer_bytes = max_pending_answer_bytes
        self.dispatcher = dispatcher or Dispatcher(
            app,
            tools_page_size=tools_page_size,
            input_timeout=input_timeout,
            roots_timeout=roots_timeout,
            max_input_rounds=max_input_rounds,
        )
        # The legacy session, once initialize opened it (one per process on stdio).
        self.session: Session | None = None
        self._in_flight: dict[TaskKey, _Entry] = {}
        # Our server-to-client requests awaiting an answer, with what the answer is charged to.
        self._pending: dict[int, Hold] = {}
        # Encoded answers of finished requests waiting to be written, and room reserved for
        # answers being computed again (see _admit); the event is set whenever that falls.
        self._answer_bytes = 0
        self._answer_room: anyio.Event | None = None
        self._rerun_turn: anyio.Lock | None = None
        self._next_server_id = 1
        self._closed = False
        self._roots_runs = 0

    # --- public surface --------------------------------------------------------------------

    @property
    def legacy_version(self) -> str | None:
        """The version negotiated by ``initialize``, or ``None`` before it."""
        return self.session.version if self.session else None

    @property
    def in_flight(self) -> int:
        """How many client requests are being handled now."""
        return len(self._in_flight)

    @property
    def max_in_flight_bytes(self) -> int:
        """The in-flight budget's size (shared with other connections when the budget is)."""
        return self.budget.max_bytes

    @property
    def in_flight_bytes(self) -> int:
        """Bytes charged for the requests whose tasks still run and the answers they wait for
        (each line's :attr:`LineCost.charge`), at most ``max_in_flight_bytes`` (of every
        connection sharing the budget)."""
        return self.budget.held

    @property
    def pending_answer_bytes(self) -> int:
        """Bytes of the encoded answers that finished requests hold until they are written, and
        of the room reserved for answers being computed again (see :meth:`_admit`)."""
        return self._answer_bytes

    @property
    def answers_backlogged(self) -> bool:
        """Do answers waiting to be written fill half of ``max_pending_answer_bytes`` or more?
        While they do, the transport should read no more requests (a high-water mark, as in
        node's streams): the client is not keeping up, and the other half is left for the
        answers of requests already running."""
        return self._answer_bytes * 2 >= self.max_pending_answer_bytes

    async def answers_drained(self) -> None:
        """Return once :attr:`answers_backlogged` is false (at once if it is)."""
        while self.answers_backlogged:
            await self._answer_room_changed()

    async def _answer_room_changed(self) -> None:
        if self._answer_room is None:
            self._answer_room = anyio.Event()
        await self._answer_room.wait()

    def _free_answer_bytes(self, size: int) -> None:
        self._answer_bytes -= size
        room, self._answer_room = self._answer_room, None
        if room is not None:
            room.set()

    def _fits(self, size: int) -> bool:
        """May an answer of ``size`` bytes be kept beside those already waiting?"""
        waiting = self._answer_bytes
        return (
            size <= limits.SMALL_ANSWER_BYTES
            or not waiting
            or waiting + size <= self.max_pending_answer_bytes
        )

    def receive_line(self, line: bytes) -> list[Action]:
        """Handle one line (without its newline).

        A line of more than :data:`limits.MAX_LINE_VALUES` JSON values is refused unparsed (its
        values would hold up to 25 times its size); a request whose line would take the
        requests in flight past ``max_in_flight_bytes`` is answered "busy".
        """
        parsed = inbound.parse(line, unit="line")
        if isinstance(parsed, inbound.Rejected):
            return [Send(parsed.error)]
        return self._receive(parsed.message, parsed.cost)

    def line_too_long(self, limit: int) -> list[Action]:
        """A line longer than ``limit`` bytes was skipped unread."""
        return [
            Send(
                error_message(
                    None,
                    INVALID_REQUEST,
                    f"Message too large: lines longer than {limit} bytes are skipped",
                )
            )
        ]

    def client_closed(self) -> None:
        """The client's input ended: nothing more can be answered by it."""
        self._closed = True

    def receive_message(self, message: Any) -> list[Action]:
        """Handle one parsed JSON value (charged as the compact JSON line it would be)."""
        return self._receive(message, None)

    def receive_parsed(self, parsed: inbound.Parsed) -> list[Action]:
        """Handle one message parsed by :func:`inbound.parse` (charged what its bytes cost)."""
        return self._receive(parsed.message, parsed.cost)

    def _receive(self, message: Any, cost: LineCost | None) -> list[Action]:
        """Handle one parsed value; ``cost`` is its line's, or ``None`` to measure it here."""
        if isinstance(message, list):
            if message and self.session is not None and self.session.version == "2025-03-26":
                # 2025-03-26 only: servers MUST support receiving batches. Each member is
                # handled (and answered) as if it had come on its own line, up to a cap: every
                # member costs a reply, so an uncapped batch of tiny members multiplies the line.
                if len(message) > limits.MAX_BATCH_MEMBERS:
                    return [
                        Send(
                            error_message(
                                None,
                                INVALID_REQUEST,
                                f"Batch too large: at most {limits.MAX_BATCH_MEMBERS} messages "
                                "in one batch; nothing in it was handled",
                            )
                        )
                    ]
                actions: list[Action] = []
                for item in message:
                    if isinstance(item, list):
                        item = None  # no nested batches: answered as "not a JSON object"
                    # Each member is charged for itself (measured on its own JSON): the line's
                    # charge would over-count, and a share of it could under-count the member
                    # that outlives the others.
                    actions += self._receive(item, None)
                return actions
            # JSON-RPC batches were removed in 2025-06-18; the id cannot be chosen, so omit it.
            return [
                Send(
                    error_message(
                        None,
                        INVALID_REQUEST,
                        "Batches are not supported: send one JSON-RPC message per line",
                    )
                )
            ]
        if not isinstance(message, dict):
            return [
                Send(error_message(None, INVALID_REQUEST, "Invalid request: not a JSON object"))
            ]
        if cost is None:
            cost = _cost_of(message)
        envelope = inbound.classify(message)
        if isinstance(envelope, inbound.Request):
            return self._on_request(envelope.id, envelope.method, envelope.params, cost.charge)
        if isinstance(envelope, inbound.Notification):
            return self._on_notification(envelope.method, envelope.params)
        if isinstance(envelope, inbound.Response):
            return self._on_response(envelope.id, envelope.message, cost.charge)
        if isinstance(envelope, inbound.Invalid):
            return [Send(envelope.error)]
        return []

    # --- notifications and responses --------------------------------------------------------

    def _on_notification(self, method: str, params: Any) -> list[Action]:
        if method == "notifications/cancelled":
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if not valid_id(request_id):
                return []
            key: TaskKey = ("request", request_id)
            entry = self._in_flight.pop(key, None)
            if entry is None:
                return []  # unknown or finished: ignore (cancellation §receiver)
            entry.call.active = False
            return [CancelTask(key)]
        session = self.session
        if session is not None and self.dispatcher.notified(session, method):
            return self._fetch_roots(session)
        return []

    def _on_response(self, raw_id: Any, message: JSONObject, charge: int) -> list[Action]:
        # Only answers to our own pending requests count; anything else is ignored.
        if isinstance(raw_id, int) and not isinstance(raw_id, bool) and raw_id in self._pending:
            hold = self._pending.pop(raw_id)
            if not self._reserve(hold, charge):
                # The waiting task keeps the answer until it ends: charged like a request, and
                # dropped (the task sees an error answer) when the budget cannot take it.
                message = error_message(
                    raw_id,
                    INTERNAL_ERROR,
                    f"answer dropped: {charge} bytes would take the requests in flight past "
                    f"{self.max_in_flight_bytes}",
                )
            return [DeliverReply(raw_id, message)]
        _log.info("ignored a response to id %r, which has no pending request", raw_id)
        return []

    # --- requests ------------------------------------------------------------------------------

    def _on_request(
        self, request_id: RequestId, method: str, params: Any, charge: int
    ) -> list[Action]:
        if ("request", request_id) in self._in_flight:
            return [
                Send(
                    error_message(
                        request_id, INVALID_REQUEST, "Invalid request: this id is already in flight"
                    )
                )
            ]
        routed = self.dispatcher.route(
            request_id, method, params, session=self.session, principal=self.principal
        )
        if isinstance(routed, Reply):
            if routed.opened is not None:
                self.session = routed.opened
            return [Send(routed.message)]
        try:
            return self._start(routed, charge)
        except Fault as fault:
            return [Send(fault_message(request_id, fault))]

    def _start(self, call: Call, charge: int) -> list[Action]:
        if len(self._in_flight) >= self.max_in_flight:
            raise Fault(
                INTERNAL_ERROR,
                f"Server busy: {self.max_in_flight} requests are already in flight; retry later",
            )
        entry = _Entry(call, charge)
        if not self._reserve(entry.hold, charge):
            raise Fault(
                INTERNAL_ERROR,
                f"Server busy: this request is charged {charge} bytes (what its line "
                f"holds parsed), and the requests in flight already hold {self.budget.held} of "
                f"{self.budget.max_bytes}; retry later",
            )
        key: TaskKey = ("request", call.id)
        self._in_flight[key] = entry
        dispatcher = self.dispatcher

        async def run(peer: Peer) -> None:
            channel: Channel = _Channel(self, peer, entry.hold, entry)
            reserved = 0
            try:
                # The answer is passed on, never named here: this frame must not keep it alive
                # while it waits to be written (only its encoding is held, and charged).
                line = self._admit(key, entry, await dispatcher.respond(call, channel), 0)
                while isinstance(line, int):
                    # Dropped for want of room: run again once an answer of its size fits, with
                    # that room reserved meanwhile (turns taken in order), so a backlog is
                    # recomputed as fast as it drains and never in vain.
                    if self._rerun_turn is None:
                        self._rerun_turn = anyio.Lock()
                    async with self._rerun_turn:
                        while not self._fits(line):
                            await self._answer_room_changed()
                        reserved = line
                        self._answer_bytes += reserved
                    line = self._admit(
                        key, entry, await dispatcher.respond(call, channel), reserved
                    )
                    reserved = 0
                if line:
                    await self._deliver(peer, line)
            finally:
                if reserved:
                    self._free_answer_bytes(reserved)
                if self._in_flight.get(key) is entry:
                    del self._in_flight[key]
                call.active = False
                # Given back when the task ends, not when a cancel arrives: a cancelled handler
                # may still be running (in a worker thread) and holding its arguments.
                self._release(entry.hold)

        return [StartTask(key, run)]

    def _admit(
        self, key: TaskKey, entry: _Entry, message: JSONObject, reserved: int
    ) -> bytes | int:
        """Encode ``message``, the response to ``entry``'s call, and charge it to the answers
        waiting to be written (in place of the ``reserved`` room, given back here); return the
        line for :meth:`_deliver`, ``b""`` if the request was cancelled (it gets nothing more),
        or the answer's size if it was dropped and the request is to run again when that fits.

        An answer larger than :data:`limits.SMALL_ANSWER_BYTES` that would take the answers
        waiting past ``max_pending_answer_bytes`` is dropped, unless nothing else waits (so any
        one answer can be delivered): a request that only reads runs again, any other is
        answered "busy". Small answers are always kept: what writes, deletes and errors answer
        is never replaced after the work was done. Nothing keeps ``message`` once this returns
        (the caller must not name it), so a dropped answer is freed at once and a kept one is
        held once, as bytes.
        """
        if reserved:
            self._free_answer_bytes(reserved)
        # A cancelled request gets nothing more (cancellation: "send no response").
        if self._in_flight.get(key) is not entry:
            return b""
        request = entry.call
        try:
            line = encode_message(message)
        except (TypeError, ValueError):
            # A result JSON cannot carry (a handler bug): encoding fails before anything is
            # written, so the client still gets exactly one answer.
            _log.exception("result of %s (request %r) is not JSON", request.method, request.id)
            line = encode_message(error_message(request.id, INTERNAL_ERROR, "Internal error"))
        size = len(line)
        if not self._fits(size):
            waiting = self._answer_bytes
            if request.reads_only and not entry.asked:
                _log.debug(
                    "the %d-byte answer to request %r waits for room (%d bytes of answers "
                    "wait to be written); it will be computed again",
                    size,
                    request.id,
                    waiting,
                )
                return size
            _log.warning(
                "dropped the %d-byte answer to request %r: %d bytes of answers wait for the "
                "client to read them",
                size,
                request.id,
                waiting,
            )
            line = encode_message(
                error_message(
                    request.id,
                    INTERNAL_ERROR,
                    f"Server busy: this request was carried out, but its {size}-byte answer "
                    f"was dropped: {waiting} bytes of earlier answers are waiting for the "
                    f"client to read them (at most {self.max_pending_answer_bytes} are kept)",
                )
            )
        del self._in_flight[key]
        request.active = False
        self._answer_bytes += len(line)
        return line

    async def _deliver(self, peer: Peer, line: bytes) -> None:
        """Write an answer :meth:`_admit` charged, and give its charge back once written."""
        try:
            await peer.write(line)
        finally:
            self._free_answer_bytes(len(line))

    def _reserve(self, hold: Hold, charge: int) -> bool:
        """Charge ``charge`` bytes to ``hold`` if the in-flight budget has room."""
        return self.budget.reserve(hold, charge)

    def _release(self, hold: Hold) -> None:
        self.budget.release(hold)

    # --- server-to-client requests -------------------------------------------------------------

    async def _ask(
        self, peer: Peer, method: str, params: JSONObject | None, timeout: float, hold: Hold
    ) -> JSONObject | None:
        """A legacy server-to-client request; ``None`` on timeout or when the client is gone.
        The answer is charged to ``hold`` (its owner gives it back)."""
        if self._closed:
            return None
        request_id = self._next_server_id
        self._next_server_id += 1
        message: JSONObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._pending[request_id] = hold
        try:
            reply = await peer.request(request_id, message, timeout)
        except anyio.get_cancelled_exc_class():
            if request_id in self._pending and not self._closed:
                del self._pending[request_id]
                with anyio.CancelScope(shield=True):
                    await peer.send(
                        cancelled(request_id, "the request that needed this input was cancelled")
                    )
            raise
        if reply is None and request_id in self._pending and not self._closed:
            # Cancellation works both ways in 2025-11-25: withdraw the unanswered request.
            await peer.send(cancelled(request_id, "no answer in time"))
        self._pending.pop(request_id, None)
        return reply

    def _fetch_roots(self, session: Session) -> list[Action]:
        """Run the session's roots fetch (the dispatcher said one is due), again while
        notifications asked for one meanwhile."""
        self._roots_runs += 1
        dispatcher = self.dispatcher

        async def run(peer: Peer) -> None:
            hold = Hold()
            try:
                while True:
                    session.roots_again = False
                    await dispatcher.refresh_roots(session, _Channel(self, peer, hold, None))
                    self._release(hold)
                    if not session.roots_again:
                        return
            finally:
                session.roots_running = False
                self._release(hold)

        return [StartTask(("roots", self._roots_runs), run)]
