"""notes_links, notes_tags, where and a link-rewriting move through the official Python SDK
client (`mcp` 2.3) as the host, in both eras."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, stdio_client

from e2e.test_notes_sdk import params

warnings.simplefilter("ignore")

NOTES = {
    "inbox.md": "# Inbox\n\n[[Budget|money]] and [plan](projects/plan.md)\n",
    "projects/budget.md": "---\nstatus: Done\n---\n# Budget\n#work/money\n",
    "projects/plan.md": "---\nstatus: open\n---\n# Plan\n[[Budget#Q1]] #work\n",
}


async def _session(workspace: Path, state: Path, era: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with stdio_client(params(workspace, state)) as (r, w), ClientSession(r, w) as s:
        if era == "modern":
            await s.discover()
        else:
            await s.initialize()
        tools = {t.name: t for t in (await s.list_tools()).tools}
        out["tools"] = sorted(tools)
        budget = (workspace / "projects/budget.md").as_uri()
        out["links"] = (await s.call_tool("notes_links", {"uri": budget})).structured_content
        out["tags"] = (await s.call_tool("notes_tags", {"prefix": "work"})).structured_content
        out["where"] = (
            await s.call_tool("notes_list", {"where": {"status": "done"}})
        ).structured_content
        out["search"] = (
            await s.call_tool("notes_search", {"query": "plan", "where": {"status": "open"}})
        ).structured_content
        moved = await s.call_tool("notes_move", {"uri": budget, "newPath": "money/costs.md"})
        out["moved"] = moved.structured_content
        out["moved_error"] = moved.is_error
        out["after"] = (
            await s.call_tool("notes_links", {"uri": (workspace / "money/costs.md").as_uri()})
        ).structured_content
    return out


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_links_tags_where_and_a_relinking_move_through_the_sdk(tmp_path: Path, era: str) -> None:
    workspace = tmp_path / "notes"
    for rel, text in NOTES.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    out = anyio.run(_session, workspace, tmp_path / "state", era)
    assert {"notes_links", "notes_tags"} <= set(out["tools"])
    assert [(b["path"], b["links"]) for b in out["links"]["backlinks"]] == [
        ("inbox.md", 1),
        ("projects/plan.md", 1),
    ]
    assert [(t["tag"], t["notes"], t["withNested"]) for t in out["tags"]["tags"]] == [
        ("work", 1, 2),
        ("work/money", 1, 1),
    ]
    assert [n["path"] for n in out["where"]["notes"]] == ["projects/budget.md"]
    assert [h["path"] for h in out["search"]["results"]] == ["projects/plan.md"]
    assert out["moved_error"] is False
    assert [u["path"] for u in out["moved"]["linksUpdated"]] == ["inbox.md", "projects/plan.md"]
    assert (workspace / "inbox.md").read_text() == (
        "# Inbox\n\n[[costs|money]] and [plan](projects/plan.md)\n"
    )
    assert (workspace / "projects/plan.md").read_text().endswith("[[costs#Q1]] #work\n")
    assert [b["path"] for b in out["after"]["backlinks"]] == ["inbox.md", "projects/plan.md"]
