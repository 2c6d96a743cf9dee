"""The notes prompts on the wire, from the real server process, in both eras: listed, got,
their arguments completed, errors as -32602, and nothing written by any of them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from e2e.eras import EraWire


@pytest.fixture(params=["legacy", "modern"])
def era_wire(request: pytest.FixtureRequest, workspace: Path, tmp_path: Path) -> Iterator[EraWire]:
    (workspace / "garden" / "shed.md").write_text(
        "# Shed\n\nSee [[groceries-list]] and [[plan]]. #diy\n"
    )
    w = EraWire(workspace, tmp_path / "state", request.param)
    yield w
    w.close()


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _complete(w: EraWire, prompt: str, argument: str, value: str, **context: str) -> Any:
    params: dict[str, Any] = {
        "ref": {"type": "ref/prompt", "name": prompt},
        "argument": {"name": argument, "value": value},
    }
    if context:
        params["context"] = {"arguments": context}
    return w.result("completion/complete", params)["completion"]


def test_prompts_are_advertised_listed_and_got(era_wire: EraWire, workspace: Path) -> None:
    assert "prompts" in era_wire.capabilities and era_wire.capabilities["completions"] == {}
    listed = era_wire.result("prompts/list")
    assert [p["name"] for p in listed["prompts"]] == [
        "daily_note",
        "summarise_folder",
        "related_notes",
    ]
    if era_wire.era == "modern":
        assert listed["cacheScope"] == "public" and listed["ttlMs"] > 0
    before = _files(workspace)
    daily = era_wire.result(
        "prompts/get", {"name": "daily_note", "arguments": {"date": "2026-12-24"}}
    )
    text = daily["messages"][0]["content"]["text"]
    assert daily["messages"][0]["role"] == "user"
    assert "Create the daily note for Thursday 2026-12-24" in text
    assert "path 'journal/2026-12-24.md'" in text and "# 2026-12-24" in text
    summary = era_wire.result(
        "prompts/get", {"name": "summarise_folder", "arguments": {"folder": "garden"}}
    )
    resources = [m["content"]["resource"] for m in summary["messages"][1:]]
    assert [r["uri"] for r in resources] == [
        (workspace / "garden/groceries-list.md").as_uri(),
        (workspace / "garden/shed.md").as_uri(),
    ]
    assert resources[0]["text"] == (workspace / "garden/groceries-list.md").read_text()
    uri = (workspace / "garden/shed.md").as_uri()
    related = era_wire.result("prompts/get", {"name": "related_notes", "arguments": {"uri": uri}})
    text = related["messages"][0]["content"]["text"]
    assert "- Garden groceries (garden/groceries-list.md): it links there" in text
    assert "- Plan (plan.md): it links there" in text
    assert _files(workspace) == before  # prompts compose text; they never write


def test_prompt_arguments_are_completed(era_wire: EraWire, workspace: Path) -> None:
    today = date.today().isoformat()
    days = _complete(era_wire, "daily_note", "date", "")
    assert days["values"][0] == today and days["hasMore"] is False
    assert _complete(era_wire, "summarise_folder", "folder", "g")["values"] == ["garden"]
    notes = _complete(era_wire, "related_notes", "uri", (workspace / "gro").as_uri())
    assert notes["values"] == [(workspace / "groceries.md").as_uri()]
    assert _complete(era_wire, "daily_note", "workspaceUri", "file:///")["values"] == [
        workspace.as_uri()
    ]


def test_bad_prompt_requests_are_invalid_params(era_wire: EraWire, workspace: Path) -> None:
    for params, message in [
        ({"name": "nope"}, "Unknown prompt 'nope'"),
        ({"name": "related_notes"}, "needs the argument 'uri'"),
        ({"name": "daily_note", "arguments": {"date": "soon"}}, "is not a date"),
        (
            {
                "name": "related_notes",
                "arguments": {"uri": (workspace.parent / "outside.md").as_uri()},
            },
            "not inside a workspace granted to you",
        ),
    ]:
        error = era_wire.error("prompts/get", params)
        assert error["code"] == -32602, params
        assert message in error["message"]
        assert str(workspace.parent) not in error["message"]
    bad = era_wire.error(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}},
    )
    assert bad["code"] == -32602


# Links whose meaning the prompt once decided with its own resolver, unlike notes_links.
LINKING = {
    "hub/hub.md": (
        "# Hub\n\n[[sub/deep#Part|the deep one]] (a folder and name: a suffix of its path), "
        "[[near]] (two notes of that name: the shortest path wins), [[./sib]] (relative), "
        "[the other](../other) (a path without its extension), ![[pic.png]] (an attachment, "
        "not a broken note link), [[Ghost]] and [gone](gone.md) (broken).\n\n"
        "```\n[[fenced]]\n```\n"
    ),
    "hub/near.md": "# Hub near\n",
    "hub/sib.md": "# Sib\n",
    "near.md": "# Near\n",
    "other.md": "# Other\n",
    "x/sub/deep.md": "# Deep\n\n![[Hub]]\n",
    "fenced.md": "# Fenced\n",
}


def _lines(text: str) -> dict[str, str]:
    """path -> reasons, from the prompt's candidate lines."""
    out = {}
    for line in text.splitlines():
        if line.startswith("- "):
            path, reasons = line.split(" (", 1)[1].split("): ", 1)
            out[path] = reasons.rsplit(": file://", 1)[0]
    return out


def test_related_notes_resolves_links_as_notes_links_does(workspace: Path, tmp_path: Path) -> None:
    for rel, text in LINKING.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    w = EraWire(workspace, tmp_path / "state", "modern")
    try:
        for rel in ("hub/hub.md", "near.md"):
            uri = (workspace / rel).as_uri()
            got = w.result("prompts/get", {"name": "related_notes", "arguments": {"uri": uri}})
            text = got["messages"][0]["content"]["text"]
            links = w.tool("notes_links", {"uri": uri})["structuredContent"]
            reasons = _lines(text)
            to = {p for p, r in reasons.items() if "it links there" in r.split("; ")}
            back = {p for p, r in reasons.items() if "links here" in r.split("; ")}
            assert to == {o["path"] for o in links["outgoing"] if o["status"] == "note"} - {rel}
            assert back == {b["path"] for b in links["backlinks"]} - {rel}
            broken = list(
                dict.fromkeys(  # one per target, whatever its headings
                    f"[[{o['target']}]]" if o["type"] == "wikilink" else f"({o['target']})"
                    for o in links["outgoing"]
                    if o["status"] in ("broken", "outside")
                )
            )
            if broken:
                assert f"Its links that lead to no note: {', '.join(broken)}" in text
            else:
                assert "lead to no note" not in text
            if rel == "hub/hub.md":
                assert to == {"x/sub/deep.md", "near.md", "hub/sib.md", "other.md"}
                assert back == {"x/sub/deep.md"}
                assert broken == ["[[Ghost]]", "(gone.md)"]
            else:
                assert back == {"hub/hub.md"} and to == set()
    finally:
        w.close()


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_folder_completion_offers_only_folders_holding_notes(
    workspace: Path, tmp_path: Path, era: str
) -> None:
    # Issue 26: 'media' and 'projects/img' hold only attachments; summarising them fails.
    for rel in ("media/pic.png", "projects/img/chart.png"):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_bytes(b"\x89PNG\r\n")
    (workspace / "projects" / "roadmap.md").write_text("# Roadmap\n\n![chart](img/chart.png)\n")
    w = EraWire(workspace, tmp_path / "state", era)
    try:
        offered = _complete(w, "summarise_folder", "folder", "")["values"]
        assert offered == ["garden", "projects"]
        for folder in offered:
            got = w.result(
                "prompts/get", {"name": "summarise_folder", "arguments": {"folder": folder}}
            )
            assert got["messages"]
        error = w.error(
            "prompts/get", {"name": "summarise_folder", "arguments": {"folder": "media"}}
        )
        assert error["code"] == -32602 and "no notes in folder 'media'" in error["message"]
    finally:
        w.close()
