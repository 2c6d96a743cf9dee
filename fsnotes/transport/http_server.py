"""The HTTP server around the MCP endpoint: uvicorn on a socket bound before the jail.

:func:`bind` opens the listening socket at start-up, before Landlock is applied: a bound socket
keeps accepting afterwards, so the jail needs no rule for this port and the process can bind
no other (the setup page's port excepted). :func:`run_http` then serves
:class:`~fsnotes.transport.http.McpEndpoint` on it until SIGTERM or SIGINT.

What uvicorn does not bound, :func:`~fsnotes.transport.http_guard.guarded_h11` does: a
connection must complete its request headers within :data:`HEADER_TIMEOUT_S` of connecting (or
of the first byte of a later request), so a client that dribbles headers (slowloris) or
connects and says nothing holds its slot no longer; such connections do not count against
:data:`MAX_CONNECTIONS` (past it, requests get uvicorn's 503), at most :data:`MAX_WAITING` of
them stay open (the oldest is closed), and headers still arriving past h11's 16 KiB buffer get
431 (uvicorn says 400; headers that came in one read are counted by the endpoint). Bodies have
their own deadline in the endpoint.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys

import anyio

from fsnotes.protocol.registry import App
from fsnotes.security.tokens import Authenticator
from fsnotes.transport.http import McpEndpoint
from fsnotes.transport.http_guard import QuietServer, guarded_server
from fsnotes.transport.http_settings import HttpSettings
from fsnotes.transport.http_wire import MAX_HEADER_BYTES
from fsnotes.transport.listen import ListenRefused, listen_socket
from fsnotes.transport.process import (
    configure_logging,
    limit_worker_threads,
    return_freed_memory_promptly,
)

__all__ = ["HttpUnavailable", "bind", "run_http", "serve_http"]

_log = logging.getLogger("fsnotes.transport")

# A connection must send complete request headers within this long. Real clients send them in
# one write (milliseconds); 10 s covers a slow link. nginx's client_header_timeout is 60 s, but
# nginx holds tens of thousands of connections; we keep MAX_WAITING waiting ones.
HEADER_TIMEOUT_S = 10.0
# Most connections inside a request at once (uvicorn answers 503 past it; connections that
# have not sent their request headers yet do not count, see MAX_WAITING). A host keeps one or
# two (a POST and, in the 2025-11-25 era, a GET stream per session); 128 is four per live
# session at the session bound, and each costs a few KiB plus what its request holds (bounded
# by the in-flight budget).
MAX_CONNECTIONS = 128
LISTEN_BACKLOG = 128
# Most connections kept open while they have not completed their request headers; one more
# closes the oldest. A host's connection sends its request at once, but the server reads it a
# few loop turns after accepting it, and each turn accepts at most LISTEN_BACKLOG + 1: three
# turns' worth means a flood must out-connect the accept queue three times over to cut a
# host. With MAX_CONNECTIONS it bounds the sockets (file descriptors) clients can hold: 512,
# and the setup page's 288 beside them stay within the common soft limit of 1024.
MAX_WAITING = 3 * LISTEN_BACKLOG
# Idle keep-alive connections are closed after this long (uvicorn's own default).
KEEP_ALIVE_S = 5
# On stop, responses in progress get this long before connections are cut.
SHUTDOWN_GRACE_S = 2


class HttpUnavailable(Exception):
    """The endpoint cannot listen (port taken, bind refused); the message says why."""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: one the kernel picks)."""
    try:
        return listen_socket(host, port, backlog=LISTEN_BACKLOG)
    except ListenRefused as exc:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise HttpUnavailable(f"the HTTP endpoint cannot listen on {where}: {exc.reason}") from None


async def serve_http(
    app: App,
    settings: HttpSettings,
    authenticator: Authenticator,
    sock: socket.socket,
) -> None:
    """Serve ``app`` over Streamable HTTP on the listening ``sock`` until SIGTERM/SIGINT."""
    port = sock.getsockname()[1]
    endpoint = McpEndpoint(app, settings, authenticator, port=port)
    server = guarded_server(
        endpoint,
        request_timeout=HEADER_TIMEOUT_S,
        max_waiting=MAX_WAITING,
        max_header_bytes=MAX_HEADER_BYTES,
        date_header=False,
        backlog=LISTEN_BACKLOG,  # asyncio listen()s again with uvicorn's (2048)
        limit_concurrency=MAX_CONNECTIONS,
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    lifespan = app.lifespan() if app.lifespan is not None else contextlib.nullcontext()
    async with lifespan, anyio.create_task_group() as tg:
        await tg.start(endpoint.run)

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    _log.info("received signal %d; shutting down", signum)
                    # Open GET streams would hold the graceful stop: end the sessions first.
                    endpoint.sessions.end_all("the server is stopping")
                    server.should_exit = True
                    return

        tg.start_soon(stop_on_signal)
        serving = anyio.Event()

        async def announce() -> None:
            while not server.started:
                await anyio.sleep(0.005)
            serving.set()

        tg.start_soon(announce)
        tg.start_soon(_serve, server, sock, tg.cancel_scope)
        await serving.wait()
        # Printed, not logged: whoever started the server (a test, a script) learns the port.
        print(
            f"fsnotes: serving MCP over HTTP at {settings.describe(port)}",
            file=sys.stderr,
            flush=True,
        )


async def _serve(server: QuietServer, sock: socket.socket, group: anyio.CancelScope) -> None:
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()
        group.cancel()  # the endpoint's own tasks end with the server


def run_http(
    app: App, settings: HttpSettings, authenticator: Authenticator, sock: socket.socket
) -> None:
    """Blocking entry point (see :func:`serve_http`), set up as :func:`run_stdio` is."""
    configure_logging()

    async def main() -> None:
        limit_worker_threads()
        await serve_http(app, settings, authenticator, sock)

    with contextlib.suppress(KeyboardInterrupt):
        return_freed_memory_promptly()
        anyio.run(main)
