"""Edits by heading and frontmatter key, the prompts with completion, and attachments,
driven through the official Python SDK client (`mcp` 2.3) against the real server, in
both eras."""

from __future__ import annotations

import base64
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, MCPError, stdio_client

from e2e.test_notes_sdk import params, text_of
from fsnotes.notes.index.attachments import MAX_ATTACHMENT_BYTES

warnings.simplefilter("ignore")

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
SHED = "---\ntitle: Shed\nstatus: planning\n---\n# Shed\n\n## Materials\n\n- wood\n\n## Log\n"


def _prepare(workspace: Path) -> None:
    (workspace / "shed.md").write_text(SHED)
    (workspace / "media").mkdir()
    (workspace / "media" / "shed.png").write_bytes(PNG)
    (workspace / "media" / "manual.pdf").write_bytes(b"%" * (MAX_ATTACHMENT_BYTES + 1))


async def _session(workspace: Path, state: Path, era: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with stdio_client(params(workspace, state)) as (r, w), ClientSession(r, w) as s:
        if era == "modern":
            await s.discover()
        else:
            await s.initialize()
        uri = (workspace / "shed.md").as_uri()
        read = await s.call_tool("notes_read", {"uri": uri})
        assert read.structured_content is not None
        out["update"] = await s.call_tool(
            "notes_update",
            {
                "uri": uri,
                "etag": read.structured_content["etag"],
                "edits": [
                    {"heading": "Shed > Materials", "op": "append", "text": "- nails"},
                    {"heading": "Log", "op": "prepend", "text": "- 2026-12-03: started"},
                    {"heading": "Materials", "op": "replace", "text": "- steel\n- nails"},
                    {"frontmatterKey": "status", "op": "set", "value": "building"},
                    {"frontmatterKey": "tags", "op": "set", "value": ["diy", "2026"]},
                    {"frontmatterKey": "title", "op": "remove"},
                ],
            },
        )
        out["ambiguous"] = await s.call_tool(
            "notes_update",
            {"uri": uri, "edits": [{"heading": "Nowhere", "op": "append", "text": "x"}]},
        )
        out["prompts"] = await s.list_prompts()
        out["daily"] = await s.get_prompt("daily_note", {"date": "2026-12-03"})
        out["related"] = await s.get_prompt("related_notes", {"uri": uri})
        out["date_completion"] = await s.complete(
            types.PromptReference(type="ref/prompt", name="daily_note"),
            {"name": "date", "value": "20"},
        )
        out["folder_completion"] = await s.complete(
            types.PromptReference(type="ref/prompt", name="summarise_folder"),
            {"name": "folder", "value": "gar"},
            {"workspaceUri": workspace.as_uri()},
        )
        resources: list[types.Resource] = []
        cursor: str | None = None
        while True:
            page = await s.list_resources(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            resources.extend(page.resources)
            cursor = page.next_cursor
            if not cursor:
                break
        out["resources"] = resources
        out["blob"] = await s.read_resource((workspace / "media" / "shed.png").as_uri())
        try:
            await s.read_resource((workspace / "media" / "manual.pdf").as_uri())
            out["over_cap"] = "read"
        except MCPError as exc:
            out["over_cap"] = exc
    return out


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_edits_prompts_and_attachments_through_the_sdk(
    workspace: Path, tmp_path: Path, era: str
) -> None:
    _prepare(workspace)
    out = anyio.run(_session, workspace, tmp_path / "state", era)

    update = out["update"]
    assert not update.is_error, text_of(update)
    assert (workspace / "shed.md").read_text() == (
        "---\nstatus: building\ntags: [diy, '2026']\n---\n# Shed\n\n## Materials\n\n"
        "- steel\n- nails\n\n## Log\n- 2026-12-03: started\n"
    )
    assert out["ambiguous"].is_error
    assert "No heading matches 'Nowhere'" in text_of(out["ambiguous"])
    assert "'Shed > Materials' (line 7)" in text_of(out["ambiguous"])

    names = [p.name for p in out["prompts"].prompts]
    assert names == ["daily_note", "summarise_folder", "related_notes"]
    daily = out["daily"].messages[0].content
    assert isinstance(daily, types.TextContent)
    assert "Create the daily note for Thursday 2026-12-03" in daily.text
    related = out["related"]
    assert isinstance(related.messages[-1].content, types.EmbeddedResource)
    assert str(related.messages[-1].content.resource.uri) == (workspace / "shed.md").as_uri()
    assert out["date_completion"].completion.values[0].startswith("20")
    assert out["folder_completion"].completion.values == ["garden"]

    by_name = {r.name: r for r in out["resources"]}
    assert by_name["media/shed.png"].mime_type == "image/png"
    assert by_name["media/manual.pdf"].mime_type == "application/pdf"
    assert by_name["media/manual.pdf"].size == MAX_ATTACHMENT_BYTES + 1
    assert by_name["shed.md"].mime_type == "text/markdown"
    (content,) = out["blob"].contents
    assert isinstance(content, types.BlobResourceContents)
    assert content.mime_type == "image/png" and base64.b64decode(content.blob) == PNG

    over = out["over_cap"]
    assert isinstance(over, MCPError), over
    assert over.code == -32602
    assert "larger than 4,194,304 bytes (4 MiB)" in over.message
    assert over.data == {"uri": (workspace / "media" / "manual.pdf").as_uri(), "maxBytes": 4194304}
