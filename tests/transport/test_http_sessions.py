"""2025-11-25 over Streamable HTTP: sessions (initialize, Mcp-Session-Id, the GET stream, live
server-to-client requests answered by POSTs, DELETE), their bounds and their end, on the demo
app and a real `fsnotes serve --http`."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from transport.http_support import (
    LEGACY,
    HttpServer,
    Raw,
    add_token,
    events,
    request_head,
    start_fsnotes,
    wait_for,
)

pytestmark = pytest.mark.timeout(120)


def initialize(raw: Raw, caps: dict[str, Any] | None = None) -> str:
    response = raw.post(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": caps or {},
            "clientInfo": {"name": "t", "version": "1"}}},
        modern=False,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.json()["result"]["protocolVersion"] == LEGACY
    session = response.headers["mcp-session-id"]
    note = raw.post(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"mcp-session-id": session, "mcp-protocol-version": LEGACY},
        modern=False,
    )
    assert note.status_code == 202 and note.content == b""
    return session


def legacy(raw: Raw, session: str, body: Any) -> httpx2.Response:
    return raw.post(body, {"mcp-session-id": session, "mcp-protocol-version": LEGACY}, modern=False)


def call(tool: str, args: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}  # fmt: skip


def test_initialize_mints_an_unguessable_session_id_and_requests_use_it(draw: Raw) -> None:
    first, second = initialize(draw), initialize(draw)
    for sid in (first, second):
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", sid)  # 32 random bytes, visible ASCII
    assert first != second
    listed = legacy(draw, first, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert listed.status_code == 200 and "hold" in listed.text
    who = legacy(draw, first, call("whoami", {})).json()["result"]["structuredContent"]
    assert who["era"] == "legacy" and who["principal"] == "demo"


def test_a_legacy_request_without_a_session_is_400_but_ping_is_answered(draw: Raw) -> None:
    refused = draw.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, modern=False)
    assert refused.status_code == 400 and refused.json()["id"] == 3
    note = draw.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, modern=False)
    assert note.status_code == 400
    ping = draw.post({"jsonrpc": "2.0", "id": 4, "method": "ping"}, modern=False)
    assert ping.status_code == 200 and ping.json() == {"jsonrpc": "2.0", "id": 4, "result": {}}


def test_an_unknown_session_and_another_principals_session_are_404(
    draw: Raw, demo: HttpServer, other_token: str
) -> None:
    missing = legacy(draw, "x" * 43, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert missing.status_code == 404 and missing.json()["id"] == 1
    sid = initialize(draw)
    other = Raw(demo, other_token)
    try:
        stolen = legacy(other, sid, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert stolen.status_code == 404
    finally:
        other.close()
    assert legacy(draw, sid, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).status_code == 200


def test_delete_ends_the_session_and_later_requests_get_404(draw: Raw) -> None:
    sid = initialize(draw)
    headers = {**draw.headers(), "mcp-session-id": sid}
    ended = draw.http.delete(draw.server.url, headers=headers)
    assert ended.status_code == 204
    after = legacy(draw, sid, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
    assert after.status_code == 404 and after.json()["id"] == 9
    assert draw.http.delete(draw.server.url, headers=headers).status_code == 404
    assert draw.http.get(draw.server.url, headers=headers).status_code == 404


def test_an_unsupported_version_header_in_a_session_is_400(draw: Raw) -> None:
    sid = initialize(draw)
    response = draw.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"mcp-session-id": sid, "mcp-protocol-version": "1999-01-01"},
        modern=False,
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == -32022


class Stream:
    """A session's GET stream read on a thread: its messages arrive in ``messages``."""

    def __init__(self, raw: Raw, session: str) -> None:
        self.messages: list[dict[str, Any]] = []
        self.status = 0
        self.headers: dict[str, str] = {}
        self._client = httpx2.Client(timeout=httpx2.Timeout(5, read=60))
        self._opened = threading.Event()
        self._raw, self._session = raw, session
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._opened.wait(10)

    def _run(self) -> None:
        headers = {**self._raw.headers(), "mcp-session-id": self._session}
        headers["accept"] = "text/event-stream"
        try:
            with self._client.stream("GET", self._raw.server.url, headers=headers) as r:
                self.status, self.headers = r.status_code, dict(r.headers)
                self._opened.set()
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        self.messages.append(json.loads(line[5:]))
        except httpx2.HTTPError:
            pass
        finally:
            self._opened.set()

    def wait(self, predicate: Any, timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self.messages:
                if predicate(m):
                    return m
            time.sleep(0.02)
        raise AssertionError(f"not seen on the GET stream: {self.messages}")

    def close(self) -> None:
        self._client.close()
        self._thread.join(10)


@pytest.fixture
def stream_of(draw: Raw) -> Iterator[Any]:
    opened: list[Stream] = []

    def open_stream(session: str) -> Stream:
        opened.append(Stream(draw, session))
        return opened[-1]

    yield open_stream
    for s in opened:
        s.close()


def test_the_get_stream_carries_roots_list_and_the_answer_is_posted(
    draw: Raw, stream_of: Any
) -> None:
    sid = initialize(draw, {"roots": {"listChanged": True}})
    stream = stream_of(sid)
    assert stream.status == 200
    assert stream.headers["content-type"] == "text/event-stream"
    assert stream.headers["x-accel-buffering"] == "no"
    # The roots/list sent right after notifications/initialized waited for the stream.
    asked = stream.wait(lambda m: m.get("method") == "roots/list")
    answered = legacy(draw, sid, {"jsonrpc": "2.0", "id": asked["id"], "result": {
        "roots": [{"uri": "file:///home/ada/notes", "name": "notes"}]}})  # fmt: skip
    assert answered.status_code == 202
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        seen = legacy(draw, sid, call("roots_seen", {})).json()["result"]["structuredContent"]
        if seen == {"roots": ["file:///home/ada/notes"]}:
            break
        time.sleep(0.05)
    assert seen == {"roots": ["file:///home/ada/notes"]}


def test_a_second_get_stream_is_409_and_one_without_sse_accept_406(
    draw: Raw, stream_of: Any
) -> None:
    sid = initialize(draw)
    stream_of(sid)
    headers = {**draw.headers(), "mcp-session-id": sid, "accept": "text/event-stream"}
    assert draw.http.get(draw.server.url, headers=headers).status_code == 409
    headers["accept"] = "application/json"
    assert draw.http.get(draw.server.url, headers=headers).status_code == 406


def test_delete_closes_the_get_stream(draw: Raw, stream_of: Any) -> None:
    sid = initialize(draw)
    stream = stream_of(sid)
    draw.http.delete(draw.server.url, headers={**draw.headers(), "mcp-session-id": sid})
    stream._thread.join(5)
    assert not stream._thread.is_alive()


def test_live_elicitation_rides_the_posts_stream_and_the_answer_is_posted(draw: Raw) -> None:
    sid = initialize(draw, {"elicitation": {"form": {}}})
    body = json.dumps(call("confirm", {"title": "groceries"}, rid=7)).encode()
    extra = [("mcp-session-id", sid), ("mcp-protocol-version", LEGACY)]
    host, port = draw.server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(request_head(draw.server, draw.token, body, extra) + body)
        received = b""
        while b"elicitation/create" not in received:
            received += sock.recv(65536)
        assert b"text/event-stream" in received
        line = next(x for x in received.split(b"\n") if b"elicitation/create" in x)
        asked = json.loads(line.split(b"data:", 1)[1])
        assert asked["params"]["message"] == "Delete note 'groceries'?"
        posted = legacy(draw, sid, {"jsonrpc": "2.0", "id": asked["id"], "result": {
            "action": "accept", "content": {"ok": True}}})  # fmt: skip
        assert posted.status_code == 202
        while b'"id":7' not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
    final = json.loads(received.split(b'data: {"jsonrpc":"2.0","id":7', 1)[1].split(b"\n")[0]
                       .join([b'{"jsonrpc":"2.0","id":7', b""]))  # fmt: skip
    assert final["result"]["structuredContent"] == {"deleted": True}


def test_notifications_cancelled_cancels_a_running_legacy_request(draw: Raw, marks: Path) -> None:
    sid = initialize(draw)
    done: list[httpx2.Response] = []

    def run() -> None:
        done.append(legacy(draw, sid, call("hold", {"id": "lc1", "seconds": 20}, rid=41)))

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(0.5)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": 41, "reason": "test"}}  # fmt: skip
    second = Raw(draw.server, draw.token)
    try:
        assert legacy(second, sid, cancel).status_code == 202
    finally:
        second.close()
    worker.join(10)
    assert wait_for(marks / "cancelled-lc1")
    # The POST's stream ended with no answer (a cancelled request gets none).
    assert done and done[0].status_code == 200 and events(done[0]) == []


def test_a_closed_stream_does_not_cancel_a_legacy_request(draw: Raw, marks: Path) -> None:
    sid = initialize(draw)
    body = json.dumps(call("hold", {"id": "lc2", "seconds": 1}, rid=42)).encode()
    extra = [("mcp-session-id", sid), ("mcp-protocol-version", LEGACY)]
    host, port = draw.server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_head(draw.server, draw.token, body, extra) + body)
        time.sleep(0.3)
    # 2025-11-25: "Disconnection SHOULD NOT be interpreted as the client cancelling".
    assert wait_for(marks / "finished-lc2")
    assert not (marks / "cancelled-lc2").exists()


def test_delete_cancels_the_sessions_running_requests(draw: Raw, marks: Path) -> None:
    sid = initialize(draw)
    worker = threading.Thread(
        target=lambda: legacy(draw, sid, call("hold", {"id": "lc3", "seconds": 20}, rid=43))
    )
    worker.start()
    time.sleep(0.5)
    other = Raw(draw.server, draw.token)
    try:
        assert other.http.delete(draw.server.url, headers={
            **other.headers(), "mcp-session-id": sid}).status_code == 204  # fmt: skip
    finally:
        other.close()
    worker.join(10)
    assert wait_for(marks / "cancelled-lc3")


def test_a_principal_past_its_bound_loses_its_least_recently_used_idle_session(
    fresh_draw: Raw,
) -> None:
    from fsnotes.transport.http_sessions import MAX_SESSIONS_PER_PRINCIPAL

    draw = fresh_draw
    sids = [initialize(draw) for _ in range(MAX_SESSIONS_PER_PRINCIPAL)]
    for sid in sids[1:]:
        assert legacy(draw, sid, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).is_success
    newest = initialize(draw)
    assert legacy(draw, sids[0], {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
                  ).status_code == 404  # fmt: skip
    for sid in [*sids[1:], newest]:
        assert legacy(draw, sid, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).is_success
        draw.http.delete(draw.server.url, headers={**draw.headers(), "mcp-session-id": sid})


def test_sessions_with_open_streams_are_never_evicted_and_the_next_is_503(
    fresh_draw: Raw,
) -> None:
    from fsnotes.transport.http_sessions import MAX_SESSIONS_PER_PRINCIPAL

    draw = fresh_draw
    sids = [initialize(draw) for _ in range(MAX_SESSIONS_PER_PRINCIPAL)]
    streams = [Stream(draw, sid) for sid in sids]
    refused = draw.post(
        {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}},
        modern=False,
    )  # fmt: skip
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == -32603 and "DELETE" in refused.json()["error"][
        "message"]  # fmt: skip
    for sid in sids:
        assert draw.http.delete(draw.server.url, headers={
            **draw.headers(), "mcp-session-id": sid}).status_code == 204  # fmt: skip
    for stream in streams:
        stream.close()


def test_the_server_wide_session_bound_answers_503_then_admits_after_a_delete(
    tmp_path: Path, workspace: Path
) -> None:
    from fsnotes.transport.http_sessions import MAX_SESSIONS, MAX_SESSIONS_PER_PRINCIPAL

    state = tmp_path / "state"
    principals = MAX_SESSIONS // MAX_SESSIONS_PER_PRINCIPAL + 1
    tokens = [add_token(state, f"p{i}") for i in range(principals)]
    with start_fsnotes(workspace, state) as server:
        clients = [Raw(server, t) for t in tokens]
        try:
            opened = []
            for i in range(MAX_SESSIONS):
                opened.append((clients[i // MAX_SESSIONS_PER_PRINCIPAL], None))
                opened[-1] = (opened[-1][0], initialize(opened[-1][0]))
            last = clients[-1]
            refused = last.post(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": LEGACY, "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}},
                modern=False,
            )  # fmt: skip
            assert refused.status_code == 503
            assert f"{MAX_SESSIONS} sessions are open" in refused.json()["error"]["message"]
            client, sid = opened[0]
            client.http.delete(server.url, headers={**client.headers(), "mcp-session-id": sid})
            assert initialize(last)
            ended = "ended an HTTP session of 'p0': the client ended it (DELETE)"
            assert server.logged(ended), server.stderr()
        finally:
            for c in clients:
                c.close()


def test_idle_sessions_expire_with_a_reason() -> None:
    import anyio

    from fsnotes.runtime.connection import ServerConnection
    from fsnotes.security.tokens import Identity
    from fsnotes.transport.http_sessions import HttpSession, SessionTable
    from tests.servers.demo_server import build_app

    async def main() -> None:
        table = SessionTable(idle_s=60)
        ada = Identity("ada")
        busy = HttpSession("b", ada, ServerConnection(build_app(), principal="ada"), 0.0)
        idle = HttpSession("i", ada, ServerConnection(build_app(), principal="ada"), 0.0)
        fresh = HttpSession("f", ada, ServerConnection(build_app(), principal="ada"), 50.0)
        busy.busy = 1
        for s in (busy, idle, fresh):
            table.add(s)
        table.expire(100.0)
        assert idle.ended and table.get("i", ada) is None
        assert not busy.ended and not fresh.ended and len(table) == 2

    anyio.run(main)


def test_a_session_is_found_only_for_its_principal_with_its_tokens_ceiling() -> None:
    import anyio

    from fsnotes.runtime.connection import ServerConnection
    from fsnotes.security.grants import Access
    from fsnotes.security.tokens import Identity
    from fsnotes.transport.http_sessions import HttpSession, SessionTable
    from tests.servers.demo_server import build_app

    async def main() -> None:
        table = SessionTable(max_per_principal=2)
        reader = Identity("ada", Access.READ)
        conn = ServerConnection(build_app(), principal="ada", ceiling="read")
        table.add(HttpSession("r", reader, conn, 0.0))
        assert table.get("r", Identity("ada", Access.READ)) is not None
        for other in (Identity("ada"), Identity("ada", Access.WRITE), Identity("bob", Access.READ)):
            assert table.get("r", other) is None
        # The bound counts sessions by principal, whatever their ceilings.
        full = ServerConnection(build_app(), principal="ada")
        table.add(HttpSession("f", Identity("ada"), full, 1.0))
        table.make_room("ada")
        assert table.get("r", reader) is None and len(table) == 1

    anyio.run(main)
