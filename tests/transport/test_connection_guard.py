"""The guarded h11 protocol on a real uvicorn server and real sockets: requests in progress
still meet the concurrency cap, connections without a request do not count but are bounded,
and a kept-alive connection waits again after its response."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.from_thread
import pytest
import uvicorn

from fsnotes.transport.http_guard import guarded_h11

pytestmark = pytest.mark.timeout(60)

CAP = 2
WAITING = 4
TIMEOUT_S = 3.0


class Held:
    """An ASGI app: ``/hold`` answers once ``release`` is set, anything else at once."""

    def __init__(self) -> None:
        self.release = threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["path"] == "/hold":
            while not self.release.is_set():
                await anyio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def served() -> Iterator[tuple[int, Held]]:
    app = Held()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="off",
        http=guarded_h11(request_timeout=TIMEOUT_S, max_waiting=WAITING, max_header_bytes=4096),
        ws="none",
        limit_concurrency=CAP,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=1,
        h11_max_incomplete_event_size=4096,
    )
    server = uvicorn.Server(config)
    with anyio.from_thread.start_blocking_portal("asyncio") as portal:
        future = portal.start_task_soon(lambda: server.serve(sockets=[sock]))
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            yield sock.getsockname()[1], app
        finally:
            app.release.set()
            server.should_exit = True
            future.result(10)
            sock.close()


def get(port: int, path: str = "/", sock: socket.socket | None = None) -> int:
    """One GET (on ``sock`` if given, kept open); its status."""
    own = sock is None
    sock = sock or socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            assert chunk, "closed before an answer"
            head += chunk
        return int(head.split(b" ", 2)[1])
    finally:
        if own:
            sock.close()


def is_closed(sock: socket.socket, wait: float = 1.0) -> bool:
    """Whether the server closes ``sock`` within ``wait`` (what it still sends is read)."""
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            return False
        except OSError:
            return True
    return False


def test_requests_in_progress_still_meet_the_cap(served: tuple[int, Held]) -> None:
    port, app = served
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(CAP)]
    try:
        for sock in held:
            sock.sendall(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)
        assert get(port) == 503  # CAP requests are in progress
        app.release.set()
        time.sleep(0.3)
        assert get(port) == 200
    finally:
        for sock in held:
            sock.close()


def test_connections_without_a_request_do_not_count_and_the_oldest_go(
    served: tuple[int, Held],
) -> None:
    port, _ = served
    silent = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(WAITING * 3)]
    try:
        time.sleep(0.3)
        assert get(port) == 200  # CAP is 2; twelve silent sockets do not make it 503
        closed = [is_closed(sock, 0.5) for sock in silent]
        # The oldest were closed to keep WAITING; the newest are open (one of them made room
        # for the GET's connection, which then left).
        assert all(closed[: 2 * WAITING]) and not any(closed[-WAITING + 1 :])
    finally:
        for sock in silent:
            sock.close()


def test_a_kept_alive_connection_waits_again_after_its_response(served: tuple[int, Held]) -> None:
    port, _ = served
    kept = socket.create_connection(("127.0.0.1", port), timeout=5)
    others: list[socket.socket] = []
    try:
        assert get(port, sock=kept) == 200
        assert not is_closed(kept, 0.3)  # kept alive
        # Once answered it waits for a request again: it is the oldest waiting, so WAITING
        # newer silent connections push it out.
        others = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(WAITING)]
        assert is_closed(kept)
        assert not any(is_closed(sock, 0.2) for sock in others)
    finally:
        kept.close()
        for sock in others:
            sock.close()


def test_a_kept_alive_connection_gets_the_deadline_from_its_next_requests_first_byte(
    served: tuple[int, Held],
) -> None:
    port, _ = served
    with socket.create_connection(("127.0.0.1", port), timeout=5) as kept:
        assert get(port, sock=kept) == 200
        time.sleep(TIMEOUT_S + 0.5)  # silent between requests: only keep-alive (30 s) applies
        assert not is_closed(kept, 0.1)
        kept.sendall(b"GET / HT")
        began = time.monotonic()
        assert is_closed(kept, TIMEOUT_S + 2)
        assert TIMEOUT_S - 0.5 < time.monotonic() - began < TIMEOUT_S + 1.5


@pytest.mark.parametrize(
    "limits",
    [
        {"request_timeout": 0, "max_waiting": 1, "max_header_bytes": 1},
        {"request_timeout": 1, "max_waiting": 0, "max_header_bytes": 1},
        {"request_timeout": 1, "max_waiting": 1, "max_header_bytes": 0},
    ],
)
def test_limits_that_bound_nothing_are_refused(limits: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="positive"):
        guarded_h11(**limits)
