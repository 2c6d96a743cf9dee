"""The setup page's lifetime: a uvicorn server started on demand inside an anyio task group.

By default the page listens only while a setup is pending: :meth:`PageRunner.ensure_started`
is called when a setup starts, and a watcher stops the page once no setup has been pending
for ``idle_grace`` seconds (the grace lets a person still see the result page and lets a
quick second request reuse the server). With ``policy.always_on`` (``--setup-port``) the page
starts when :meth:`PageRunner.running` is entered and stays up until it exits.

The runner binds the listening socket itself, so a port that is taken or a bind that is
refused (Landlock allows binding only the configured setup port) becomes a
:class:`PageUnavailable` with a sentence the caller can show, instead of uvicorn's
``sys.exit``. uvicorn's signal handlers are disabled: the stdio server keeps its own.

Connections are guarded (:func:`~fsnotes.transport.http_guard.guarded_h11`): one that has not
completed its request within :data:`REQUEST_TIMEOUT_S` is closed, at most :data:`MAX_WAITING`
of those stay open, and only connections inside a request count against
:data:`MAX_CONNECTIONS`, so sockets held open by another local user do not keep the person
from the page.

Limits: uvicorn runs on asyncio, so the runner needs the asyncio backend of anyio. Starlette
and uvicorn are an optional extra: import this module only when the page is wanted.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.abc
import anyio.to_thread
from starlette.types import ASGIApp

from fsnotes.setup.policy import PageUnavailable, SetupPolicy
from fsnotes.transport.http_guard import QuietServer, guarded_server
from fsnotes.transport.listen import ListenRefused, listen_socket

__all__ = ["PAGE_IDLE_GRACE_S", "PageRunner", "PageUnavailable"]

log = logging.getLogger(__name__)

# Keep the page up this long after the last pending setup ends: the person may reload the
# result page, and the next setup soon after reuses the running server.
PAGE_IDLE_GRACE_S = 60.0
# How often the idle watcher asks the store whether a setup is pending (one small query).
IDLE_POLL_S = 1.0
# uvicorn starts in a few milliseconds; longer means the event loop is badly stuck.
STARTUP_TIMEOUT_S = 10.0
# On stop, open connections get this long to finish their response before being cut.
SHUTDOWN_GRACE_S = 2
# Bound on a whole stop (uvicorn's own shutdown polls every 0.1 s on top of the grace).
STOP_TIMEOUT_S = SHUTDOWN_GRACE_S + 3.0
# A person's browser opens a handful of connections; more requests at once is not a person.
# Counts connections inside a request only (uvicorn's limit_concurrency, 503 past it): those
# that have not completed one are bounded by REQUEST_TIMEOUT_S and MAX_WAITING instead, since
# counting them let any local user hold the cap with idle sockets and starve the person.
MAX_CONNECTIONS = 32
LISTEN_BACKLOG = 64
# A connection must complete its request, headers and body, within this long of connecting
# (or of the first byte of a later request on a kept-alive one). A browser sends the whole of
# a page request (a GET, or a form of at most MAX_BODY_BYTES) in one write, so a few seconds is
# a slow link; a silent or dribbling connection is closed then.
REQUEST_TIMEOUT_S = 5.0
# Most connections kept open while they have not completed a request; one more closes the
# oldest. A browser's request follows its connect at once, but the server reads it a few loop
# turns after accepting it, and each turn accepts at most LISTEN_BACKLOG + 1: four turns' worth
# means a flood must out-connect the whole accept queue four times over to cut a browser. With
# MAX_CONNECTIONS it bounds the sockets (file descriptors) clients hold on the page.
MAX_WAITING = 4 * LISTEN_BACKLOG
# Request headers larger than this get 431 (h11's own default buffer; a browser's are ~1 KiB).
MAX_HEADER_BYTES = 16 * 1024
# Idle keep-alive connections are closed after this long, so they do not hold a stop.
KEEP_ALIVE_S = 5


# What a refused bind means for the page, in more words than the general reason.
_BIND_REFUSED = (
    "binding was refused (a port below 1024 needs privileges; under Landlock only the "
    "configured setup port may be bound)"
)
_REASONS: dict[int | None, str] = {
    errno.EADDRINUSE: "the port is already in use (another fsnotes, or another program)",
    errno.EACCES: _BIND_REFUSED,
    errno.EPERM: _BIND_REFUSED,
}


def _bind(host: str, port: int) -> socket.socket:
    try:
        return listen_socket(host, port, backlog=LISTEN_BACKLOG)
    except ListenRefused as exc:
        reason = _REASONS.get(exc.errno, exc.reason)
        raise PageUnavailable(f"the setup page cannot listen on {host}:{port}: {reason}") from None


class PageRunner:
    """Starts, keeps and stops the setup page; one server at a time.

    Use inside ``async with runner.running():``. :meth:`ensure_started` and :meth:`stop` may
    be called from any task of the same event loop, any number of times.
    """

    def __init__(
        self,
        policy: SetupPolicy,
        app_factory: Callable[[], ASGIApp],
        *,
        has_pending: Callable[[], bool],
        idle_grace: float = PAGE_IDLE_GRACE_S,
        poll_interval: float = IDLE_POLL_S,
    ) -> None:
        self._policy = policy
        self._app_factory = app_factory
        self._has_pending = has_pending
        self._idle_grace = idle_grace
        self._poll = poll_interval
        self._tg: anyio.abc.TaskGroup | None = None
        self._server: QuietServer | None = None
        self._finished: anyio.Event | None = None
        self._lock = anyio.Lock()
        self._idle_since: float | None = None

    @property
    def url_base(self) -> str:
        """``http://127.0.0.1:<port>``: what the person's browser opens (and sends as Origin)."""
        return self._policy.origin

    @property
    def is_running(self) -> bool:
        """Whether the page is serving now."""
        return self._server is not None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[PageRunner]:
        """The runner's task group: the page can serve inside it and is stopped on exit
        (gracefully, even when the exit is a cancellation)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                if self._policy.always_on:
                    await self.ensure_started()
                yield self
            finally:
                with anyio.CancelScope(shield=True):
                    await self.stop()
                self._tg = None
                tg.cancel_scope.cancel()

    async def ensure_started(self) -> None:
        """Serve the page if it is not served yet; return once it accepts connections.

        Raises:
            PageUnavailable: the port is taken or binding is refused.
            RuntimeError: called outside :meth:`running`, or not on asyncio.
        """
        async with self._lock:
            self._idle_since = None  # a setup was just started: the grace restarts
            if self._server is not None:
                return
            tg = self._tg
            if tg is None:
                raise RuntimeError("PageRunner.ensure_started needs 'async with runner.running()'")
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                raise RuntimeError("the setup page runs on uvicorn, which needs asyncio") from None
            sock = _bind(self._policy.bind, self._policy.port)
            server = guarded_server(
                self._app_factory(),
                request_timeout=REQUEST_TIMEOUT_S,
                max_waiting=MAX_WAITING,
                max_header_bytes=MAX_HEADER_BYTES,
                whole_request=True,
                host=self._policy.bind,
                port=self._policy.port,
                backlog=LISTEN_BACKLOG,  # asyncio listen()s again with uvicorn's (2048)
                limit_concurrency=MAX_CONNECTIONS,
                timeout_keep_alive=KEEP_ALIVE_S,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
            finished = anyio.Event()
            tg.start_soon(self._serve, server, sock, finished)
            with anyio.move_on_after(STARTUP_TIMEOUT_S):
                while not server.started and not finished.is_set():
                    await anyio.sleep(0.005)
            if not server.started:
                server.should_exit = True
                raise PageUnavailable(
                    f"the setup page on {self._policy.host_header} did not start "
                    "(see the server's error output)"
                )
            self._server = server
            self._finished = finished
            log.info("setup page listening on %s", self._policy.origin)
            if not self._policy.always_on:
                tg.start_soon(self._watch_idle, server)

    async def stop(self) -> None:
        """Stop serving (open responses get :data:`SHUTDOWN_GRACE_S`); no-op when stopped."""
        async with self._lock:
            await self._stop_locked()

    async def _stop_locked(self) -> None:
        server, finished = self._server, self._finished
        if server is None or finished is None:
            return
        server.should_exit = True
        with anyio.move_on_after(STOP_TIMEOUT_S) as scope:
            await finished.wait()
        if scope.cancelled_caught:
            server.force_exit = True
            log.warning("setup page did not stop within %.0f s; forcing it", STOP_TIMEOUT_S)
            with anyio.move_on_after(1.0):
                await finished.wait()
        # Only now: is_running stays true until the socket is closed.
        self._server = self._finished = None
        log.info("setup page stopped")

    async def _serve(self, server: QuietServer, sock: socket.socket, finished: anyio.Event) -> None:
        try:
            await server.serve(sockets=[sock])
        except (Exception, SystemExit):
            # The page failing must not take the stdio server down with the task group;
            # the page is simply not served any more (the next ensure_started retries).
            log.exception("the setup page stopped on an error")
        finally:
            # A cancelled serve() skips uvicorn's shutdown: close what it opened ourselves.
            for listener in getattr(server, "servers", []):
                listener.close()
            for connection in list(server.server_state.connections):
                connection.shutdown()
            sock.close()
            finished.set()
            if self._server is server:  # it ended on its own (not through stop())
                self._server = self._finished = None

    async def _pending(self) -> bool:
        """``has_pending`` in a thread; an error counts as pending (the page stays up), since
        a failure in this watcher must not take the stdio server's task group down."""
        try:
            return bool(await anyio.to_thread.run_sync(self._has_pending))
        except Exception:
            log.exception("cannot tell whether setups are pending; keeping the page up")
            return True

    async def _watch_idle(self, server: QuietServer) -> None:
        while self._server is server:
            await anyio.sleep(self._poll)
            pending = await self._pending()
            now = anyio.current_time()
            if pending:
                self._idle_since = None
                continue
            if self._idle_since is None:
                self._idle_since = now
                continue
            if now - self._idle_since < self._idle_grace:
                continue
            async with self._lock:
                # Re-check under the lock: a setup started since the last poll has either
                # reset the grace (ensure_started) or is visible to has_pending now.
                if self._server is not server or self._idle_since is None:
                    continue
                if await self._pending():
                    self._idle_since = None
                    continue
                await self._stop_locked()
            return
