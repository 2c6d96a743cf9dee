"""The setup page under connections that never finish a request: a real `fsnotes serve`
process starts its page on notes_setup, a local attacker holds sockets to that port, and the
person's browser must still get the page."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsnotes.setup.runner import MAX_CONNECTIONS, MAX_WAITING, REQUEST_TIMEOUT_S
from tests.e2e.wire import Wire
from tests.setup.person import Person, free_port
from tests.siege import Siege

pytestmark = pytest.mark.timeout(120)

URL_CAPS = {"elicitation": {"url": {}}}
# What "answers" means for the person: well within a browser's patience.
ANSWER_WITHIN_S = 3.0


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def page(tmp_path: Path, port: int) -> Iterator[str]:
    """The URL of a pending setup's page, served by a real `fsnotes serve` (page on demand)."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "shared" / "proj").mkdir(parents=True)
    wire = Wire(
        tmp_path / "notes",
        tmp_path / "state",
        "--setup-allow",
        str(tmp_path / "shared"),
        "--setup-port",
        str(port),
    )
    try:
        args = {"workspaceUri": (tmp_path / "shared" / "proj").as_uri(), "access": "read"}
        result = wire.tool("notes_setup", args, URL_CAPS)["result"]
        assert result["resultType"] == "input_required", result
        yield str(result["inputRequests"]["connect_folder"]["params"]["url"])
    finally:
        wire.close()


def timed_open(person: Person, url: str) -> tuple[int, float]:
    began = time.monotonic()
    reply, _token = person.open(url)
    return reply.status, time.monotonic() - began


def test_the_page_answers_while_idle_and_half_open_connections_are_held(
    page: str, port: int
) -> None:
    # 40 sockets is more than the page's cap on requests in progress: on uvicorn alone every
    # request got "503 Exceeded concurrency limit" for as long as they were held.
    assert MAX_CONNECTIONS < 40
    person = Person(port)
    with Siege("127.0.0.1", port, silent=20, partial=20) as siege:
        time.sleep(0.5)  # all accepted
        assert siege.held == 40
        # Longer than the request deadline: the sockets it closes are opened again at once.
        until = time.monotonic() + REQUEST_TIMEOUT_S + 2
        answers = []
        while time.monotonic() < until:
            answers.append(timed_open(person, page))
            time.sleep(0.2)
        reopened = siege.reopened
    assert {status for status, _ in answers} == {200}, answers[:5]
    assert max(took for _, took in answers) < ANSWER_WITHIN_S
    assert reopened >= 40  # every socket was cut at least once, and came back


def test_more_waiting_connections_than_the_bound_cost_the_oldest_not_the_page(
    page: str, port: int
) -> None:
    # Held without reopening: the server keeps at most MAX_WAITING of them, closing the oldest.
    many = MAX_WAITING * 3
    with Siege("127.0.0.1", port, silent=many, partial=0, reopen=False) as siege:
        deadline = time.monotonic() + REQUEST_TIMEOUT_S / 2
        while siege.closed < many - MAX_WAITING and time.monotonic() < deadline:
            time.sleep(0.05)
        assert siege.closed >= many - MAX_WAITING
        status, took = timed_open(Person(port), page)
        assert status == 200 and took < ANSWER_WITHIN_S


def closed_within(sock: socket.socket, seconds: float, dribble: bytes) -> float | None:
    """Send ``dribble`` one byte every 0.2 s; how long until the server closed the socket."""
    began = time.monotonic()
    sock.settimeout(0.2)
    sent = 0
    while time.monotonic() - began < seconds:
        try:
            if sock.recv(4096) == b"":
                return time.monotonic() - began
        except TimeoutError:
            pass
        except OSError:
            return time.monotonic() - began
        if dribble:
            try:
                sock.sendall(dribble[sent % len(dribble) : sent % len(dribble) + 1])
            except OSError:
                return time.monotonic() - began
            sent += 1
    return None


@pytest.mark.parametrize(
    ("start", "dribble"),
    [
        (b"", b""),  # connects and says nothing
        (b"GET /setup/", b"abcdef"),  # a request line, one byte at a time
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: 1\r\n"),  # headers, byte by byte
        (  # complete headers, then a form body one byte at a time
            b"POST /setup/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4000\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n\r\n",
            b"code=1",
        ),
    ],
    ids=["silent", "request-line", "headers", "body"],
)
def test_a_slow_or_silent_client_is_cut_at_the_request_deadline(
    page: str, port: int, start: bytes, dribble: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(start)
        took = closed_within(sock, REQUEST_TIMEOUT_S + 3, dribble)
    assert took is not None, "the server kept the slow connection"
    assert REQUEST_TIMEOUT_S - 1 < took < REQUEST_TIMEOUT_S + 2


def test_a_browser_keeps_its_connection_for_several_requests(page: str, port: int) -> None:
    # Keep-alive still works: requests on one connection, each within the deadline.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        path = page.split(f"{port}", 1)[1]
        for _ in range(3):
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            assert not response.will_close
    finally:
        conn.close()


def test_answers_stay_prompt_for_many_browsers_at_once_under_siege(page: str, port: int) -> None:
    # A person's browser opens a handful of connections at once; all are answered.
    results: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        status, _ = timed_open(Person(port), page)
        with lock:
            results.append(status)

    with Siege("127.0.0.1", port, silent=20, partial=20):
        time.sleep(0.5)
        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert results == [200] * 6
