"""The notes prompts on real files: what they compose, that they write nothing, that they
act for the request's principal, and the completion of their arguments."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import anyio
import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.notes.tools.prompts import MAX_EMBEDDED_CHARS, NotesPrompts
from fsnotes.protocol.registry import InternalError, InvalidParams, RequestContext

TODAY = date(2026, 12, 3)  # a Thursday


def ctx(principal: str = "ada") -> RequestContext:
    return RequestContext(
        era="modern",
        protocol_version="2026-07-28",
        method="prompts/get",
        principal=principal,
        client_capabilities={},
        client_info=None,
    )


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def get(prompts: NotesPrompts, name: str, who: str = "ada", **arguments: str) -> dict[str, Any]:
    result: dict[str, Any] = anyio.run(prompts.get_prompt, ctx(who), name, arguments)
    return result


def texts(result: dict[str, Any]) -> list[str]:
    return [m["content"]["text"] for m in result["messages"] if m["content"]["type"] == "text"]


def embedded(result: dict[str, Any]) -> dict[str, str]:
    return {
        m["content"]["resource"]["uri"]: m["content"]["resource"]["text"]
        for m in result["messages"]
        if m["content"]["type"] == "resource"
    }


@pytest.fixture
def prompts(server: Server) -> NotesPrompts:
    return NotesPrompts(server.service, server.config.daily, today=lambda: TODAY)


def test_the_prompts_and_their_arguments_are_listed(prompts: NotesPrompts) -> None:
    listed, cursor = anyio.run(prompts.list_prompts, ctx(), None)
    assert cursor is None
    assert {p["name"]: [a["name"] for a in p["arguments"]] for p in listed} == {
        "daily_note": ["date", "workspaceUri"],
        "summarise_folder": ["folder", "workspaceUri"],
        "related_notes": ["uri"],
    }
    assert all("Writes nothing" in p["description"] for p in listed)
    with pytest.raises(InvalidParams):
        anyio.run(prompts.list_prompts, ctx(), "page2")


def test_daily_note_from_the_built_in_template_writes_nothing(
    prompts: NotesPrompts, vault: Path
) -> None:
    before = snapshot(vault)
    result = get(prompts, "daily_note")
    (text,) = texts(result)
    assert "Create the daily note for Thursday 2026-12-03" in text
    assert f"workspaceUri {vault.as_uri()}, path 'journal/2026-12-03.md'" in text
    assert "# 2026-12-03\n\nThursday. Yesterday: [[2026-12-02]]\n\n## Plan" in text
    assert result["description"] == "Daily note for 2026-12-03"
    assert get(prompts, "daily_note", date="tomorrow")["description"].endswith("2026-12-04")
    assert snapshot(vault) == before


def test_an_existing_daily_note_is_shown_not_created_again(
    prompts: NotesPrompts, vault: Path
) -> None:
    result = get(prompts, "daily_note", date="2026-11-28")
    (text,) = texts(result)
    assert "already exists: 'journal/2026-11-28.md'" in text and "notes_update" in text
    assert embedded(result) == {
        (vault / "journal/2026-11-28.md").as_uri(): (vault / "journal/2026-11-28.md").read_text()
    }


def _configured(vault: Path, tmp_path: Path, prompts_toml: str, access: str) -> Server:
    config = tmp_path / "fsnotes.toml"
    config.write_text(
        f'principal = "ada"\n[[workspace]]\nname = "notes"\npath = "{vault}"\n'
        f'[[grant]]\nprincipal = "ada"\nworkspace = "notes"\naccess = "{access}"\n{prompts_toml}'
    )
    cfg = load(config_file=str(config), state_dir=str(tmp_path / "state2"), env={})
    return build(cfg)


@pytest.fixture
def templated(vault: Path, tmp_path: Path, resolver: str) -> Iterator[Server]:
    (vault / "templates").mkdir()
    (vault / "templates/day.md").write_text(
        "---\ntags: [daily]\n---\n# {{title}} ({{weekday}})\n\n[[{{yesterday}}]] | "
        "[[{{tomorrow}}]] {{time}} {{date:YYYY}}\n"
    )
    srv = _configured(
        vault,
        tmp_path,
        '[prompts]\ndaily_template = "templates/day.md"\ndaily_path = "days/{date}.md"\n',
        "write",
    )
    yield srv
    srv.close()


def test_daily_note_from_the_configured_template_and_path(templated: Server, vault: Path) -> None:
    prompts = NotesPrompts(templated.service, templated.config.daily, today=lambda: TODAY)
    (text,) = texts(get(prompts, "daily_note", date="2026-12-31"))
    assert "path 'days/2026-12-31.md'" in text
    assert text.endswith(
        "---\ntags: [daily]\n---\n# 2026-12-31 (Thursday)\n\n[[2026-12-30]] | [[2027-01-01]] "
        "{{time}} {{date:YYYY}}\n"
    )
    (vault / "templates/day.md").unlink()
    with pytest.raises(InternalError, match=r"template 'templates/day.md' \(\[prompts\]"):
        get(prompts, "daily_note")


def test_a_reader_is_told_to_show_the_daily_note_not_create_it(
    vault: Path, tmp_path: Path, resolver: str
) -> None:
    srv = _configured(vault, tmp_path, "", "read")
    try:
        prompts = NotesPrompts(srv.service, srv.config.daily, today=lambda: TODAY)
        (text,) = texts(get(prompts, "daily_note"))
        assert "you may only read that workspace" in text and "notes_create" not in text
    finally:
        srv.close()


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("nope", {}, "Unknown prompt 'nope'"),
        ("daily_note", {"date": "12/03/2026"}, "is not a date"),
        ("daily_note", {"date": "2026-02-30"}, "is not a date"),
        ("daily_note", {"when": "today"}, "takes no argument 'when'"),
        ("daily_note", {"workspaceUri": "file:///elsewhere"}, "granted to you"),
        ("related_notes", {}, "needs the argument 'uri'"),
        ("related_notes", {"uri": "file:///etc/passwd"}, "granted to you"),
        ("summarise_folder", {"folder": "nowhere"}, "no notes in folder 'nowhere'"),
        ("summarise_folder", {"folder": ".obsidian"}, "hidden"),
        ("summarise_folder", {"folder": "../outside"}, "leaves the workspace"),
    ],
)
def test_bad_arguments_are_invalid_params_that_say_why(
    prompts: NotesPrompts, vault: Path, name: str, arguments: dict[str, str], message: str
) -> None:
    before = snapshot(vault)
    with pytest.raises(InvalidParams) as err:
        anyio.run(prompts.get_prompt, ctx(), name, arguments)
    assert message in str(err.value)
    assert str(vault.parent) not in str(err.value).replace(str(vault), "")
    assert snapshot(vault) == before


def test_another_principal_gets_nothing(prompts: NotesPrompts, vault: Path) -> None:
    for name, arguments in [
        ("daily_note", {}),
        ("summarise_folder", {}),
        ("related_notes", {"uri": (vault / "inbox.md").as_uri()}),
    ]:
        with pytest.raises(InvalidParams, match="granted to you"):
            anyio.run(prompts.get_prompt, ctx("mallory"), name, arguments)


def test_summarise_folder_embeds_its_notes(prompts: NotesPrompts, vault: Path) -> None:
    before = snapshot(vault)
    result = get(prompts, "summarise_folder", folder="projects")
    (text,) = texts(result)
    assert "Summarise the notes in folder 'projects' of workspace 'notes'" in text
    assert embedded(result) == {
        (vault / "projects/budget.md").as_uri(): (vault / "projects/budget.md").read_text(),
        (vault / "projects/plan.md").as_uri(): (vault / "projects/plan.md").read_text(),
    }
    whole = get(prompts, "summarise_folder")
    assert len(embedded(whole)) == 5 and "the whole workspace" in texts(whole)[0]
    assert snapshot(vault) == before


def test_summarise_folder_names_what_does_not_fit(prompts: NotesPrompts, vault: Path) -> None:
    (vault / "big").mkdir()
    for i in range(3):
        (vault / "big" / f"n{i}.md").write_text(f"# Big {i}\n" + "x" * (MAX_EMBEDDED_CHARS // 2))
    result = get(prompts, "summarise_folder", folder="big")
    assert list(embedded(result)) == [(vault / "big/n0.md").as_uri()]
    (text,) = texts(result)
    assert "These did not fit" in text
    assert f"- Big 1 (big/n1.md): {(vault / 'big/n1.md').as_uri()}" in text
    assert f"- Big 2 (big/n2.md): {(vault / 'big/n2.md').as_uri()}" in text


def test_related_notes_from_links_backlinks_tags_and_title(
    prompts: NotesPrompts, vault: Path
) -> None:
    (vault / "projects/plan.md").write_text(
        "---\ntitle: Project plan\ntags: [work]\n---\n# Plan\n\n"
        "See [[Budget]], [[Nowhere]], [the inbox](../inbox.md), [gone](../gone.md) and "
        "![a picture](../image.png).\n"
    )
    (vault / "journal/review.md").write_text("# Review\n\nAbout [the plan](../projects/plan.md).\n")
    (vault / "ideas.md").write_text("# Ideas\n\nA project plan for later, [[plan]].\n")
    before = snapshot(vault)
    uri = (vault / "projects/plan.md").as_uri()
    result = get(prompts, "related_notes", uri=uri)
    (text,) = texts(result)
    assert "Find the notes related to 'Project plan' (projects/plan.md" in text
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert lines == [
        # (its path holds "projects", its text "plan": it matches the title too)
        f"- Budget (projects/budget.md): it links there; shares #work; matches its title: "
        f"{(vault / 'projects/budget.md').as_uri()}",
        f"- Inbox (inbox.md): it links there: {(vault / 'inbox.md').as_uri()}",
        f"- Ideas (ideas.md): links here; matches its title: {(vault / 'ideas.md').as_uri()}",
        f"- Review (journal/review.md): links here; matches its title: "
        f"{(vault / 'journal/review.md').as_uri()}",
    ]
    assert "Its links that lead to no note: [[Nowhere]], (../gone.md)" in text
    assert embedded(result) == {uri: (vault / "projects/plan.md").read_text()}
    assert snapshot(vault) == before


def _complete(
    prompts: NotesPrompts, prompt: str, argument: str, value: str, who: str = "ada", **context: str
) -> tuple[list[str], int | None, bool]:
    ref = {"type": "ref/prompt", "name": prompt}
    result: tuple[list[str], int | None, bool] = anyio.run(
        prompts.complete, ctx(who), ref, {"name": argument, "value": value}, context
    )
    return result


def test_arguments_are_completed_from_what_the_principal_may_read(
    prompts: NotesPrompts, vault: Path
) -> None:
    days, total, more = _complete(prompts, "daily_note", "date", "")
    assert days[:3] == ["2026-12-03", "2026-12-04", "2026-12-02"] and total == 15 and not more
    assert _complete(prompts, "daily_note", "date", "2026-11")[0] == [
        "2026-11-30",
        "2026-11-29",
        "2026-11-28",
        "2026-11-27",
        "2026-11-26",
    ]
    assert _complete(prompts, "daily_note", "workspaceUri", "file:")[0] == [vault.as_uri()]
    assert _complete(prompts, "summarise_folder", "folder", "")[0] == ["journal", "projects"]
    assert _complete(prompts, "summarise_folder", "folder", "PRO")[0] == ["projects"]
    values, total, _ = _complete(
        prompts, "related_notes", "uri", (vault / "projects").as_uri() + "/b"
    )
    assert values == [(vault / "projects/budget.md").as_uri()] and total == 1
    assert len(_complete(prompts, "related_notes", "uri", "file:///")[0]) == 5
    for prompt, argument in [
        ("daily_note", "workspaceUri"),
        ("summarise_folder", "folder"),
        ("related_notes", "uri"),
    ]:
        assert _complete(prompts, prompt, argument, "", who="mallory")[0] == []
    with pytest.raises(InvalidParams):
        _complete(prompts, "daily_note", "nope", "")
    with pytest.raises(InvalidParams):
        _complete(prompts, "nope", "date", "")


def test_folder_completion_offers_only_folders_that_hold_notes(
    prompts: NotesPrompts, vault: Path
) -> None:
    # Issue 26: folders holding only attachments (or only files that are not readable
    # notes) have nothing to summarise; a folder whose notes are all in subfolders has.
    (vault / "media").mkdir()
    (vault / "media" / "pic.png").write_bytes(b"\x89PNG\r\n")
    (vault / "projects" / "img").mkdir()
    (vault / "projects" / "img" / "chart.png").write_bytes(b"\x89PNG\r\n")
    (vault / "broken").mkdir()
    (vault / "broken" / "latin1.md").write_bytes(b"caf\xe9\n")
    (vault / "deep" / "er").mkdir(parents=True)
    (vault / "deep" / "er" / "n.md").write_text("# N\n")
    offered = _complete(prompts, "summarise_folder", "folder", "")[0]
    assert offered == ["deep", "deep/er", "journal", "projects"]
    assert _complete(prompts, "summarise_folder", "folder", "projects/")[0] == []
    for folder in offered:  # each one has a summary
        assert get(prompts, "summarise_folder", folder=folder)["messages"]
