"""A confirmed `notes_delete` over HTTP in both eras, on real `fsnotes serve --http` processes:
2026-07-28 (input_required, then the retry; any instance sharing the state directory can take
the retry, and a replay is refused), 2025-11-25 (a live elicitation on the POST's stream, its
answer POSTed)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from transport.http_support import (
    LEGACY,
    Raw,
    add_token,
    make_workspace,
    request_head,
    start_fsnotes,
)

pytestmark = pytest.mark.timeout(120)

FORM = {"elicitation": {"form": {}}}


def _ask(raw: Raw, args: dict[str, Any]) -> tuple[str, str]:
    first = raw.call("tools/call", {"name": "notes_delete", "arguments": args}, caps=FORM)
    result = first["result"]
    assert result["resultType"] == "input_required"
    ((key, request),) = result["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    ids = [o["const"] for o in request["params"]["requestedSchema"]["properties"]["note_id"][
        "oneOf"]]  # fmt: skip
    assert sorted(ids) == ["garden/groceries-list.md", "groceries.md"]
    return key, result["requestState"]


def _confirm(raw: Raw, args: dict[str, Any], key: str, state: str, note: str) -> dict[str, Any]:
    answer: dict[str, Any] = raw.call(
        "tools/call",
        {"name": "notes_delete", "arguments": args, "requestState": state,
         "inputResponses": {key: {"action": "accept",
                                  "content": {"note_id": note, "confirm": True}}}},
        caps=FORM,
    )  # fmt: skip
    return answer["result"]


def test_modern_delete_is_asked_then_confirmed_and_a_replay_is_refused(tmp_path: Path) -> None:
    workspace, state = make_workspace(tmp_path), tmp_path / "state"
    token = add_token(state, "ada")
    with start_fsnotes(workspace, state) as server:
        raw = Raw(server, token)
        try:
            args = {"workspaceUri": workspace.as_uri(), "title": "groceries"}
            key, request_state = _ask(raw, args)
            assert (workspace / "groceries.md").exists()  # asking deletes nothing
            done = _confirm(raw, args, key, request_state, "groceries.md")
            assert done["structuredContent"]["deleted"] is True
            assert not (workspace / "groceries.md").exists()
            replay = _confirm(raw, args, key, request_state, "garden/groceries-list.md")
            assert replay["isError"] is True and "already used" in replay["content"][0]["text"]
            assert (workspace / "garden/groceries-list.md").exists()
        finally:
            raw.close()


def test_another_instance_sharing_the_state_takes_the_retry_once(tmp_path: Path) -> None:
    workspace, state = make_workspace(tmp_path), tmp_path / "state"
    token = add_token(state, "ada")
    with start_fsnotes(workspace, state) as one, start_fsnotes(workspace, state) as two:
        first, second = Raw(one, token), Raw(two, token)
        try:
            args = {"workspaceUri": workspace.as_uri(), "title": "groceries"}
            key, request_state = _ask(first, args)
            done = _confirm(second, args, key, request_state, "groceries.md")
            assert done["structuredContent"]["deleted"] is True
            again = _confirm(first, args, key, request_state, "groceries.md")
            assert again["isError"] is True
        finally:
            first.close()
            second.close()


def _sse_messages(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in data.split(b"\n") if line.startswith(b"data:")]


def test_legacy_delete_asks_live_on_the_posts_stream_and_the_answer_is_posted(
    tmp_path: Path,
) -> None:
    workspace, state = make_workspace(tmp_path), tmp_path / "state"
    token = add_token(state, "ada")
    with start_fsnotes(workspace, state) as server:
        raw = Raw(server, token)
        try:
            init = raw.post(
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": LEGACY, "capabilities": FORM,
                    "clientInfo": {"name": "t", "version": "1"}}},
                modern=False,
            )  # fmt: skip
            sid = init.headers["mcp-session-id"]
            session = {"mcp-session-id": sid, "mcp-protocol-version": LEGACY}
            raw.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session,
                     modern=False)  # fmt: skip
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 5,
                    "method": "tools/call",
                    "params": {
                        "name": "notes_delete",
                        "arguments": {"workspaceUri": workspace.as_uri(), "title": "groceries"},
                    },
                }
            ).encode()
            host, port = server.host.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30) as sock:
                sock.sendall(request_head(server, token, body, list(session.items())) + body)
                received = b""
                while b"elicitation/create" not in received:
                    received += sock.recv(65536)
                (asked,) = [m for m in _sse_messages(received) if m.get("method")]
                assert (workspace / "groceries.md").exists()
                posted = raw.post(
                    {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept",
                     "content": {"note_id": "groceries.md", "confirm": True}}},
                    session, modern=False,
                )  # fmt: skip
                assert posted.status_code == 202
                while not any(m.get("id") == 5 for m in _sse_messages(received)):
                    chunk = sock.recv(65536)
                    assert chunk, received
                    received += chunk
            (final,) = [m for m in _sse_messages(received) if m.get("id") == 5]
            assert final["result"]["structuredContent"]["deleted"] is True
            assert not (workspace / "groceries.md").exists()
            assert (workspace / "garden/groceries-list.md").exists()
        finally:
            raw.close()
