"""notes_history and notes_restore through the official Python SDK client (`mcp` 2.3), in
both eras: an update undone, a confirmed delete restored at its old uri."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, stdio_client
from mcp.client import ClientRequestContext

from e2e.test_notes_sdk import make_elicit, params, text_of


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def _call(s: ClientSession, era: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tool call to its end (a 2026-07-28 input_required is answered through the SDK)."""
    if era == "legacy":
        result = await s.call_tool(name, args)
    else:
        result = await s.call_tool(name, args, allow_input_required=True)
        rounds = 0
        while isinstance(result, types.InputRequiredResult):
            rounds += 1
            assert rounds < 5
            responses = {
                k: await s.dispatch_input_request(
                    ClientRequestContext(session=s, request_id=k), req
                )
                for k, req in (result.input_requests or {}).items()
            }
            result = await s.call_tool(
                name,
                args,
                input_responses=responses,
                request_state=result.request_state,
                allow_input_required=True,
            )
    assert isinstance(result, types.CallToolResult)
    assert not result.is_error, text_of(result)
    assert result.structured_content == json.loads(text_of(result))
    return dict(result.structured_content)


async def _session(workspace: Path, state: Path, era: str) -> dict[str, Any]:
    plan = (workspace / "plan.md").as_uri()
    seen: list[Any] = []
    choice = {"action": "accept", "content": {"note_id": "plan.md", "confirm": True}}
    out: dict[str, Any] = {}
    async with (
        stdio_client(params(workspace, state)) as (r, w),
        ClientSession(r, w, elicitation_callback=make_elicit(choice, seen)) as s,
    ):
        if era == "modern":
            await s.discover()
        else:
            await s.initialize()
        tools = {t.name: t for t in (await s.list_tools()).tools}
        out["tools"] = tools
        await _call(s, era, "notes_update", {"uri": plan, "content": "# Plan\n\nNone.\n"})
        out["after_update"] = await _call(s, era, "notes_history", {"uri": plan})
        version = out["after_update"]["versions"][0]["version"]
        etag = out["after_update"]["currentEtag"]
        out["restored"] = await _call(
            s, era, "notes_restore", {"uri": plan, "version": version, "etag": etag}
        )
        out["deleted"] = await _call(s, era, "notes_delete", {"uri": plan})
        out["after_delete"] = await _call(s, era, "notes_history", {"uri": plan})
        newest = out["after_delete"]["versions"][0]["version"]
        out["recreated"] = await _call(s, era, "notes_restore", {"uri": plan, "version": newest})
    out["seen"] = seen
    return out


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_history_and_restore_through_the_sdk(workspace: Path, tmp_path: Path, era: str) -> None:
    original = (workspace / "plan.md").read_text()
    out = anyio.run(_session, workspace, tmp_path / "state", era)
    tools = out["tools"]
    assert tools["notes_history"].annotations.read_only_hint is True
    assert tools["notes_restore"].annotations.destructive_hint is True
    assert set(tools["notes_restore"].input_schema["properties"]) == {"uri", "version", "etag"}
    (kept,) = out["after_update"]["versions"]
    assert (kept["etag"], kept["tool"], kept["size"]) == (
        sha(original),
        "notes_update",
        len(original.encode()),
    )
    assert out["restored"]["etag"] == sha(original) and out["restored"]["created"] is False
    assert out["restored"]["keptVersion"] is not None  # the restore itself can be undone
    assert out["deleted"]["deleted"] is True and len(out["seen"]) == 1
    tools_seen = [v["tool"] for v in out["after_delete"]["versions"]]
    assert tools_seen == ["notes_delete", "notes_restore", "notes_update"]
    assert out["after_delete"]["exists"] is False
    assert out["recreated"]["created"] is True
    assert (workspace / "plan.md").read_text() == original
