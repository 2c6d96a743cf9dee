"""Answers waiting to be written: one budget for all of a client's (stdio) or all of a server's
(HTTP) finished requests, and the rule that admits an answer to it (:func:`admit`).

A finished request's answer is encoded at once and then held only as its bytes, charged to the
:class:`AnswerBudget` from then until the transport has written it. An answer larger than
:data:`~fsnotes.protocol.limits.SMALL_ANSWER_BYTES` that would take the bytes waiting past the
budget is dropped, unless nothing else waits (so any one answer can be delivered): a request
that only reads, and asked the client nothing, runs again once an answer of that size fits (the
room reserved meanwhile, turns taken in arrival order); any other is answered "busy", saying it
was carried out. Small answers are always kept: what writes, deletes and errors answer is never
replaced after the work was done. :data:`~fsnotes.protocol.limits.MAX_PENDING_ANSWER_BYTES`
gives the figures. Nothing here does I/O or looks at a clock.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from fsnotes.protocol import limits
from fsnotes.protocol.calls import Call
from fsnotes.protocol.framing import encode_message
from fsnotes.protocol.registry import JSONObject
from fsnotes.protocol.wire import INTERNAL_ERROR, error_message

_log = logging.getLogger("fsnotes.protocol")


class AnswerBudget:
    """Bytes of encoded answers waiting to be written (and room reserved for answers being
    computed again), at most :attr:`max_bytes` besides small ones and one larger answer."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._held = 0
        self._room: anyio.Event | None = None
        self._turn: anyio.Lock | None = None

    @property
    def held(self) -> int:
        return self._held

    @property
    def backlogged(self) -> bool:
        """Do answers waiting fill half of the budget or more? A transport that can stop
        reading (stdio) then should (a high-water mark, as in node's streams): the client is
        not keeping up, and the other half is left for requests already running."""
        return self._held * 2 >= self.max_bytes

    async def drained(self) -> None:
        """Return once :attr:`backlogged` is false (at once if it is)."""
        while self.backlogged:
            await self.room_changed()

    async def room_changed(self) -> None:
        """Wait until some bytes are given back."""
        if self._room is None:
            self._room = anyio.Event()
        await self._room.wait()

    def fits(self, size: int) -> bool:
        """May an answer of ``size`` bytes be kept beside those already waiting?"""
        waiting = self._held
        return size <= limits.SMALL_ANSWER_BYTES or not waiting or waiting + size <= self.max_bytes

    def charge(self, size: int) -> None:
        self._held += size

    def free(self, size: int) -> None:
        """Give back ``size`` bytes (an answer written, or reserved room no longer needed)."""
        self._held -= size
        room, self._room = self._room, None
        if room is not None:
            room.set()

    @property
    def turn(self) -> anyio.Lock:
        """Answers computed again take turns, in the order they were dropped."""
        if self._turn is None:
            self._turn = anyio.Lock()
        return self._turn


@dataclass(frozen=True)
class Admitted:
    """An answer charged to the budget: its encoded ``line`` (the caller frees ``len(line)``
    once it is written) and its JSON-RPC error code, if it is an error."""

    line: bytes
    error_code: int | None


async def admit(
    budget: AnswerBudget,
    call: Call,
    compute: Callable[[], Awaitable[JSONObject]],
    *,
    may_rerun: Callable[[], bool],
    wanted: Callable[[], bool],
) -> Admitted | None:
    """``compute()`` ``call``'s answer and charge it to ``budget`` (see the module docstring);
    ``None`` when the answer is no longer ``wanted()`` (the request was cancelled).

    ``may_rerun()`` says whether the request may be computed again if its answer does not fit
    (it only reads, and asked the client nothing). Nothing keeps an answer's dict once it is
    encoded, so a dropped answer is freed at once and a kept one is held once, as bytes. The
    caller acts on the result before it next awaits (``wanted()`` was checked last here).
    """
    reserved = 0
    try:
        outcome = _encode(budget, call, await compute(), 0, may_rerun, wanted)
        while isinstance(outcome, int):
            async with budget.turn:
                while not budget.fits(outcome):
                    await budget.room_changed()
                reserved = outcome
                budget.charge(reserved)
            outcome = _encode(budget, call, await compute(), reserved, may_rerun, wanted)
            reserved = 0
        return outcome
    finally:
        if reserved:
            budget.free(reserved)


def _encode(
    budget: AnswerBudget,
    call: Call,
    message: JSONObject,
    reserved: int,
    may_rerun: Callable[[], bool],
    wanted: Callable[[], bool],
) -> Admitted | int | None:
    """Encode and charge ``message`` (in place of the ``reserved`` room, given back here): the
    admitted answer, ``None`` if not wanted any more, or its size if it is to be computed
    again."""
    if reserved:
        budget.free(reserved)
    if not wanted():
        return None  # a cancelled request gets nothing more ("send no response")
    error = message.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    try:
        line = encode_message(message)
    except (TypeError, ValueError):
        # A result JSON cannot carry (a handler bug): encoding fails before anything is
        # written, so the client still gets exactly one answer.
        _log.exception("result of %s (request %r) is not JSON", call.method, call.id)
        line, code = (
            encode_message(error_message(call.id, INTERNAL_ERROR, "Internal error")),
            (INTERNAL_ERROR),
        )
    del message
    size = len(line)
    if not budget.fits(size):
        waiting = budget.held
        if may_rerun():
            _log.debug(
                "the %d-byte answer to request %r waits for room (%d bytes of answers wait to "
                "be written); it will be computed again",
                size,
                call.id,
                waiting,
            )
            return size
        _log.warning(
            "dropped the %d-byte answer to request %r: %d bytes of answers wait for the client "
            "to read them",
            size,
            call.id,
            waiting,
        )
        line = encode_message(
            error_message(
                call.id,
                INTERNAL_ERROR,
                f"Server busy: this request was carried out, but its {size}-byte answer was "
                f"dropped: {waiting} bytes of earlier answers are waiting for the client to read "
                f"them (at most {budget.max_bytes} are kept)",
            )
        )
        code = INTERNAL_ERROR
    budget.charge(len(line))
    return Admitted(line, code)
