"""notes_links, notes_tags, where filters and a move that rewrites links, on the wire: the
real `fsnotes serve` (jailed, indexing in the background, watching) over stdio, in both
protocol eras."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.wire import LEGACY, Wire, meta

NOTES = {
    "inbox.md": "# Inbox\n\nSee [[Budget]], [[budget#Q1|the money]] and ![[chart.png]].\n",
    "projects/budget.md": (
        "---\nstatus: Done\ntags: [work/money]\n---\n# Budget\n\n[Back](../inbox.md) #work\n"
    ),
    "projects/plan.md": "---\nstatus: open\n---\n# Plan\n\n[costs](budget.md#top) [[Nowhere]]\n",
    "journal/day.md": "# Day\n\n[the plan](../projects/plan.md) #work/money\n",
}


class Client:
    """One session in one era: ``tool`` returns the whole tools/call result."""

    def __init__(self, w: Wire, era: str) -> None:
        self.w, self.era = w, era
        if era == "legacy":
            w.call(
                "initialize",
                {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "links-wire", "version": "1"},
                },
            )
            w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.era == "modern":
            params = {"_meta": meta(), **params}
        response = self.w.call(method, params, timeout=30.0)
        assert "result" in response, response
        return dict(response["result"])

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def ok(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.tool(name, arguments)
        assert result.get("isError") is not True, result
        return dict(result["structuredContent"])


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture(params=["legacy", "modern"])
def client(request: pytest.FixtureRequest, vault: Path, tmp_path: Path) -> Iterator[Client]:
    w = Wire(vault, tmp_path / "state")
    try:
        yield Client(w, str(request.param))
    finally:
        w.close()


def test_the_new_tools_and_arguments_are_listed_with_their_schemas(client: Client) -> None:
    tools = {t["name"]: t for t in client.request("tools/list", {})["tools"]}
    assert {"notes_links", "notes_tags"} <= set(tools)
    move = tools["notes_move"]["inputSchema"]["properties"]["updateLinks"]
    assert move["default"] is True and move["type"] == "boolean"
    assert "default true" in tools["notes_move"]["description"]
    for name in ("notes_list", "notes_search"):
        where = tools[name]["inputSchema"]["properties"]["where"]
        assert where["anyOf"][0]["type"] == "object"
    assert "shortest path wins" in tools["notes_links"]["description"]
    assert tools["notes_links"]["annotations"]["readOnlyHint"] is True
    assert set(tools["notes_links"]["outputSchema"]["properties"]) >= {"outgoing", "backlinks"}


def test_links_are_resolved_and_backlinks_found(client: Client, vault: Path) -> None:
    got = client.ok("notes_links", {"uri": (vault / "projects/budget.md").as_uri()})
    assert [(b["path"], b["links"]) for b in got["backlinks"]] == [
        ("inbox.md", 2),
        ("projects/plan.md", 1),
    ]
    assert [(o["target"], o["status"], o["path"]) for o in got["outgoing"]] == [
        ("../inbox.md", "note", "inbox.md")
    ]
    inbox = client.ok("notes_links", {"uri": (vault / "inbox.md").as_uri()})
    assert [(o["target"], o["heading"], o["embed"], o["status"]) for o in inbox["outgoing"]] == [
        ("Budget", None, False, "note"),
        ("budget", "Q1", False, "note"),
        ("chart.png", None, True, "other"),
    ]
    assert inbox["index"]["complete"] is True
    missing = client.tool("notes_links", {"uri": (vault / "gone.md").as_uri()})
    assert missing["isError"] is True and "does not exist" in missing["content"][0]["text"]


def test_backlinks_follow_another_programs_edits(client: Client, vault: Path) -> None:
    target = {"uri": (vault / "projects/plan.md").as_uri()}
    assert [b["path"] for b in client.ok("notes_links", target)["backlinks"]] == ["journal/day.md"]
    (vault / "journal/day.md").write_text("# Day\n\nno link now\n")
    (vault / "new.md").write_text("[[plan]]\n")
    deadline = time.monotonic() + 10
    while True:
        found = [b["path"] for b in client.ok("notes_links", target)["backlinks"]]
        if found == ["new.md"] or time.monotonic() > deadline:
            break
        assert "journal/day.md" not in found  # a removed link is never reported
        time.sleep(0.1)
    assert found == ["new.md"]


def test_a_move_rewrites_the_links_and_lists_the_notes(client: Client, vault: Path) -> None:
    moved = client.ok(
        "notes_move", {"uri": (vault / "projects/budget.md").as_uri(), "newPath": "money/costs.md"}
    )
    assert [(u["path"], u["links"]) for u in moved["linksUpdated"]] == [
        ("inbox.md", 2),
        ("projects/plan.md", 1),
    ]
    assert moved["linksNotUpdated"] == []
    assert (vault / "inbox.md").read_text() == (
        "# Inbox\n\nSee [[costs]], [[costs#Q1|the money]] and ![[chart.png]].\n"
    )
    assert "[costs](../money/costs.md#top)" in (vault / "projects/plan.md").read_text()
    assert "[Back](../inbox.md)" in (vault / "money/costs.md").read_text()  # as deep as before
    back = client.ok("notes_links", {"uri": moved["uri"]})
    assert [b["path"] for b in back["backlinks"]] == ["inbox.md", "projects/plan.md"]
    read = client.ok("notes_read", {"uri": moved["uri"]})
    assert read["etag"] == moved["etag"]


def test_a_move_without_update_links_or_refused_changes_no_other_note(
    client: Client, vault: Path
) -> None:
    before = {p: (vault / p).read_bytes() for p in NOTES}
    refused = client.tool(
        "notes_move",
        {"uri": (vault / "projects/budget.md").as_uri(), "newPath": "projects/plan.md"},
    )
    assert refused["isError"] is True and "already exists" in refused["content"][0]["text"]
    assert {p: (vault / p).read_bytes() for p in NOTES} == before
    moved = client.ok(
        "notes_move",
        {
            "uri": (vault / "projects/budget.md").as_uri(),
            "newPath": "money/costs.md",
            "updateLinks": False,
        },
    )
    assert moved["linksUpdated"] == []
    assert (vault / "inbox.md").read_bytes() == before["inbox.md"]


def test_tags_and_where_filters(client: Client, vault: Path) -> None:
    tags = client.ok("notes_tags", {})
    assert [(t["tag"], t["notes"], t["withNested"]) for t in tags["tags"]] == [
        ("work", 1, 2),
        ("work/money", 2, 2),
    ]
    page = client.ok("notes_tags", {"prefix": "work/", "limit": 1})
    assert [t["tag"] for t in page["tags"]] == ["work/money"] and page["nextCursor"] is None
    listed = client.ok("notes_list", {"where": {"status": "DONE"}})
    assert [n["path"] for n in listed["notes"]] == ["projects/budget.md"]
    found = client.ok("notes_search", {"query": "plan", "where": {"status": "open"}})
    assert [r["path"] for r in found["results"]] == ["projects/plan.md"]
    bad = client.tool("notes_list", {"where": {"status": ["a", "b"]}})
    assert bad["isError"] is True and "where" in bad["content"][0]["text"]


# Issue 26: link syntax inside code (an indented block, code spans of two and three
# backticks) is the note's text: not listed as a link, never rewritten by a move.
IN_CODE = {
    "plan.md": "# Plan\n",
    "howto.md": (
        "# Howto\n\ntext\n\n    [[plan]] [p](plan.md)\n\n"
        "``[[plan]]`` and ```[[tripleghost]]``` and ``[[dblghost]]``\n"
    ),
    "uses.md": "# Uses\n\nSee [[plan]].\n",
}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_links_in_code_are_not_links_and_a_move_leaves_them(tmp_path: Path, era: str) -> None:
    root = tmp_path / "notes"
    for rel, text in IN_CODE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    w = Wire(root, tmp_path / "state")
    try:
        client = Client(w, era)
        howto = client.ok("notes_links", {"uri": (root / "howto.md").as_uri()})
        assert howto["outgoing"] == []
        plan = client.ok("notes_links", {"uri": (root / "plan.md").as_uri()})
        assert [b["path"] for b in plan["backlinks"]] == ["uses.md"]
        moved = client.ok(
            "notes_move", {"uri": (root / "plan.md").as_uri(), "newPath": "done/roadmap.md"}
        )
        assert [u["path"] for u in moved["linksUpdated"]] == ["uses.md"]
        assert (root / "howto.md").read_text() == IN_CODE["howto.md"]
        assert (root / "uses.md").read_text() == "# Uses\n\nSee [[roadmap]].\n"
    finally:
        w.close()
