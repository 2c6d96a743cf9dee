"""Hidden folders ('.git', '.obsidian', '.trash', '.cache') on the wire: the real
`fsnotes serve` over stdio never opens them, so however large or deep they are, every
answer is about the visible notes only, complete and without a skipped folder.

"Never opened" is observed from outside the server: an inotify watch with IN_OPEN |
IN_ACCESS on every hidden directory, placed before the server starts, hears any open or
listing of them by any process, for as long as the server builds, watches and refreshes
its index.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.index_wire import assert_no_sqlite_text, found, listed, ok, search, wait_complete, wait_for
from e2e.wire import Wire, meta, readable
from sandbox.uri import MAX_DEPTH

# A real repository's object store is thousands of files; whether the server would refuse
# one past its per-folder limit is tested in tests/notes/index/test_hidden_folders.py (creating
# 500,001 files takes 30 s here). Here what matters is that none of them is ever looked at.
GIT_OBJECTS = 3000
# Deeper than any path a client may send: a visible folder this deep is skipped and counted.
CACHE_DEPTH = MAX_DEPTH + 2

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))

VISIBLE = {
    "alpha.md": "---\nstatus: open\n---\n# Alpha\n\nzebra #common\nSee [[Beta]] and [[Buried]].\n",
    "garden/beta.md": "# Beta\n\nzebra too #common\n[[Alpha]]\n",
}
# Notes and attachments in hidden folders: each would be found by some question below if
# its folder were entered (same title, same word, same tag, same frontmatter, links).
HIDDEN = {
    ".git/objects/buried.md": "---\nstatus: open\n---\n# Alpha\n\nzebra #common\n[[Alpha]]\n",
    ".obsidian/plugins/p/alpha.md": "# Alpha\n\nzebra #common #secret\n[[Beta]]\n",
    ".trash/alpha.md": "---\nstatus: open\n---\n# Alpha\n\nzebra #common\n",
    ".trash/gone/Buried.md": "# Buried\n\nzebra\n",
}
HIDDEN_PICTURES = [".git/objects/pic.png", ".obsidian/icon.png"]
CACHE_NOTE = "deep.md"
# Both visible notes indexed, nothing skipped, nothing to warn about.
COMPLETE = {"complete": True, "indexedNotes": 2, "skippedFolders": 0, "message": None}

IN_ACCESS = 0x00000001
IN_OPEN = 0x00000020
_EVENT = struct.Struct("iIII")


class OpenSpy:
    """inotify IN_OPEN | IN_ACCESS on directories: who opens or lists them, any process."""

    def __init__(self, dirs: list[Path]) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, ctypes.get_errno()
        self.watched: dict[int, Path] = {}
        for d in dirs:
            wd = self.libc.inotify_add_watch(self.fd, os.fsencode(d), IN_OPEN | IN_ACCESS)
            assert wd >= 0, (d, ctypes.get_errno())
            self.watched[wd] = d

    def seen(self) -> list[str]:
        """What was opened or listed since the last call (directory, entry name)."""
        out: list[str] = []
        while readable(self.fd, 0):
            data = os.read(self.fd, 65536)
            pos = 0
            while pos < len(data):
                wd, _mask, _cookie, size = _EVENT.unpack_from(data, pos)
                name = data[pos + _EVENT.size : pos + _EVENT.size + size].rstrip(b"\0")
                out.append(f"{self.watched.get(wd)} {name.decode()}")
                pos += _EVENT.size + size
        return out

    def close(self) -> None:
        os.close(self.fd)


def _make_vault(ws: Path) -> list[Path]:
    """The vault; returns every hidden directory in it (all to be watched)."""
    for rel, text in {**VISIBLE, **HIDDEN}.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (ws / "garden" / "map.png").write_bytes(PNG)
    for rel in HIDDEN_PICTURES:
        (ws / rel).write_bytes(PNG)
    objects = ws / ".git" / "objects"
    fd = os.open(objects, os.O_DIRECTORY)
    try:
        for i in range(GIT_OBJECTS):
            os.close(os.open(f"{i:038x}", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    cache = ws.joinpath(".cache", *["x"] * (CACHE_DEPTH - 1))
    cache.mkdir(parents=True)
    (cache / CACHE_NOTE).write_text("# Alpha\n\nzebra #common\n")
    return sorted(
        Path(top)
        for top, _dirs, _files in os.walk(ws)
        if any(n.startswith(".") for n in Path(top).relative_to(ws).parts)
    )


@pytest.fixture
def vault(tmp_path: Path) -> tuple[Path, OpenSpy]:
    ws = tmp_path / "notes"
    ws.mkdir()
    spy = OpenSpy(_make_vault(ws))
    assert spy.seen() == []
    return ws, spy


@pytest.fixture
def served(vault: tuple[Path, OpenSpy], tmp_path: Path) -> Iterator[tuple[Wire, Path, OpenSpy]]:
    ws, spy = vault
    w = Wire(ws, tmp_path / "state")
    try:
        yield w, ws, spy
    finally:
        w.close()
        spy.close()


def _delete_candidates(w: Wire, ws: Path, title: str) -> list[str] | str:
    """The notes a delete by title offers the person, or the tool's error when none."""
    response = w.call(
        "tools/call",
        {
            "_meta": meta({"elicitation": {"form": {}}}),
            "name": "notes_delete",
            "arguments": {"workspaceUri": ws.as_uri(), "title": title},
        },
    )
    result = response["result"]
    if result.get("isError"):
        return str(result["content"][0]["text"])
    assert result.get("resultType") == "input_required", result
    ((_key, request),) = result["inputRequests"].items()
    schema = request["params"]["requestedSchema"]["properties"]["note_id"]
    return [option["const"] for option in schema["oneOf"]]


def _complete(w: Wire, ref: dict[str, Any], argument: str, value: str) -> list[str]:
    params = {"_meta": meta(), "ref": ref, "argument": {"name": argument, "value": value}}
    return list(w.call("completion/complete", params)["result"]["completion"]["values"])


def _every_answer_is_about_the_visible_notes(w: Wire, ws: Path) -> None:
    visible = sorted(VISIBLE)
    assert listed(w) == visible
    assert found(w, "zebra") == visible
    assert listed(w, tag="common") == visible
    assert sorted(h["path"] for h in search(w, "zebra", tag="common")["results"]) == visible
    assert listed(w, where={"status": "open"}) == ["alpha.md"]
    tags = ok(w, "notes_tags", {})
    assert [(t["tag"], t["notes"]) for t in tags["tags"]] == [("common", 2)]
    assert _delete_candidates(w, ws, "Alpha") == ["alpha.md"]
    # Only hidden notes bear that title.
    assert _delete_candidates(w, ws, "Buried") == (
        "No note in workspace 'notes' has a title containing 'Buried'; check the title with "
        "notes_search."
    )
    links = ok(w, "notes_links", {"uri": (ws / "alpha.md").as_uri()})
    assert [b["path"] for b in links["backlinks"]] == ["garden/beta.md"]
    assert [(o["target"], o["status"]) for o in links["outgoing"]] == [
        ("Beta", "note"),
        ("Buried", "broken"),
    ]
    beta = ok(w, "notes_links", {"uri": (ws / "garden/beta.md").as_uri()})
    assert [b["path"] for b in beta["backlinks"]] == ["alpha.md"]
    resources = w.call("resources/list", {"_meta": meta()})["result"]
    assert "nextCursor" not in resources
    assert sorted(r["uri"] for r in resources["resources"]) == sorted(
        (ws / rel).as_uri() for rel in [*VISIBLE, "garden/map.png"]
    )
    template = {"type": "ref/resource", "uri": ws.as_uri().rstrip("/") + "/{+path}"}
    assert _complete(w, template, "path", "") == visible
    assert _complete(w, template, "path", ".") == []
    folders = {"type": "ref/prompt", "name": "summarise_folder"}
    assert _complete(w, folders, "folder", "") == ["garden"]
    assert _complete(w, folders, "folder", ".") == []
    summary = w.call(
        "prompts/get",
        {"_meta": meta(), "name": "summarise_folder", "arguments": {"folder": ""}},
    )["result"]
    embedded = [m["content"]["resource"]["uri"] for m in summary["messages"][1:]]
    assert embedded == [(ws / rel).as_uri() for rel in visible]
    assert_no_sqlite_text(w)


def test_hidden_folders_large_and_deep_are_never_opened_and_every_answer_is_complete(
    served: tuple[Wire, Path, OpenSpy], tmp_path: Path
) -> None:
    w, ws, spy = served
    info = wait_complete(w)
    assert info == COMPLETE, info
    _every_answer_is_about_the_visible_notes(w, ws)
    assert spy.seen() == []


def test_hidden_folders_stay_unopened_while_the_index_watches_and_refreshes(
    vault: tuple[Path, OpenSpy], tmp_path: Path
) -> None:
    ws, spy = vault
    w = Wire(ws, tmp_path / "state")
    try:
        wait_complete(w)
        # Another program writes into hidden folders and into visible ones: the watcher's
        # hints and the rescans they cause enter only the visible ones. (The hidden ones
        # are written beside the workspace and renamed in, so that the spy hears no open.)
        staged = tmp_path / "staged.md"
        staged.write_text("# Fresh\n\nzebra #common\n")
        staged.rename(ws / ".git" / "objects" / "fresh.md")
        (ws / ".trash" / "newdir").mkdir()
        (ws / "new").mkdir()
        (ws / "new" / "fresh.md").write_text("# Fresh\n\nzebra #common\n")
        assert wait_for(lambda: "new/fresh.md" in listed(w), timeout=15) is not None
        assert found(w, "zebra") == sorted([*VISIBLE, "new/fresh.md"])
        (ws / "new" / "fresh.md").unlink()
        (ws / "new").rmdir()
        assert wait_for(lambda: "new/fresh.md" not in listed(w), timeout=15) is not None
        assert spy.seen() == []
    finally:
        w.close()
    # A second server on the same index: its start-up rescan (the refresh) checks every
    # folder against what the index holds, and again enters no hidden one.
    w = Wire(ws, tmp_path / "state")
    try:
        assert wait_complete(w) == COMPLETE
        _every_answer_is_about_the_visible_notes(w, ws)
    finally:
        w.close()
        assert spy.seen() == []
        spy.close()


@pytest.mark.parametrize("folder", [".git", ".git/objects", ".cache", ".trash"])
def test_a_hidden_folder_named_as_a_filter_is_a_clear_error(
    served: tuple[Wire, Path, OpenSpy], folder: str
) -> None:
    w, _ws, spy = served
    wait_complete(w)
    for name, arguments in [
        ("notes_list", {"folder": folder}),
        ("notes_search", {"query": "zebra", "folder": folder}),
    ]:
        result = w.tool(name, arguments)["result"]
        assert result["isError"] is True, result
        text = result["content"][0]["text"]
        assert text == f"Folder '{folder}' is hidden; notes are never there.", text
    error = w.call(
        "prompts/get",
        {"_meta": meta(), "name": "summarise_folder", "arguments": {"folder": folder}},
    )["error"]
    assert error["code"] == -32602 and "hidden" in error["message"], error
    assert spy.seen() == []


def test_a_client_cannot_reach_a_note_in_a_hidden_folder_by_name(
    served: tuple[Wire, Path, OpenSpy],
) -> None:
    w, ws, spy = served
    wait_complete(w)
    for rel in HIDDEN:
        result = w.tool("notes_read", {"uri": (ws / rel).as_uri()})["result"]
        assert result["isError"] is True and "hidden" in result["content"][0]["text"], result
    read = w.call("resources/read", {"_meta": meta(), "uri": (ws / HIDDEN_PICTURES[0]).as_uri()})
    assert "error" in read, read
    assert search(w, "secret")["results"] == []
    # Refused by name before anything is opened.
    assert spy.seen() == []
