"""One client's channel: messages in, what to write and the jobs to run out (a stdio process,
or one Streamable HTTP legacy session).

:class:`ServerConnection` is what a stdio process holds for its client, and what the HTTP
transport holds for each ``Mcp-Session-Id``: line parsing and batches (stdio), the one legacy
:class:`~fsnotes.protocol.session.Session` an ``initialize`` opens, and its
:class:`~fsnotes.runtime.runner.Runner` (requests in flight and their cancellation, budgets,
our requests to the client and their answers). What a request means is the
:class:`~fsnotes.protocol.dispatch.Dispatcher`'s to say; this module feeds it, with the
principal the transport names, and gives what it routes to the runner.

It never reads or writes: each message gives the transport :class:`Write` (write this now) and
:class:`Job` items (run this where you choose, with a :class:`Peer`). A cancellation or the
client's answer to our request is handled here and gives the transport nothing to do.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fsnotes.protocol import inbound, limits
from fsnotes.protocol.dispatch import Dispatcher, Reply
from fsnotes.protocol.linecost import LineCost, line_cost
from fsnotes.protocol.registry import App, Ceiling, JSONObject
from fsnotes.protocol.session import Session
from fsnotes.protocol.wire import (
    INVALID_REQUEST,
    Fault,
    RequestId,
    error_message,
    fault_message,
    valid_id,
)
from fsnotes.runtime.answers import AnswerBudget
from fsnotes.runtime.budget import InFlightBudget
from fsnotes.runtime.runner import Job, Peer, Runner, TaskKey, Write

__all__ = ["Job", "Out", "Peer", "ServerConnection", "TaskKey", "Write"]

_log = logging.getLogger("fsnotes.runtime")

Out = Write | Job


def _cost_of(message: Any) -> LineCost:
    """The cost of ``message`` measured as the compact JSON line it would be (a batch member,
    or a message handed over already parsed)."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return LineCost(1, 0)  # not from JSON (a test's value): nothing a peer sent to count
    return line_cost(text.encode("utf-8", "surrogatepass"))


class ServerConnection:
    """One client's MCP server channel (both eras). See the module docstring.

    ``principal`` is who every request on this connection acts for: on stdio it comes from the
    server's configuration (stdio has no MCP authentication); an HTTP session acts for the
    principal whose token opened it. ``ceiling`` is the most that token allows (its OAuth
    scopes; ``None``: no limit beyond the grants). Both are handed to the dispatcher with
    each request, in whose context they travel (nothing below keeps them).

    ``dispatcher``, ``budget`` and ``answers`` may be shared between connections (the HTTP
    transport shares them between its sessions and its stateless requests); by default each
    connection makes its own, of ``max_in_flight_bytes`` and ``max_pending_answer_bytes``.
    """

    def __init__(
        self,
        app: App,
        *,
        principal: str,
        ceiling: Ceiling | None = None,
        tools_page_size: int = limits.TOOLS_PAGE_SIZE,
        max_in_flight: int = limits.MAX_IN_FLIGHT,
        max_in_flight_bytes: int = limits.MAX_IN_FLIGHT_BYTES,
        max_pending_answer_bytes: int = limits.MAX_PENDING_ANSWER_BYTES,
        input_timeout: float = limits.INPUT_REQUEST_TIMEOUT_S,
        roots_timeout: float = limits.ROOTS_REQUEST_TIMEOUT_S,
        max_input_rounds: int = limits.MAX_INPUT_ROUNDS,
        dispatcher: Dispatcher | None = None,
        budget: InFlightBudget | None = None,
        answers: AnswerBudget | None = None,
    ) -> None:
        self.app = app
        self.principal = principal
        self.ceiling: Ceiling | None = ceiling
        self.dispatcher = dispatcher or Dispatcher(
            app,
            tools_page_size=tools_page_size,
            input_timeout=input_timeout,
            roots_timeout=roots_timeout,
            max_input_rounds=max_input_rounds,
        )
        self.runner = Runner(
            self.dispatcher,
            budget=budget if budget is not None else InFlightBudget(max_in_flight_bytes),
            answers=answers if answers is not None else AnswerBudget(max_pending_answer_bytes),
            max_in_flight=max_in_flight,
        )
        # The legacy session, once initialize opened it (one per process on stdio).
        self.session: Session | None = None

    # --- public surface --------------------------------------------------------------------

    @property
    def legacy_version(self) -> str | None:
        """The version negotiated by ``initialize``, or ``None`` before it."""
        return self.session.version if self.session else None

    @property
    def max_in_flight(self) -> int:
        return self.runner.max_in_flight

    @property
    def in_flight(self) -> int:
        """How many client requests are being handled now."""
        return self.runner.in_flight

    @property
    def max_in_flight_bytes(self) -> int:
        """The in-flight budget's size (shared with other connections when the budget is)."""
        return self.runner.budget.max_bytes

    @property
    def in_flight_bytes(self) -> int:
        """Bytes charged for the requests whose jobs still run and the answers they wait for
        (each line's :attr:`LineCost.charge`), at most ``max_in_flight_bytes`` (of every
        connection sharing the budget)."""
        return self.runner.budget.held

    @property
    def max_pending_answer_bytes(self) -> int:
        """The answer budget's size (shared with other connections when the budget is)."""
        return self.runner.answers.max_bytes

    @max_pending_answer_bytes.setter
    def max_pending_answer_bytes(self, value: int) -> None:
        self.runner.answers.max_bytes = value

    @property
    def pending_answer_bytes(self) -> int:
        """Bytes of the encoded answers that finished requests hold until they are written, and
        of the room reserved for answers being computed again (see :mod:`answers`)."""
        return self.runner.answers.held

    @property
    def answers_backlogged(self) -> bool:
        """Do answers waiting to be written fill half of ``max_pending_answer_bytes`` or more?
        While they do, the transport should read no more requests (a high-water mark, as in
        node's streams): the client is not keeping up, and the other half is left for the
        answers of requests already running."""
        return self.runner.answers.backlogged

    async def answers_drained(self) -> None:
        """Return once :attr:`answers_backlogged` is false (at once if it is)."""
        await self.runner.answers.drained()

    def receive_line(self, line: bytes) -> list[Out]:
        """Handle one line (without its newline).

        A line of more than :data:`limits.MAX_LINE_VALUES` JSON values is refused unparsed (its
        values would hold up to 25 times its size); a request whose line would take the
        requests in flight past ``max_in_flight_bytes`` is answered "busy".
        """
        parsed = inbound.parse(line, unit="line")
        if isinstance(parsed, inbound.Rejected):
            return [Write(parsed.error)]
        return self._receive(parsed.message, parsed.cost)

    def line_too_long(self, limit: int) -> list[Out]:
        """A line longer than ``limit`` bytes was skipped unread."""
        return [
            Write(
                error_message(
                    None,
                    INVALID_REQUEST,
                    f"Message too large: lines longer than {limit} bytes are skipped",
                )
            )
        ]

    def client_closed(self) -> None:
        """The client's input ended: nothing more can be answered by it."""
        self.runner.close()

    def receive_message(self, message: Any) -> list[Out]:
        """Handle one parsed JSON value (charged as the compact JSON line it would be)."""
        return self._receive(message, None)

    def receive_parsed(self, parsed: inbound.Parsed) -> list[Out]:
        """Handle one message parsed by :func:`inbound.parse` (charged what its bytes cost)."""
        return self._receive(parsed.message, parsed.cost)

    def _receive(self, message: Any, cost: LineCost | None) -> list[Out]:
        """Handle one parsed value; ``cost`` is its line's, or ``None`` to measure it here."""
        if isinstance(message, list):
            if message and self.session is not None and self.session.version == "2025-03-26":
                # 2025-03-26 only: servers MUST support receiving batches. Each member is
                # handled (and answered) as if it had come on its own line, up to a cap: every
                # member costs a reply, so an uncapped batch of tiny members multiplies the line.
                if len(message) > limits.MAX_BATCH_MEMBERS:
                    return [
                        Write(
                            error_message(
                                None,
                                INVALID_REQUEST,
                                f"Batch too large: at most {limits.MAX_BATCH_MEMBERS} messages "
                                "in one batch; nothing in it was handled",
                            )
                        )
                    ]
                actions: list[Out] = []
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
                Write(
                    error_message(
                        None,
                        INVALID_REQUEST,
                        "Batches are not supported: send one JSON-RPC message per line",
                    )
                )
            ]
        if not isinstance(message, dict):
            return [
                Write(error_message(None, INVALID_REQUEST, "Invalid request: not a JSON object"))
            ]
        if cost is None:
            cost = _cost_of(message)
        envelope = inbound.classify(message)
        if isinstance(envelope, inbound.Request):
            return self._on_request(envelope, cost.charge)
        if isinstance(envelope, inbound.Notification):
            return self._on_notification(envelope.method, envelope.params)
        if isinstance(envelope, inbound.Response):
            return self._on_response(envelope.id, envelope.message, cost.charge)
        if isinstance(envelope, inbound.Invalid):
            return [Write(envelope.error)]
        return []

    # --- notifications and responses --------------------------------------------------------

    def _on_notification(self, method: str, params: Any) -> list[Out]:
        if method == "notifications/cancelled":
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if valid_id(request_id):
                self.runner.cancel(request_id)
            return []
        session = self.session
        if session is not None and self.dispatcher.notified(session, method):
            return [self.runner.fetch_roots(session)]
        return []

    def _on_response(self, raw_id: Any, message: JSONObject, charge: int) -> list[Out]:
        # Only answers to our own pending requests count; anything else is ignored.
        ours = isinstance(raw_id, int) and not isinstance(raw_id, bool)
        if ours and self.runner.answered(raw_id, message, charge):
            return []
        _log.info("ignored a response to id %r, which has no pending request", raw_id)
        return []

    # --- requests ------------------------------------------------------------------------------

    def _on_request(self, request: inbound.Request, charge: int) -> list[Out]:
        request_id: RequestId = request.id
        if self.runner.is_in_flight(request_id):
            return [
                Write(
                    error_message(
                        request_id, INVALID_REQUEST, "Invalid request: this id is already in flight"
                    )
                )
            ]
        routed = self.dispatcher.route(
            request, session=self.session, principal=self.principal, ceiling=self.ceiling
        )
        if isinstance(routed, Reply):
            if routed.opened is not None:
                self.session = routed.opened
            return [Write(routed.message)]
        try:
            return [self.runner.start(routed, charge)]
        except Fault as fault:
            return [Write(fault_message(request_id, fault))]
