"""The one async request runner both transports use: admission, the requests in flight and
their cancellation, our requests to the client waiting for an answer.

The protocol core (:mod:`fsnotes.protocol`) parses, classifies and routes without waiting: a
request comes out of :meth:`~fsnotes.protocol.dispatch.Dispatcher.route` answered at once, or
as a :class:`~fsnotes.protocol.calls.Call` to run. Everything that waits is here. A
:class:`Runner` admits a call (at most ``max_in_flight`` at once, and what its message holds
charged to the shared :class:`~fsnotes.runtime.budget.InFlightBudget`), and hands the
transport a :class:`Job`: the transport chooses only *where* it runs (stdio: a task of its
group; HTTP: the POST's own handler) and gives it a :class:`Peer` to write through. The job
computes the answer, admits it to the :class:`~fsnotes.runtime.answers.AnswerBudget` and
writes it; a cancellation (:meth:`Runner.cancel`) cancels the job's own cancel scope.

Our requests to the client (a live elicitation, ``roots/list``) wait in one table here: the
runner sends the request through the job's peer, and the client's response
(:meth:`Runner.answered`) wakes the waiting job directly. The transport holds no waiter.

One runner serves one client channel (a stdio process, a legacy HTTP session) or, over HTTP,
every stateless 2026-07-28 request (each under a key of its own: ids of different clients may
collide, and nothing cancels those by id). Not thread-safe: one event loop's tasks share it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from fsnotes.protocol.calls import Call
from fsnotes.protocol.dispatch import Dispatcher
from fsnotes.protocol.registry import JSONObject
from fsnotes.protocol.session import Session
from fsnotes.protocol.wire import INTERNAL_ERROR, Fault, RequestId, cancelled, error_message
from fsnotes.runtime.answers import AnswerBudget, admit
from fsnotes.runtime.budget import Hold, InFlightBudget

_log = logging.getLogger("fsnotes.runtime")

# A job's key: ("request", id) for a client request, ("roots", n) for a roots fetch,
# ("stateless", n) for a 2026-07-28 HTTP request.
TaskKey = tuple[str, RequestId]


class Peer(Protocol):
    """What a transport offers a running job: its way to the client."""

    async def send(self, message: JSONObject) -> None:
        """Write one message (a no-op once the client has gone)."""
        ...

    async def answer(self, line: bytes, error_code: int | None) -> None:
        """Write the request's answer, already encoded by :func:`framing.encode_message`
        (``error_code``: its JSON-RPC error code, ``None`` for a result; HTTP maps it to a
        status). A no-op once the client has gone. Returns once it is written, or can never
        be."""
        ...


@dataclass(frozen=True)
class Write:
    """Write ``message`` to the client now (an answer that needed no task)."""

    message: JSONObject


class Job:
    """Work the runner admitted: run it with :meth:`run`, once, where the transport chooses.
    A :meth:`cancel` that arrives before it runs holds: it then ends at its first wait."""

    def __init__(
        self, key: TaskKey, work: Callable[[Peer], Awaitable[None]], live: set[Job]
    ) -> None:
        self.key = key
        self._scope: anyio.CancelScope | None = None  # made when it runs (in the event loop)
        self._cancelled = False
        self._work = work
        self._live = live  # the runner's jobs not yet ended (cancel_all cancels them)
        live.add(self)

    async def run(self, peer: Peer) -> None:
        """Run to the end, or until cancelled. A failure is logged, never raised: one
        request's bug does not end its transport's loop."""
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancelled:
                    scope.cancel()
                await self._work(peer)
        except Exception:
            _log.exception("request task %r failed", self.key)
        finally:
            self._live.discard(self)

    def cancel(self) -> None:
        """Cancel it (before it runs, or while it does); it sends nothing more."""
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()


@dataclass
class _Entry:
    """A request in flight: its call, its job, and what the runner keeps for it."""

    call: Call
    job: Job | None = None
    # Charged for the request and the answers it waits for; given back when its job ends.
    hold: Hold = field(default_factory=Hold)
    # Did it ask the client anything? Then it may not run again (a second run would ask again).
    asked: bool = False


@dataclass
class _Waiter:
    """One of our requests to the client: what its answer is charged to, and the answer."""

    hold: Hold
    done: anyio.Event = field(default_factory=anyio.Event)
    reply: JSONObject | None = None


class _Channel:
    """A job's way to the client (the :class:`~fsnotes.protocol.calls.Channel` the dispatcher
    is given): notifications through its peer, requests through the runner's table."""

    def __init__(self, runner: Runner, peer: Peer, hold: Hold, entry: _Entry | None) -> None:
        self._runner = runner
        self._peer = peer
        self._hold = hold
        self._entry = entry

    @property
    def closed(self) -> bool:
        return self._runner.closed

    async def send(self, message: JSONObject) -> None:
        await self._peer.send(message)

    async def ask(
        self, method: str, params: JSONObject | None, timeout: float
    ) -> JSONObject | None:
        if self._entry is not None:
            if self._entry.call.era == "modern":
                # 2026-07-28 asks through InputRequired (MRTR), never with a request of ours
                # (streamable-http: "The server MUST NOT send independent JSON-RPC requests").
                return None
            self._entry.asked = True
        return await self._runner.ask(self._peer, method, params, timeout, self._hold)


class Runner:
    """Admits and runs the calls of one client channel, or of every stateless HTTP request.
    See the module docstring.

    ``budget`` and ``answers`` may be shared between runners (the HTTP endpoint shares them
    between its sessions and its stateless requests), so the number of clients does not
    multiply what they can make the server hold.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        budget: InFlightBudget,
        answers: AnswerBudget,
        max_in_flight: int,
    ) -> None:
        self.dispatcher = dispatcher
        self.budget = budget
        self.answers = answers
        self.max_in_flight = max_in_flight
        self._in_flight: dict[TaskKey, _Entry] = {}
        # Our requests to the client awaiting an answer: the one table of them.
        self._pending: dict[int, _Waiter] = {}
        self._next_server_id = 1
        self._jobs: set[Job] = set()  # running or about to run: cancelled by cancel_all
        self._keys = itertools.count(1)  # for roots fetches and stateless requests
        self.closed = False

    # --- state -------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """How many client requests are being handled now."""
        return len(self._in_flight)

    @property
    def pending(self) -> int:
        """How many of our requests to the client wait for an answer."""
        return len(self._pending)

    def is_in_flight(self, request_id: RequestId) -> bool:
        return ("request", request_id) in self._in_flight

    def has_room(self, charge: int) -> bool:
        """Would a request charged ``charge`` bytes be admitted now?"""
        return (
            len(self._in_flight) < self.max_in_flight
            and self.budget.held + charge <= self.budget.max_bytes
        )

    # --- admission -------------------------------------------------------------------------------

    def start(self, call: Call, charge: int, *, keyed: bool = True) -> Job:
        """Admit ``call`` (what its message holds: ``charge`` bytes) and return its job; raise
        :class:`Fault` ("busy") past ``max_in_flight`` or the in-flight budget.

        ``keyed``: known by its id, so ``notifications/cancelled`` can name it; a stateless
        HTTP request is not (another client may use the same id).
        """
        if len(self._in_flight) >= self.max_in_flight:
            raise Fault(
                INTERNAL_ERROR,
                f"Server busy: {self.max_in_flight} requests are already in flight; retry later",
            )
        entry = _Entry(call)
        if not self.budget.reserve(entry.hold, charge):
            raise Fault(
                INTERNAL_ERROR,
                f"Server busy: this request is charged {charge} bytes (what its line "
                f"holds parsed), and the requests in flight already hold {self.budget.held} of "
                f"{self.budget.max_bytes}; retry later",
            )
        key: TaskKey = ("request", call.id) if keyed else ("stateless", next(self._keys))
        self._in_flight[key] = entry

        async def work(peer: Peer) -> None:
            await self._serve(key, entry, peer)

        entry.job = Job(key, work, self._jobs)
        return entry.job

    async def _serve(self, key: TaskKey, entry: _Entry, peer: Peer) -> None:
        """Compute ``entry``'s answer, admit it to the answer budget, and write it."""
        call = entry.call
        dispatcher = self.dispatcher
        channel = _Channel(self, peer, entry.hold, entry)
        try:
            admitted = await admit(
                self.answers,
                call,
                lambda: dispatcher.respond(call, channel),
                # A second run would ask the client again: only reads that asked nothing.
                may_rerun=lambda: call.reads_only and not entry.asked,
                wanted=lambda: self._in_flight.get(key) is entry,
            )
            if admitted is not None:
                del self._in_flight[key]
                call.active = False
                try:
                    await peer.answer(admitted.line, admitted.error_code)
                finally:
                    self.answers.free(len(admitted.line))
        finally:
            if self._in_flight.get(key) is entry:
                del self._in_flight[key]
            call.active = False
            # Given back when the job ends, not when a cancel arrives: a cancelled handler
            # may still be running (in a worker thread) and holding its arguments.
            self.budget.release(entry.hold)

    # --- cancellation ----------------------------------------------------------------------------

    def cancel(self, request_id: RequestId) -> None:
        """``notifications/cancelled`` for ``request_id``: its job is cancelled and sends
        nothing more. An unknown or finished id is ignored (cancellation §receiver)."""
        entry = self._in_flight.pop(("request", request_id), None)
        if entry is None:
            return
        entry.call.active = False
        if entry.job is not None:
            entry.job.cancel()

    def close(self) -> None:
        """The client is gone (EOF, a session ended): nothing more can be answered by it, so
        every request of ours waiting for an answer gets none, and none is sent any more."""
        self.closed = True
        for waiter in self._pending.values():
            waiter.done.set()

    def cancel_all(self) -> None:
        """Cancel every job, and close (a legacy HTTP session that ended). No request of it
        is answered after this, even one whose wait for the client this wakes."""
        for entry in self._in_flight.values():
            entry.call.active = False
        self._in_flight.clear()
        for job in list(self._jobs):
            job.cancel()
        self.close()

    # --- our requests to the client --------------------------------------------------------------

    async def ask(
        self, peer: Peer, method: str, params: JSONObject | None, timeout: float, hold: Hold
    ) -> JSONObject | None:
        """Send the client a request through ``peer`` and wait for its answer; ``None`` after
        ``timeout`` or once the client is gone. The answer is charged to ``hold`` (its owner
        gives it back)."""
        if self.closed:
            return None
        request_id = self._next_server_id
        self._next_server_id += 1
        message: JSONObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        waiter = _Waiter(hold)
        self._pending[request_id] = waiter
        try:
            await peer.send(message)
            with anyio.move_on_after(timeout):
                await waiter.done.wait()
        except anyio.get_cancelled_exc_class():
            if self._pending.pop(request_id, None) is not None and not self.closed:
                with anyio.CancelScope(shield=True):
                    await peer.send(
                        cancelled(request_id, "the request that needed this input was cancelled")
                    )
            raise
        if waiter.reply is None and request_id in self._pending and not self.closed:
            # Cancellation works both ways in 2025-11-25: withdraw the unanswered request.
            await peer.send(cancelled(request_id, "no answer in time"))
        self._pending.pop(request_id, None)
        return waiter.reply

    def answered(self, request_id: int, message: JSONObject, charge: int) -> bool:
        """The client's response to our request ``request_id`` (``charge``: what it holds):
        wake the job waiting for it. ``False`` when no request of ours waits under that id."""
        waiter = self._pending.pop(request_id, None)
        if waiter is None:
            return False
        if not self.budget.reserve(waiter.hold, charge):
            # The waiting job keeps the answer until it ends: charged like a request, and
            # dropped (the job sees an error answer) when the budget cannot take it.
            message = error_message(
                request_id,
                INTERNAL_ERROR,
                f"answer dropped: {charge} bytes would take the requests in flight past "
                f"{self.budget.max_bytes}",
            )
        waiter.reply = message
        waiter.done.set()
        return True

    # --- the legacy roots fetch ------------------------------------------------------------------

    def fetch_roots(self, session: Session) -> Job:
        """The session's roots fetch (the dispatcher said one is due), run again while
        notifications asked for one meanwhile."""
        dispatcher = self.dispatcher

        async def work(peer: Peer) -> None:
            hold = Hold()
            try:
                while True:
                    session.roots_again = False
                    await dispatcher.refresh_roots(session, _Channel(self, peer, hold, None))
                    self.budget.release(hold)
                    if not session.roots_again:
                        return
            finally:
                session.roots_running = False
                self.budget.release(hold)

        return Job(("roots", next(self._keys)), work, self._jobs)
