"""The seed flow on the wire, against the real `fsnotes serve` process (2026-07-28 era).

Exact shapes: discovery, tool descriptors, the confirmation round trip with a new id and the
echoed state, containment refusals, capability and version errors, notifications.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from e2e.wire import LEGACY, MODERN, Wire, meta

FORM = {"elicitation": {"form": {}}}


def structured(resp: dict[str, Any]) -> dict[str, Any]:
    result = resp["result"]
    assert result["resultType"] == "complete", result
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"]
    return dict(result["structuredContent"])


def error_text(resp: dict[str, Any]) -> str:
    result = resp["result"]
    assert result["isError"] is True, result
    return str(result["content"][0]["text"])


def test_discovery_declares_tools_and_no_roots(wire: Wire) -> None:
    resp = wire.call("server/discover", {"_meta": meta()})
    result = resp["result"]
    assert MODERN in result["supportedVersions"]
    assert "tools" in result["capabilities"]
    assert "roots" not in result["capabilities"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "fsnotes"
    assert isinstance(result["ttlMs"], int) and result["cacheScope"] in ("public", "private")


def test_tools_list_is_deterministic_with_fixed_descriptors(wire: Wire) -> None:
    first = wire.call("tools/list", {"_meta": meta()})["result"]
    second = wire.call("tools/list", {"_meta": meta()})["result"]
    assert first["tools"] == second["tools"]
    tools = {t["name"]: t for t in first["tools"]}
    assert list(tools) == [
        "workspaces_list",
        "notes_list",
        "notes_read",
        "notes_search",
        "notes_create",
        "notes_update",
        "notes_move",
        "notes_links",
        "notes_tags",
        "notes_delete",
        "notes_history",
        "notes_restore",
        "notes_setup",
    ]
    assert tools["notes_setup"]["annotations"]["destructiveHint"] is False
    assert set(tools["notes_setup"]["inputSchema"]["properties"]) == {"workspaceUri", "access"}
    assert tools["notes_setup"]["inputSchema"]["required"] == ["workspaceUri"]
    for name in (
        "workspaces_list",
        "notes_list",
        "notes_read",
        "notes_search",
        "notes_history",
        "notes_links",
        "notes_tags",
    ):
        assert tools[name]["annotations"]["readOnlyHint"] is True
    for name in ("notes_update", "notes_move", "notes_delete", "notes_restore"):
        assert tools[name]["annotations"]["destructiveHint"] is True
    assert tools["notes_create"]["annotations"]["destructiveHint"] is False
    assert set(tools["notes_update"]["inputSchema"]["properties"]) == {
        "uri",
        "content",
        "edits",
        "etag",
    }
    assert set(tools["notes_delete"]["inputSchema"]["properties"]) == {
        "workspaceUri",
        "title",
        "uri",
    }
    assert set(tools["notes_list"]["inputSchema"]["properties"]) == {
        "workspaceUri",
        "folder",
        "tag",
        "where",
        "cursor",
        "limit",
    }
    for tool in tools.values():
        assert tool["outputSchema"]["type"] == "object"


def test_delete_round_trip_new_id_and_echoed_state(wire: Wire, workspace: Path) -> None:
    args = {"workspaceUri": workspace.as_uri(), "title": "groceries"}
    first = wire.tool("notes_delete", args, FORM)["result"]
    assert first["resultType"] == "input_required"
    assert "ttlMs" not in first and "cacheScope" not in first
    ((key, req),) = first["inputRequests"].items()
    assert req["method"] == "elicitation/create"
    params = req["params"]
    assert params["mode"] == "form"
    schema = params["requestedSchema"]
    ids = [o["const"] for o in schema["properties"]["note_id"]["oneOf"]]
    assert sorted(ids) == ["garden/groceries-list.md", "groceries.md"]
    assert schema["properties"]["confirm"]["type"] == "boolean"
    state = first["requestState"]

    second = wire.tool(
        "notes_delete",
        args,
        FORM,
        inputResponses={
            key: {"action": "accept", "content": {"note_id": "groceries.md", "confirm": True}}
        },
        requestState=state,
    )
    body = structured(second)
    assert body["deleted"] is True and body["path"] == "groceries.md"
    assert not (workspace / "groceries.md").exists()
    assert (workspace / "garden/groceries-list.md").exists()

    replay = wire.tool(
        "notes_delete",
        args,
        FORM,
        inputResponses={
            key: {
                "action": "accept",
                "content": {"note_id": "garden/groceries-list.md", "confirm": True},
            }
        },
        requestState=state,
    )
    assert "already used" in error_text(replay)
    assert (workspace / "garden/groceries-list.md").exists()


def test_changed_title_cannot_reuse_a_confirmation(wire: Wire, workspace: Path) -> None:
    args = {"workspaceUri": workspace.as_uri(), "title": "groceries"}
    first = wire.tool("notes_delete", args, FORM)["result"]
    (key,) = first["inputRequests"]
    other = dict(args, title="plan")
    resp = wire.tool(
        "notes_delete",
        other,
        FORM,
        inputResponses={
            key: {"action": "accept", "content": {"note_id": "groceries.md", "confirm": True}}
        },
        requestState=first["requestState"],
    )
    assert "different request" in error_text(resp)
    assert (workspace / "groceries.md").exists()


def test_decline_keeps_the_note(wire: Wire, workspace: Path) -> None:
    args = {"uri": (workspace / "plan.md").as_uri()}
    first = wire.tool("notes_delete", args, FORM)["result"]
    (key,) = first["inputRequests"]
    resp = wire.tool(
        "notes_delete",
        args,
        FORM,
        inputResponses={key: {"action": "decline"}},
        requestState=first["requestState"],
    )
    body = structured(resp)
    assert body == {
        "deleted": False,
        "outcome": "declined",
        "message": "The person declined; nothing was deleted.",
        "uri": None,
        "path": None,
    }
    assert (workspace / "plan.md").exists()


def test_empty_elicitation_declaration_means_form(wire: Wire, workspace: Path) -> None:
    resp = wire.tool("notes_delete", {"uri": (workspace / "plan.md").as_uri()}, {"elicitation": {}})
    assert resp["result"]["resultType"] == "input_required"


def test_url_only_or_no_elicitation_gets_exact_32021(wire: Wire, workspace: Path) -> None:
    for caps in ({"elicitation": {"url": {}}}, {}, {"roots": {}}):
        resp = wire.tool("notes_delete", {"uri": (workspace / "plan.md").as_uri()}, caps)
        assert resp["error"]["code"] == -32021, resp
        assert resp["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert (workspace / "plan.md").exists()


def test_unsupported_version_gets_exact_32022(wire: Wire) -> None:
    resp = wire.call("tools/list", {"_meta": meta(version="1900-01-01")})
    assert resp["error"]["code"] == -32022
    data = resp["error"]["data"]
    assert data["requested"] == "1900-01-01"
    assert MODERN in data["supported"]
    assert set(data) == {"supported", "requested"}


def test_notification_gets_no_response(wire: Wire) -> None:
    wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 999}})
    wire.send({"jsonrpc": "2.0", "method": "tools/list", "params": {"_meta": meta()}})
    assert wire.read(timeout=1.0) is None
    assert "result" in wire.call("tools/list", {"_meta": meta()})


def test_sibling_prefix_and_encoded_traversal_fail_containment(wire: Wire, workspace: Path) -> None:
    base = workspace.as_uri()
    for uri in (
        base + "-evil/loot.md",
        base + "/../outside.md",
        base + "/%2e%2e/outside.md",
        base + "/%2E%2E/outside.md",
        base + "/..%2foutside.md",
        base + "/%252e%252e/outside.md",
        base + "/sub\\..\\..\\outside.md",
        "file://evil.example" + workspace.as_posix() + "/plan.md",
    ):
        resp = wire.tool("notes_read", {"uri": uri})
        text = error_text(resp)
        assert "SECRET" not in text and "sibling secret" not in text
        assert str(workspace.parent) not in text  # no host path in the refusal
        delete = wire.tool("notes_delete", {"uri": uri}, FORM)
        assert delete["result"].get("isError") is True, (uri, delete)


def test_stale_etag_update_is_a_conflict(wire: Wire, workspace: Path) -> None:
    uri = (workspace / "plan.md").as_uri()
    etag = structured(wire.tool("notes_read", {"uri": uri}))["etag"]
    (workspace / "plan.md").write_text("# Plan\n\nchanged by a person\n")
    resp = wire.tool("notes_update", {"uri": uri, "content": "model's version", "etag": etag})
    assert "changed since you read it" in error_text(resp)
    assert (workspace / "plan.md").read_text() == "# Plan\n\nchanged by a person\n"


def test_edit_matching_twice_writes_nothing(wire: Wire, workspace: Path) -> None:
    uri = (workspace / "plan.md").as_uri()
    resp = wire.tool(
        "notes_update", {"uri": uri, "edits": [{"oldText": "The plan", "newText": "x"}]}
    )
    assert "2 times" in error_text(resp)
    assert (workspace / "plan.md").read_text() == "# Plan\n\nThe plan.\nThe plan again.\n"


def test_bad_arguments_are_actionable_tool_errors(wire: Wire, workspace: Path) -> None:
    resp = wire.tool("notes_update", {"uri": (workspace / "plan.md").as_uri()})
    assert "exactly one of 'content' or 'edits'" in error_text(resp)
    resp = wire.tool("notes_read", {"uri": (workspace / "plan.md").as_uri(), "etga": "x"})
    assert "etga" in error_text(resp)


def test_note_swapped_for_symlink_between_question_and_answer(wire: Wire, workspace: Path) -> None:
    args = {"uri": (workspace / "plan.md").as_uri()}
    first = wire.tool("notes_delete", args, FORM)["result"]
    (key,) = first["inputRequests"]
    os.rename(workspace / "plan.md", workspace.parent / "plan-aside.md")
    os.symlink(workspace.parent / "outside.md", workspace / "plan.md")
    resp = wire.tool(
        "notes_delete",
        args,
        FORM,
        inputResponses={
            key: {"action": "accept", "content": {"note_id": "plan.md", "confirm": True}}
        },
        requestState=first["requestState"],
    )
    error_text(resp)
    assert (workspace.parent / "outside.md").read_text() == "# Outside\nOUTSIDE SECRET\n"
    assert os.path.islink(workspace / "plan.md")


def test_legacy_client_without_elicitation_gets_a_tool_error(
    workspace: Path, tmp_path: Path
) -> None:
    w = Wire(workspace, tmp_path / "state")
    try:
        init = w.call(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        assert init["result"]["protocolVersion"] == LEGACY
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        resp = w.call(
            "tools/call",
            {"name": "notes_delete", "arguments": {"uri": (workspace / "plan.md").as_uri()}},
        )
        assert "cannot ask you for confirmation" in error_text_legacy(resp)
        assert (workspace / "plan.md").exists()
    finally:
        w.close()


def error_text_legacy(resp: dict[str, Any]) -> str:
    assert resp["result"]["isError"] is True
    return str(resp["result"]["content"][0]["text"])


def test_two_server_processes_execute_one_confirmation_once(
    workspace: Path, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    a, b = Wire(workspace, state_dir), Wire(workspace, state_dir)
    try:
        args = {"uri": (workspace / "plan.md").as_uri()}
        first = a.tool("notes_delete", args, FORM)["result"]
        (key,) = first["inputRequests"]
        retry = {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "tools/call",
            "params": {
                "_meta": meta(FORM),
                "name": "notes_delete",
                "arguments": args,
                "inputResponses": {
                    key: {"action": "accept", "content": {"note_id": "plan.md", "confirm": True}}
                },
                "requestState": first["requestState"],
            },
        }
        # the same confirmation to both processes at the same moment
        a.send(retry)
        b.send(retry)
        results = [a.read(20), b.read(20)]
        assert all(r is not None for r in results)
        deleted = [r for r in results if r and not r["result"].get("isError")]
        refused = [r for r in results if r and r["result"].get("isError")]
        assert len(deleted) == 1 and len(refused) == 1, results
        assert not (workspace / "plan.md").exists()
    finally:
        a.close()
        b.close()
