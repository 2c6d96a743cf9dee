"""The notes server driven by the official Python SDK client (`mcp` 2.3), in both eras."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client import ClientRequestContext

warnings.simplefilter("ignore")  # roots are deprecated at 2026-07-28; we still test them


def params(workspace: Path, state: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "fsnotes",
            "serve",
            "--workspace",
            str(workspace),
            "--state-dir",
            str(state),
            *extra,
        ],
        env={"PYTHONUNBUFFERED": "1"},
    )


def make_elicit(choice: dict[str, Any], seen: list[types.ElicitRequestParams]) -> Any:
    async def on_elicit(
        ctx: ClientRequestContext, p: types.ElicitRequestParams
    ) -> types.ElicitResult:
        seen.append(p)
        return types.ElicitResult(**choice)

    return on_elicit


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def _session_delete(
    workspace: Path, state: Path, era: str, choice: dict[str, Any]
) -> tuple[types.CallToolResult, list[Any]]:
    seen: list[Any] = []
    elicit = make_elicit(choice, seen)
    async with (
        stdio_client(params(workspace, state)) as (r, w),
        ClientSession(r, w, elicitation_callback=elicit) as s,
    ):
        if era == "modern":
            await s.discover()
        else:
            await s.initialize()
        args = {"workspaceUri": workspace.as_uri(), "title": "groceries"}
        if era == "legacy":
            return await s.call_tool("notes_delete", args), seen
        result = await s.call_tool("notes_delete", args, allow_input_required=True)
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
                "notes_delete",
                args,
                input_responses=responses,
                request_state=result.request_state,
                allow_input_required=True,
            )
        return result, seen


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_delete_confirmed_through_the_sdk(workspace: Path, tmp_path: Path, era: str) -> None:
    choice = {"action": "accept", "content": {"note_id": "groceries.md", "confirm": True}}
    result, seen = anyio.run(_session_delete, workspace, tmp_path / "state", era, choice)
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result))["deleted"] is True
    assert result.structured_content and result.structured_content["path"] == "groceries.md"
    assert len(seen) == 1 and isinstance(seen[0], types.ElicitRequestFormParams)
    assert not (workspace / "groceries.md").exists()
    assert (workspace / "garden/groceries-list.md").exists()


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_decline_through_the_sdk_keeps_everything(
    workspace: Path, tmp_path: Path, era: str
) -> None:
    result, seen = anyio.run(
        _session_delete, workspace, tmp_path / "state", era, {"action": "decline"}
    )
    assert not result.is_error and len(seen) == 1
    assert result.structured_content and result.structured_content["outcome"] == "declined"
    assert (workspace / "groceries.md").exists()


async def _auto(workspace: Path, state: Path) -> dict[str, Any]:
    seen: list[Any] = []
    choice = {"action": "accept", "content": {"note_id": "plan.md", "confirm": True}}
    out: dict[str, Any] = {}
    async with Client(
        params(workspace, state), mode="auto", elicitation_callback=make_elicit(choice, seen)
    ) as client:
        out["version"] = client.protocol_version
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        created = await client.call_tool(
            "notes_create", {"path": "new/idea.md", "content": "# Idea\n#x\n"}
        )
        out["created"] = created.structured_content
        read = await client.call_tool("notes_read", {"uri": created.structured_content["uri"]})
        out["read"] = read.structured_content
        found = await client.call_tool("notes_search", {"query": "plan"})
        out["search"] = found.structured_content
        deleted = await client.call_tool("notes_delete", {"uri": (workspace / "plan.md").as_uri()})
        out["deleted"] = deleted.structured_content
        resources = await client.list_resources()
        out["resources"] = [r.uri for r in resources.resources]
        templates = await client.list_resource_templates()
        out["templates"] = [t.uri_template for t in templates.resource_templates]
        contents = await client.read_resource(created.structured_content["uri"])
        out["contents"] = contents.contents
        completion = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri=out["templates"][0]),
            {"name": "path", "value": "gar"},
        )
        out["completion"] = completion.completion.values
        out["seen"] = seen
    return out


def test_sdk_client_auto_mode_uses_the_modern_era_for_everything(
    workspace: Path, tmp_path: Path
) -> None:
    out = anyio.run(_auto, workspace, tmp_path / "state")
    assert out["version"] == "2026-07-28"
    assert "notes_delete" in out["tools"]
    assert out["created"]["path"] == "new/idea.md"
    assert out["read"]["content"] == "# Idea\n#x\n" and out["read"]["tags"] == ["x"]
    assert out["search"]["results"][0]["path"] == "plan.md"
    assert out["deleted"]["deleted"] is True and not (workspace / "plan.md").exists()
    assert (workspace / "new/idea.md").as_uri() in out["resources"]
    assert out["templates"] == [workspace.as_uri() + "/{+path}"]
    assert out["contents"][0].text == "# Idea\n#x\n"
    assert out["completion"] == ["garden/groceries-list.md"]
    assert len(out["seen"]) == 1


async def _legacy_roots(
    workspace: Path, state: Path, other: Path, roots: list[str]
) -> tuple[str, str]:
    async def on_roots(ctx: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=u, name="r") for u in roots])

    async with (
        stdio_client(params(workspace, state, "--workspace", str(other))) as (r, w),
        ClientSession(r, w, list_roots_callback=on_roots) as s,
    ):
        await s.initialize()
        await anyio.sleep(0.5)  # the server asks roots/list after notifications/initialized
        listed = await s.call_tool("notes_list", {})
        return text_of(listed), str(listed.is_error)


def test_legacy_roots_pick_a_default_but_never_add_a_workspace(
    workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.md").write_text("# Other\n")
    # two granted workspaces: without a hint, workspaceUri is required
    text, is_error = anyio.run(_legacy_roots, workspace, tmp_path / "s1", other, [])
    assert is_error == "True" and "several workspaces" in text
    # a root inside one granted workspace selects it
    text, is_error = anyio.run(_legacy_roots, workspace, tmp_path / "s2", other, [other.as_uri()])
    assert is_error == "False" and "o.md" in text
    # a root outside every grant adds nothing and selects nothing
    text, is_error = anyio.run(
        _legacy_roots, workspace, tmp_path / "s3", other, [(tmp_path / "notes-evil").as_uri()]
    )
    assert is_error == "True" and "loot" not in text
