"""2026-07-28 over Streamable HTTP: a real `fsnotes serve --http` (and the demo app over the same
transport), driven with raw HTTP so every status, header and error code is seen as sent."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx2
import pytest

from transport.http_support import (
    MODERN,
    HttpServer,
    Raw,
    events,
    meta,
    raw_exchange,
    request_head,
    wait_for,
)

pytestmark = pytest.mark.timeout(90)


def test_discover_and_a_read_answer_json_with_result_type(raw: Raw, workspace: Path) -> None:
    discover = raw.post(raw.request("server/discover"))
    assert discover.status_code == 200
    assert discover.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in discover.headers
    body = discover.json()
    assert (
        body["result"]["resultType"] == "complete" and MODERN in body["result"]["supportedVersions"]
    )
    read = raw.call("tools/call", {"name": "notes_read", "arguments": {"uri": (
        workspace / "plan.md").as_uri()}})  # fmt: skip
    assert read["result"]["structuredContent"]["title"] == "Plan"


def test_non_ascii_note_uri_travels_base64_in_mcp_name(raw: Raw, workspace: Path) -> None:
    uri = (workspace / "café.md").as_uri().replace("%C3%A9", "é")
    body = raw.request("resources/read", {"uri": uri})
    headers = raw.modern_headers(body)
    assert headers["mcp-name"].startswith("=?base64?")
    answer = raw.post(body).json()
    assert "croissants" in answer["result"]["contents"][0]["text"]


def _create(raw: Raw, path: str, headers: dict[str, str | None]) -> httpx2.Response:
    body = raw.request("tools/call", {"name": "notes_create", "arguments": {
        "workspaceUri": "", "path": path, "content": "# x\n"}})  # fmt: skip
    return raw.post(body, headers)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("case", "headers"),
    [
        ("version header missing", {"mcp-protocol-version": None}),
        ("version header differs from _meta", {"mcp-protocol-version": "2025-11-25"}),
        ("method header missing", {"mcp-method": None}),
        ("method header differs", {"mcp-method": "tools/list"}),
        ("method header in other case", {"mcp-method": "TOOLS/CALL"}),
        ("name header missing", {"mcp-name": None}),
        ("name header differs", {"mcp-name": "notes_delete"}),
        ("name header is broken base64", {"mcp-name": "=?base64?!!!?="}),
        ("name header is base64 of another name", {"mcp-name": "=?base64?bm90ZXNfcmVhZA==?="}),
    ],
)
def test_mirrored_header_mismatch_is_400_with_32020_and_runs_nothing(
    raw: Raw, workspace: Path, case: str, headers: dict[str, str | None]
) -> None:
    response = _create(raw, "mismatch.md", headers)
    assert response.status_code == 400, case
    body = response.json()
    assert body["error"]["code"] == -32020 and body["id"] is not None, body
    assert not (workspace / "mismatch.md").exists()


def test_header_names_are_case_insensitive_and_values_trimmed(raw: Raw, workspace: Path) -> None:
    body = json.dumps(raw.request("tools/call", {"name": "notes_read", "arguments": {
        "uri": (workspace / "plan.md").as_uri()}})).encode()  # fmt: skip
    head = request_head(raw.server, raw.token, body, [
        ("mcp-PROTOCOL-version", MODERN), ("MCP-METHOD", "tools/call"),
        ("Mcp-Name", "   notes_read \t")])  # fmt: skip
    answer = raw_exchange(raw.server, head, body)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b'"structuredContent"' in answer


def test_a_repeated_mirrored_header_is_a_mismatch(raw: Raw) -> None:
    body = raw.request("tools/list")
    headers = [*raw.headers().items(), *raw.modern_headers(body).items()]
    headers.append(("mcp-method", "tools/list"))
    response = raw.http.post(raw.server.url, content=json.dumps(body), headers=headers)
    assert response.status_code == 400 and response.json()["error"]["code"] == -32020


def test_unsupported_version_is_400_with_32022_listing_what_is(raw: Raw) -> None:
    body = raw.request("server/discover")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999.0.0"
    response = raw.post(body, {"mcp-protocol-version": "v999.0.0"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [MODERN], "requested": "v999.0.0"}


@pytest.mark.parametrize(
    "method", ["unknown/method", "initialize", "ping", "logging/setLevel", "resources/subscribe"]
)
def test_unknown_or_removed_method_is_404_with_32601(raw: Raw, method: str) -> None:
    body = raw.request(method)
    response = raw.post(body)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601 and response.json()["id"] == body["id"]


def test_missing_meta_under_a_modern_version_header_is_400_with_32602(raw: Raw) -> None:
    body = {"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": {}}
    response = raw.post(body, {"mcp-protocol-version": MODERN, "mcp-method": "server/discover"})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32602
    assert response.json()["id"] == 5


def test_notification_post_is_202_without_body(raw: Raw) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {
        "requestId": 1, "_meta": meta()}}  # fmt: skip
    response = raw.post(note)
    assert response.status_code == 202 and response.content == b""


def test_a_posted_response_is_refused_in_the_modern_era(raw: Raw) -> None:
    response = raw.post({"jsonrpc": "2.0", "id": 1, "result": {}}, {"mcp-protocol-version": MODERN})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32600


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
def test_get_and_delete_without_a_session_are_405(raw: Raw, verb: str) -> None:
    response = raw.http.request(verb, raw.server.url, headers=raw.headers())
    assert response.status_code == 405 and response.headers["allow"] == "POST"


def test_other_http_methods_are_405(raw: Raw) -> None:
    response = raw.http.request("PUT", raw.server.url, headers=raw.headers())
    assert response.status_code == 405


def test_a_batch_is_400_and_none_of_it_runs(raw: Raw, workspace: Path) -> None:
    one = raw.request("tools/call", {"name": "notes_create", "arguments": {
        "path": "batched.md", "content": "# b\n"}})  # fmt: skip
    response = raw.post([one, raw.request("tools/list")], {"mcp-method": "tools/call"})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32600
    assert "id" not in response.json()
    assert not (workspace / "batched.md").exists()


@pytest.mark.parametrize(
    ("content", "code"),
    [(b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700), (b"\xff\xfe{}", -32700),
     (b"[1, 2", -32700), (b'"just a string"', -32600)],
)  # fmt: skip
def test_malformed_bodies_are_400_with_the_json_rpc_error(
    raw: Raw, content: bytes, code: int
) -> None:
    response = raw.post(content, {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
    assert response.status_code == 400 and response.json()["error"]["code"] == code


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"content-type": "text/plain"}, 415),
        ({"content-type": None}, 415),
        ({"accept": "application/json"}, 406),
        ({"accept": "text/event-stream"}, 406),
        ({"accept": "application/json, text/event-stream;q=0"}, 406),
        ({"accept": "*/*"}, 200),
        ({"content-type": "application/json; charset=utf-8"}, 200),
    ],
)
def test_content_type_and_accept(raw: Raw, headers: dict[str, str | None], status: int) -> None:
    response = raw.post(raw.request("tools/list"), headers)  # type: ignore[arg-type]
    assert response.status_code == status
    if status != 200:
        assert response.json()["error"]["code"] == -32600


def test_a_missing_accept_is_406(raw: Raw) -> None:
    body = json.dumps(raw.request("tools/list")).encode()
    extra = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/list")]
    answer = raw_exchange(raw.server, request_head(raw.server, raw.token, body, extra,
                                                   accept=None), body)  # fmt: skip
    assert answer.startswith(b"HTTP/1.1 406 "), answer[:200]


def test_a_body_over_the_limit_is_413_before_it_is_read(raw: Raw) -> None:
    # Content-Length says 9 MiB; the server answers without reading it (we send none of it).
    head = request_head(raw.server, raw.token, b"x" * (9 * 1024 * 1024))
    answer = raw_exchange(raw.server, head)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b'"code":-32600' in answer


def test_a_chunked_body_over_the_limit_is_413(raw: Raw) -> None:
    def chunks():  # type: ignore[no-untyped-def]
        for _ in range(10):
            yield b" " * (1024 * 1024)

    response = raw.http.post(raw.server.url, content=chunks(), headers={
        **raw.headers(), "mcp-protocol-version": MODERN, "mcp-method": "tools/list"})  # fmt: skip
    assert response.status_code == 413 and response.json()["error"]["code"] == -32600


def test_progress_turns_the_answer_into_an_sse_stream_of_that_request(draw: Raw) -> None:
    body = draw.request("tools/call", {"name": "slow", "arguments": {"steps": 3, "delay": 0}})
    body["params"]["_meta"]["progressToken"] = "p1"
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "info"
    response = draw.post(body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-accel-buffering"] == "no"
    got = events(response)
    methods = [m.get("method") for m in got]
    assert methods[:-1] == ["notifications/progress", "notifications/message"] * 3
    assert [m["params"]["progress"] for m in got if m.get("method") == "notifications/progress"] \
        == [1, 2, 3]  # fmt: skip
    assert got[-1]["id"] == body["id"] and got[-1]["result"]["content"][0]["text"] == "done 3"
    assert not any("id" in m and "method" in m for m in got)  # never a request to the client


def test_no_log_messages_without_the_requests_opt_in(draw: Raw) -> None:
    body = draw.request("tools/call", {"name": "slow", "arguments": {"steps": 2, "delay": 0}})
    response = draw.post(body)
    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "done 2"


@pytest.mark.parametrize("streaming", [True, False])
def test_closing_the_connection_cancels_the_request(
    draw: Raw, marks: Path, streaming: bool
) -> None:
    mark = f"close-{streaming}"
    body = draw.request("tools/call", {"name": "hold", "arguments": {
        "id": mark, "seconds": 20, "progress": streaming}})  # fmt: skip
    body["params"]["_meta"]["progressToken"] = 1
    data = json.dumps(body).encode()
    extra = list(draw.modern_headers(body).items())
    host, port = draw.server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_head(draw.server, draw.token, data, extra) + data)
        if streaming:
            head = b""  # the stream's headers, then its first event (progress)
            while b"notifications/progress" not in head:
                chunk = sock.recv(65536)
                assert chunk, head
                head += chunk
            assert b"text/event-stream" in head
        else:
            time.sleep(0.5)  # running; its JSON answer (and any header) is 20 s away
    assert wait_for(marks / f"cancelled-{mark}")
    assert not (marks / f"finished-{mark}").exists()
    # Nothing else was affected: the next request is served.
    assert draw.call("tools/call", {"name": "echo", "arguments": {"text": "x"}})["result"]


def test_a_session_id_on_a_modern_request_is_ignored(raw: Raw) -> None:
    response = raw.post(raw.request("tools/list"), {"mcp-session-id": "no-such-session"})
    assert response.status_code == 200 and "mcp-session-id" not in response.headers


def test_many_concurrent_requests_all_answered(draw: Raw, demo: HttpServer) -> None:
    import concurrent.futures

    def one(i: int) -> str:
        answer = draw.call("tools/call", {"name": "echo", "arguments": {"text": f"m{i}"}})
        return str(answer["result"]["structuredContent"]["text"])

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        assert sorted(pool.map(one, range(64))) == sorted(f"m{i}" for i in range(64))


@pytest.mark.timeout(240)
def test_reads_of_a_large_note_past_the_answer_budget_all_arrive_whole(
    tmp_path: Path,
) -> None:
    # 9 answers of 9 MiB held for clients that read nothing yet are more than the 64 MiB of
    # answers the server keeps waiting: the later ones are computed again once room is made
    # (never held meanwhile), and every client gets its whole answer once it reads.
    from transport.http_support import add_token, make_workspace, start_fsnotes

    workspace, state = make_workspace(tmp_path), tmp_path / "state"
    big = "# Big\n\n" + ("a line of a large note, " * 40 + "\n") * 4300
    assert 4_000_000 < len(big) <= 4 * 1024 * 1024
    (workspace / "big.md").write_text(big)
    token = add_token(state, "ada")
    with start_fsnotes(workspace, state, "-v") as server:
        raw = Raw(server, token)
        host, port = server.host.rsplit(":", 1)
        socks = []
        for _ in range(9):
            body = json.dumps(raw.request("tools/call", {"name": "notes_read", "arguments": {
                "uri": (workspace / "big.md").as_uri()}})).encode()  # fmt: skip
            sock = socket.create_connection((host, int(port)), timeout=60)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.sendall(request_head(server, token, body, list(raw.modern_headers(
                json.loads(body)).items())) + body)  # fmt: skip
            socks.append(sock)
        deadline = time.monotonic() + 150  # nine 4 MiB reads; minutes on a loaded machine
        while "it will be computed again" not in server.stderr():
            assert time.monotonic() < deadline, "no answer was ever held back"
            time.sleep(0.1)
        for sock in socks:
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(1 << 16)
            head, rest = data.split(b"\r\n\r\n", 1)
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))  # fmt: skip
            while len(rest) < length:
                chunk = sock.recv(1 << 20)
                assert chunk
                rest += chunk
            sock.close()
            answer = json.loads(rest)
            assert answer["result"]["structuredContent"]["content"] == big
        raw.close()
