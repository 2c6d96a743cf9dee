"""What an HTTP/1.1 connection may hold before it has asked anything: uvicorn's h11 protocol,
guarded, for both servers of this process (the MCP endpoint and the setup page).

uvicorn alone bounds neither how long a connection may take to send its request nor how many
connections may sit open without one. Its keep-alive timer starts only after a first response,
and its concurrency cap (``limit_concurrency``) counts every open connection: forty sockets that
never finish a request (silent, or a request line dribbled a byte at a time) filled the setup
page's cap, and every real request got ``503 Exceeded concurrency limit`` for as long as they
were held. Any local user could do that to 127.0.0.1.

:func:`guarded_h11` makes a protocol class for ``uvicorn.Config(http=...)`` that:

- closes a connection that has not completed its request within ``request_timeout`` of
  connecting, or of the first byte of a later request on a kept-alive connection ("completed":
  its headers; with ``whole_request``, its body too);
- counts against ``limit_concurrency`` only connections (and their tasks) whose request is
  complete, from then to the end of the response: a connection still waiting for its request
  must not turn into a 503 for others;
- keeps at most ``max_waiting`` connections that have not completed a request, closing the
  oldest of them when one more arrives. The total is then bounded: ``limit_concurrency`` in a
  request plus ``max_waiting`` waiting (each with at most a few KiB buffered, and with
  ``whole_request`` at most one task waiting for its body). A real client sends its request
  right after connecting, so it is cut only if ``max_waiting`` newer connections arrive before
  its first write is read;
- answers 431 to request headers still arriving past ``max_header_bytes`` (h11's buffer; uvicorn
  itself says 400), RFC 6585 section 5.

Limits: a subclass of uvicorn's ``H11Protocol`` that uses its attributes (``conn``, ``cycle``,
``connections``, ``tasks``) and hooks (``data_received``, ``on_response_complete``,
``send_400_response``), checked against uvicorn 0.54 and h11 0.16; uvicorn has no public hook
for any of this. Connections that complete a request and then send a body slowly are bounded
here only with ``whole_request``; otherwise the application must bound the body (the MCP
endpoint does). Importing this module imports uvicorn (the optional HTTP extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Iterator
from typing import Any, ClassVar, Generic, TypeVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

__all__ = ["GuardedH11", "QuietServer", "guarded_h11", "guarded_server"]

_log = logging.getLogger("fsnotes.http")

_T = TypeVar("_T")

# Per server: its connections that have not completed a request, oldest first (a dict keeps
# insertion order; the values are unused). Weak: a stopped server's state goes with it.
_WAITING: weakref.WeakKeyDictionary[ServerState, dict[GuardedH11, None]] = (
    weakref.WeakKeyDictionary()
)


class _Counted(Generic[_T]):
    """A server's set of connections (or tasks) as uvicorn's 503 check sees it.

    Every member stays in the real set (uvicorn's shutdown closes and awaits them all), but
    ``len()`` leaves out those that belong to connections still waiting for their request.
    """

    def __init__(self, members: set[_T], waiting: dict[GuardedH11, None], *, tasks: bool) -> None:
        self._members = members
        self._waiting = waiting
        self._tasks = tasks

    def add(self, member: _T) -> None:
        self._members.add(member)

    def discard(self, member: _T) -> None:
        self._members.discard(member)

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __iter__(self) -> Iterator[_T]:
        return iter(self._members)

    def __len__(self) -> int:
        if not self._tasks:
            return max(0, len(self._members) - len(self._waiting))
        # Only a waiting connection that is receiving a body has a task (whole_request).
        reading = sum(
            1 for c in self._waiting if c.cycle is not None and not c.cycle.response_complete
        )
        return max(0, len(self._members) - reading)


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a request deadline, a bound on connections waiting for a
    request, and 431 for huge headers; :func:`guarded_h11` sets the limits."""

    request_timeout: ClassVar[float] = 10.0
    whole_request: ClassVar[bool] = False
    max_waiting: ClassVar[int] = 128
    max_header_bytes: ClassVar[int] = 16 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        waiting = _WAITING.setdefault(self.server_state, {})
        self._waiting = waiting
        # uvicorn reads these two for its 503 check only by len(); see _Counted.
        self.connections = _Counted(self.server_state.connections, waiting, tasks=False)  # type: ignore[assignment]
        self.tasks = _Counted(self.server_state.tasks, waiting, tasks=True)  # type: ignore[assignment]

    # What this connection is waiting for.

    def _incomplete(self) -> bool:
        state = self.conn.their_state
        return state is h11.IDLE or (self.whole_request and state is h11.SEND_BODY)

    def _settle(self) -> None:
        """Put the connection where its state says: waiting for a request, or in one."""
        if self.transport.is_closing():
            self._waiting.pop(self, None)
        elif self._incomplete():
            if self not in self._waiting:
                self._wait()
        else:
            self._waiting.pop(self, None)
            self._disarm()

    def _wait(self) -> None:
        self._waiting[self] = None  # the newest
        while len(self._waiting) > self.max_waiting:
            oldest = next(iter(self._waiting))
            del self._waiting[oldest]
            _log.debug("closing the oldest of %d connections without a request", self.max_waiting)
            oldest.transport.close()

    # The deadline.

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.request_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self._incomplete() and not self.transport.is_closing():
            self._waiting.pop(self, None)
            self.transport.close()

    # uvicorn's hooks.

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that says nothing is closed too
        self._wait()

    def data_received(self, data: bytes) -> None:
        if self._incomplete():
            # The deadline runs from the first byte of a request on a kept-alive connection
            # (between requests, uvicorn's keep-alive timer closes a silent one).
            self._arm()
        super().data_received(data)
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start the next cycle and read a pipelined request
        self._settle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._waiting.pop(self, None)
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        if len(self.conn.trailing_data[0]) > self.max_header_bytes:
            # h11's "Receive buffer too long": the request headers did not fit (RFC 6585, 5).
            event = h11.Response(
                status_code=431,
                headers=[(b"content-length", b"0"), (b"connection", b"close")],
                reason=b"Request Header Fields Too Large",
            )
            self.transport.write(self.conn.send(event))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
            self.transport.close()
            return
        super().send_400_response(msg)


def guarded_h11(
    *,
    request_timeout: float,
    max_waiting: int,
    max_header_bytes: int,
    whole_request: bool = False,
) -> type[GuardedH11]:
    """A :class:`GuardedH11` with these limits, for ``uvicorn.Config(http=...)`` (which takes a
    class; pass ``h11_max_incomplete_event_size=max_header_bytes`` beside it)."""
    if request_timeout <= 0 or max_waiting < 1 or max_header_bytes < 1:
        raise ValueError("guarded_h11 needs a positive timeout, waiting bound and header size")

    class Guarded(GuardedH11):
        pass

    Guarded.request_timeout = request_timeout
    Guarded.whole_request = whole_request
    Guarded.max_waiting = max_waiting
    Guarded.max_header_bytes = max_header_bytes
    return Guarded


class QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its host process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def guarded_server(
    app: Any,
    *,
    request_timeout: float,
    max_waiting: int,
    max_header_bytes: int,
    whole_request: bool = False,
    **config: Any,
) -> QuietServer:
    """A :class:`QuietServer` for ``app`` behind :func:`guarded_h11` with these limits, h11's
    buffer set to the same ``max_header_bytes``, and what both of our servers want of uvicorn:
    no logging config or access log, no lifespan, no websockets, no proxy headers, no Server
    header. ``config``: the rest of ``uvicorn.Config`` (backlog, concurrency, timeouts)."""
    return QuietServer(
        uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            http=guarded_h11(
                request_timeout=request_timeout,
                max_waiting=max_waiting,
                max_header_bytes=max_header_bytes,
                whole_request=whole_request,
            ),
            ws="none",
            proxy_headers=False,  # nothing stands between the client and the socket
            server_header=False,
            h11_max_incomplete_event_size=max_header_bytes,
            **config,
        )
    )
