"""One request being served: what it is (:class:`Call`), where its messages go
(:class:`Channel`), what its handler sees (:func:`context`), and the multi round-trip driver
(:func:`drive`): one handler, two eras.

A handler that needs input returns :class:`~fsnotes.protocol.registry.InputRequired`. In the
2026-07-28 era that is encoded as an InputRequiredResult and the client retries; in the
2025-11-25 era the legacy adapter here asks the client live (``elicitation/create``,
``roots/list``) over the request's channel and calls the handler again with the answers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from fsnotes.protocol.encoding import describe_need, legacy_request_of, required_capabilities
from fsnotes.protocol.registry import (
    LOG_LEVELS,
    Ceiling,
    ElicitForm,
    Era,
    InputRequired,
    JSONObject,
    RequestContext,
)
from fsnotes.protocol.session import Session
from fsnotes.protocol.wire import MISSING_CLIENT_CAPABILITY, Fault, RequestId

_log = logging.getLogger("fsnotes.protocol")

T = TypeVar("T")


class Channel(Protocol):
    """Where one request's messages go; the runner (:mod:`fsnotes.runtime`) supplies it with
    each request, over the transport's peer."""

    @property
    def closed(self) -> bool:
        """Has the client gone? Then nothing more can reach it or be answered by it."""
        ...

    async def send(self, message: JSONObject) -> None:
        """Write a notification to the client the request came from (a no-op once it has gone).
        Stays usable after the request has ended: legacy completion notices are sent later."""
        ...

    async def ask(
        self, method: str, params: JSONObject | None, timeout: float
    ) -> JSONObject | None:
        """Legacy era only: send the client a request and wait for its reply message; ``None``
        after ``timeout`` seconds or when the client has gone."""
        ...


Handler = Callable[["Call", Channel], Awaitable[JSONObject]]


class TaskHooks(Protocol):
    """What a call that may become a task offers its handler (set by the task runner)."""

    async def detach(self, message: str | None) -> bool:
        """Answer the client with a task handle now; whether the call is (now) a task."""
        ...

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Progress of a task: its status message from now on."""
        ...


@dataclass
class Call:
    """A validated request, ready to run: its era, the principal it acts for (and the
    ceiling its credentials set, ``None`` for none), and, in the legacy era, its session
    (``None`` in the modern era: it is stateless)."""

    id: RequestId
    method: str
    params: JSONObject
    era: Era
    version: str
    principal: str
    ceiling: Ceiling | None
    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None
    handler: Handler
    session: Session | None = None
    progress_token: RequestId | None = None
    log_level: str | None = None  # modern: the request's opt-in level, else no log notifications
    input_responses: Mapping[str, Any] | None = None
    request_state: str | None = None
    # May it run again if its answer is dropped? Only if it reads (a read-only tool, resources,
    # prompts, completion); the channel also knows whether it asked the client anything.
    reads_only: bool = False
    # False once the request has been answered or cancelled: progress and logs are dropped.
    active: bool = True
    last_progress: float | None = None
    # Set by the task runner while a call that may become a task runs (Tasks extension).
    task: TaskHooks | None = None


@dataclass(frozen=True)
class Asking:
    """How the legacy adapter asks the client: the waits and the most rounds per request."""

    input_timeout: float
    roots_timeout: float
    max_rounds: int


@dataclass(frozen=True)
class InputUnavailable:
    """The legacy adapter could not get the input (no capability, error, timeout, too many)."""

    text: str


class _Runtime:
    """The core's side of a request in flight: progress and log notifications."""

    def __init__(self, call: Call, channel: Channel) -> None:
        self._call = call
        self._channel = channel

    async def run_as_task(self, message: str | None) -> bool:
        hooks = self._call.task
        return False if hooks is None else await hooks.detach(message)

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        call = self._call
        if call.task is not None:
            call.task.progress(progress, total, message)
        # Progress only for a token of a request still in flight, strictly increasing.
        if not call.active or call.progress_token is None:
            return
        if call.last_progress is not None and not progress > call.last_progress:
            _log.debug("dropped non-increasing progress %r for request %r", progress, call.id)
            return
        call.last_progress = progress
        params: JSONObject = {"progressToken": call.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._channel.send(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        )

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        call = self._call
        if not call.active:
            return
        # 2026-07-28: never without the request's opt-in; legacy: the session's level, read
        # now (a setLevel meanwhile counts).
        threshold = call.log_level if call.session is None else call.session.log_level
        if threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        params: JSONObject = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._channel.send(
            {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        )

    def completion_notifier(self, elicitation_id: str) -> Callable[[], Awaitable[None]] | None:
        session, channel = self._call.session, self._channel
        if session is None:
            return None
        known = session.completion_notifiers.get(elicitation_id)
        if known is not None:
            return known  # one per id and session, so callers can de-duplicate
        message: JSONObject = {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": elicitation_id},
        }

        async def notify() -> None:
            # Session-scoped, not request-scoped: the out-of-band step usually ends after
            # the request that started it. Only the originating client gets it (the spec).
            if not channel.closed:
                await channel.send(message)

        session.completion_notifiers[elicitation_id] = notify
        return notify


def context(
    call: Call,
    channel: Channel,
    responses: Mapping[str, Any] | None = None,
    state: str | None = None,
) -> RequestContext:
    """The context a handler of ``call`` sees (with ``responses`` and ``state`` of a round)."""
    return RequestContext(
        era=call.era,
        protocol_version=call.version,
        method=call.method,
        principal=call.principal,
        ceiling=call.ceiling,
        client_capabilities=call.capabilities,
        client_info=call.client_info,
        roots=call.session.roots if call.session is not None else None,
        input_responses=responses,
        request_state=state,
        runtime=_Runtime(call, channel),
    )


def check_askable(ctx: RequestContext, outcome: InputRequired) -> None:
    """2026-07-28: raise -32021 unless this request declared every capability the input
    ``outcome`` asks for needs (it must be declared on *this* request)."""
    missing = [r for r in outcome.requests.values() if not ctx.supports(r)]
    if missing:
        raise Fault(
            MISSING_CLIENT_CAPABILITY,
            "Missing required client capability: " + ", ".join(describe_need(r) for r in missing),
            {"requiredCapabilities": required_capabilities(missing)},
        )


async def drive(
    call: Call,
    channel: Channel,
    handler: Callable[[RequestContext], Awaitable[T | InputRequired]],
    asking: Asking,
) -> T | InputRequired | InputUnavailable:
    """Call a handler until it completes (legacy: asking the client live in between).

    Modern: an InputRequired is returned for encoding (after the capability check).
    Legacy: each input request becomes a live request over ``channel``; the handler is then
    called again with the answers and the state it returned, at most ``asking.max_rounds``.
    """
    responses = call.input_responses
    state = call.request_state
    rounds = 0
    while True:
        ctx = context(call, channel, responses, state)
        outcome = await handler(ctx)
        if not isinstance(outcome, InputRequired):
            return outcome
        if not outcome.requests and outcome.state is None:
            raise ValueError("InputRequired needs at least one request or a state")
        missing = [r for r in outcome.requests.values() if not ctx.supports(r)]
        if missing:
            if call.era == "modern":
                check_askable(ctx, outcome)
            # The legacy adapter's fallback: the handler's own sentence for a form this host
            # cannot show, else a generic one. Either way nothing was asked, nothing done.
            for r in missing:
                if isinstance(r, ElicitForm) and r.unavailable is not None:
                    return InputUnavailable(r.unavailable)
            return InputUnavailable(
                "This needs input from the user ("
                + ", ".join(describe_need(r) for r in missing)
                + "), but the client did not declare that capability, so it cannot ask. "
                "Use a client or host that supports it."
            )
        if call.era == "modern":
            return outcome
        rounds += 1
        if rounds > asking.max_rounds:
            return InputUnavailable(
                f"Gave up after {asking.max_rounds} rounds of asking the client for input."
            )
        answers: dict[str, Any] = {}
        for key, input_request in outcome.requests.items():
            method, params = legacy_request_of(input_request)
            timeout = asking.roots_timeout if method == "roots/list" else asking.input_timeout
            reply = await channel.ask(method, params, timeout)
            what = describe_need(input_request)
            if reply is None:
                return InputUnavailable(
                    f"The client did not answer the request for {what} within {timeout:g} s, "
                    "so nothing was done."
                )
            error = reply.get("error")
            result = reply.get("result")
            if error is not None or not isinstance(result, dict):
                detail = error.get("message") if isinstance(error, dict) else None
                return InputUnavailable(
                    f"The client could not provide {what}"
                    + (f" ({detail})" if isinstance(detail, str) else "")
                    + ", so nothing was done."
                )
            answers[key] = result
        responses, state = answers, outcome.state
