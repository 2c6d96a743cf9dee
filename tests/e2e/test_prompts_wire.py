"""The notes prompts on the wire, from the real server process, in both eras: listed, got,
their arguments completed, errors as -32602, and nothing written by any of them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from .eras import EraWire


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
