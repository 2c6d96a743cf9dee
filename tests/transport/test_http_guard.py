"""What the HTTP endpoint refuses before it reads a message: foreign Host and Origin (DNS
rebinding), non-loopback binds not asked for, huge headers, slow or silent connections, slow
bodies; and that none of it keeps other clients waiting."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from fsnotes.security.tokens import BearerTokens, TokenEntry, digest_of
from fsnotes.transport.http import McpEndpoint
from fsnotes.transport.http_server import HEADER_TIMEOUT_S, MAX_CONNECTIONS, MAX_WAITING
from fsnotes.transport.http_settings import HttpSettings
from tests.servers.demo_server import build_app
from tests.siege import Siege
from transport.http_support import REPO, HttpServer, Raw, add_token, raw_exchange, request_head

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("host", "origin", "status"),
    [
        ("evil.example:{port}", None, 403),
        ("evil.example:{port}", "http://evil.example:{port}", 403),
        ("127.0.0.1:{port}", "http://evil.example", 403),
        ("127.0.0.1:{port}", "null", 403),
        ("127.0.0.1:1", None, 403),  # a loopback name with another port
        ("127.0.0.1", None, 403),
        ("127.0.0.1:{port}", None, 200),
        ("localhost:{port}", "http://localhost:{port}", 200),
        ("[::1]:{port}", None, 200),
        ("LOCALHOST:{port}", "HTTP://127.0.0.1:{port}", 200),
    ],
)
def test_host_and_origin_must_be_this_servers(
    raw: Raw, host: str, origin: str | None, status: int
) -> None:
    extra = {"host": host.format(port=raw.server.port)}
    if origin is not None:
        extra["origin"] = origin.format(port=raw.server.port)
    response = raw.post(raw.request("tools/list"), extra)
    assert response.status_code == status, response.text
    if status == 403:
        error = response.json()["error"]
        assert error["code"] == -32600 and "id" not in response.json()
        assert "evil" not in response.text  # nothing echoed back


def test_a_foreign_host_is_refused_before_the_token_is_looked_at(raw: Raw) -> None:
    client = Raw(raw.server, None)
    try:
        response = client.post(client.request("tools/list"), {"host": "evil.example"})
        assert response.status_code == 403
    finally:
        client.close()


def test_configured_hosts_and_origins_are_answered_too(tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    token = add_token(state, "ada")
    config = tmp_path / "fsnotes.toml"
    config.write_text('[http]\nallowed_hosts = ["notes.example"]\n'
                      'allowed_origins = ["https://app.example"]\n')  # fmt: skip
    with HttpServer([sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace),
                     "--state-dir", str(state), "--config", str(config),
                     "--http", "127.0.0.1:0"]) as server:  # fmt: skip
        client = Raw(server, token)
        try:
            ok = {"host": f"notes.example:{server.port}", "origin": "https://app.example"}
            assert client.post(client.request("tools/list"), ok).status_code == 200
            bad = {"host": f"notes.example:{server.port}", "origin": "https://other.example"}
            assert client.post(client.request("tools/list"), bad).status_code == 403
        finally:
            client.close()


def test_a_non_loopback_bind_needs_the_expose_flag(tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    token = add_token(state, "ada")
    argv = [sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace),
            "--state-dir", str(state), "--http", "0.0.0.0:0"]  # fmt: skip
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert refused.returncode == 2 and "--http-expose" in refused.stderr
    with HttpServer([*argv, "--http-expose"]) as server:
        lines = [line for line in server.stderr().splitlines() if "exposing" in line]
        assert len(lines) == 1
        assert "every network interface" in lines[0] and "'ada'" in lines[0]
        assert token not in server.stderr()
        # Still only loopback names in Host (a container published on the host's loopback).
        assert server.url.startswith("http://0.0.0.0:")
        server.url = server.url.replace("0.0.0.0", "127.0.0.1")
        client = Raw(server, token)
        try:
            assert client.post(client.request("tools/list")).status_code == 200
            hostname = {"host": f"{socket.gethostname()}:{server.port}"}
            assert client.post(client.request("tools/list"), hostname).status_code == 403
        finally:
            client.close()


def test_huge_headers_get_431_and_the_server_goes_on(raw: Raw) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    head = request_head(raw.server, raw.token, body, [("x-filler", "a" * 20_000)])
    answer = raw_exchange(raw.server, head, body)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    assert raw.post(raw.request("tools/list")).status_code == 200


def test_huge_headers_still_arriving_get_431(raw: Raw) -> None:
    host, port = raw.server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"a" * 17_000)
        answer = sock.recv(4096)  # the head is not complete: h11's buffer overflows first
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]


def test_slowloris_connections_do_not_starve_others_and_are_cut(raw: Raw) -> None:
    host, port = raw.server.host.rsplit(":", 1)
    slow = [socket.create_connection((host, int(port)), timeout=30) for _ in range(40)]
    stop = threading.Event()

    def dribble() -> None:
        # One header byte per connection every 0.5 s: never a complete request.
        for sock in slow:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        while not stop.is_set():
            for sock in slow:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X")
            stop.wait(0.5)

    thread = threading.Thread(target=dribble, daemon=True)
    thread.start()
    try:
        time.sleep(1)
        started = time.monotonic()
        for _ in range(5):
            assert raw.post(raw.request("tools/list")).status_code == 200
        assert time.monotonic() - started < 5
        # The dribbling connections are closed once their headers are overdue.
        time.sleep(HEADER_TIMEOUT_S + 1.5)
        closed = 0
        for sock in slow:
            sock.settimeout(2)
            try:
                closed += sock.recv(1) == b""
            except (ConnectionResetError, BrokenPipeError):
                closed += 1
            except TimeoutError:
                pass
        assert closed == len(slow)
    finally:
        stop.set()
        thread.join(5)
        for sock in slow:
            sock.close()


def test_idle_and_half_open_connections_past_the_connection_cap_do_not_get_others_503(
    raw: Raw,
) -> None:
    # More than the cap on connections in a request, and more than the bound on waiting ones:
    # half say nothing, half send a partial request line; each the server closes comes back.
    host, port = raw.server.host.rsplit(":", 1)
    each = (max(MAX_CONNECTIONS, MAX_WAITING) + 32) // 2
    with Siege(host, int(port), silent=each, partial=each, partial_bytes=b"POST /mc") as siege:
        time.sleep(1)
        assert siege.held + siege.closed >= 2 * each
        # Past the header deadline too: reopened sockets take the place of those it cut.
        until = time.monotonic() + HEADER_TIMEOUT_S + 2
        statuses = []
        while time.monotonic() < until:
            began = time.monotonic()
            statuses.append(raw.post(raw.request("tools/list")).status_code)
            assert time.monotonic() - began < 3
            time.sleep(0.5)
        cut = siege.closed
    assert set(statuses) == {200}, statuses[:5]
    assert cut >= 2 * each  # the deadline and the waiting bound did close them


def test_a_connection_that_sends_nothing_is_closed_after_the_header_deadline(raw: Raw) -> None:
    host, port = raw.server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=HEADER_TIMEOUT_S + 5) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""
        assert HEADER_TIMEOUT_S - 1 < time.monotonic() - started < HEADER_TIMEOUT_S + 4


def test_a_body_that_does_not_arrive_in_time_gets_408() -> None:
    token = "fsn_" + "t" * 43
    endpoint = McpEndpoint(
        build_app(),
        HttpSettings(port=9),
        BearerTokens([TokenEntry("demo", digest_of(token))], None),
        port=9,
        body_timeout=0.3,
    )
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        if not sent and not getattr(receive, "once", False):
            receive.once = True  # type: ignore[attr-defined]
            return {"type": "http.request", "body": b'{"jsonrpc":', "more_body": True}
        await anyio.sleep(60)  # the rest never comes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [
            (b"host", b"127.0.0.1:9"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ],
    }

    async def main() -> None:
        with anyio.fail_after(5):
            await endpoint(scope, receive, send)  # type: ignore[arg-type]

    anyio.run(main)
    assert sent[0]["status"] == 408
    assert (b"connection", b"close") in sent[0]["headers"]  # type: ignore[operator]


@pytest.mark.timeout(180)
def test_a_client_that_stops_reading_loses_its_connection_and_others_go_on(
    tmp_path: Path,
) -> None:
    from fsnotes.transport.http_reply import WRITE_STALL_S
    from transport.http_support import make_workspace, start_fsnotes

    workspace, state = make_workspace(tmp_path), tmp_path / "state"
    (workspace / "big.md").write_text("# Big\n\n" + "x" * 4_000_000 + "\n")
    token = add_token(state, "ada")
    with start_fsnotes(workspace, state) as server:
        raw = Raw(server, token)
        try:
            import json

            body = json.dumps(raw.request("tools/call", {"name": "notes_read", "arguments": {
                "uri": (workspace / "big.md").as_uri()}})).encode()  # fmt: skip
            extra = list(raw.modern_headers(json.loads(body)).items())
            host, port = server.host.rsplit(":", 1)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect((host, int(port)))
            sock.sendall(request_head(server, token, body, extra) + body)  # and never read
            started = time.monotonic()
            while "read nothing for a while" not in server.stderr():
                assert time.monotonic() - started < WRITE_STALL_S + 60
                # Meanwhile others are served.
                assert raw.post(raw.request("tools/list")).status_code == 200
                time.sleep(1)
            assert time.monotonic() - started >= WRITE_STALL_S - 1
            sock.settimeout(10)
            with contextlib.suppress(ConnectionResetError):
                while sock.recv(1 << 20):
                    pass  # what was sent before the cut, then the end
            sock.close()
        finally:
            raw.close()
