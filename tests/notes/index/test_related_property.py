"""The related_notes prompt names, as "it links there" and "links here", exactly the notes
that notes_links resolves the note's links to and lists as its backlinks, and as broken
exactly the links notes_links finds broken or outside, on generated vaults (hypothesis).

The vaults are those of the notes_links property test (every link form: names, suffixes,
extensions, headings, aliases, embeds, relative wikilinks, Markdown paths with and without
extensions, attachments, links out of the workspace, links in code), which checks
notes_links itself against a brute-force parse; here the prompt is checked against it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
from hypothesis import given

from fsnotes.notes.index.related import MAX_RELATED
from fsnotes.notes.tools import linkservice
from fsnotes.notes.tools.prompts import NotesPrompts
from fsnotes.protocol.registry import RequestContext
from tests.notes.text.test_links_property import (
    SETTINGS,
    Spec,
    make_vault,
    scratch,  # noqa: F401  (the fixture, used by name)
    serve,
    vault_notes,
    vault_st,
)

# One candidate line: "- Title (path): reason; reason: file:///..."
_CANDIDATE = re.compile(r"^- .*? \(([^()]+)\): (.+): (file://\S+)$")
_BROKEN = "Its links that lead to no note: "


def _ctx() -> RequestContext:
    return RequestContext(
        era="modern",
        protocol_version="2026-07-28",
        method="prompts/get",
        principal="ada",
        client_capabilities={},
        client_info=None,
    )


def _prompt(prompts: NotesPrompts, uri: str) -> str:
    result: dict[str, Any] = anyio.run(prompts.get_prompt, _ctx(), "related_notes", {"uri": uri})
    return str(result["messages"][0]["content"]["text"])


def _parse(text: str) -> tuple[set[str], set[str], set[str]]:
    """(notes it links to, notes linking to it, its broken links) as the prompt says."""
    links_to: set[str] = set()
    linked_from: set[str] = set()
    broken: set[str] = set()
    for line in text.split("\n\n"):
        if line.startswith(_BROKEN):
            broken = set(line[len(_BROKEN) :].split(", "))
    for line in text.splitlines():
        m = _CANDIDATE.match(line)
        if m is None:
            continue
        reasons = m.group(2).split("; ")
        if "it links there" in reasons:
            links_to.add(m.group(1))
        if "links here" in reasons:
            linked_from.add(m.group(1))
    return links_to, linked_from, broken


@SETTINGS
@given(vault=vault_st)
def test_related_notes_links_equal_notes_links(
    scratch: Path,  # noqa: F811
    vault: list[tuple[tuple[str, ...], str, str, list[Spec]]],
) -> None:
    root = make_vault(scratch, vault)
    files = vault_notes(root)
    assert len(files) < MAX_RELATED  # every candidate is listed: the sets are whole
    srv = serve(scratch, root)
    try:
        prompts = NotesPrompts(srv.service, srv.config.daily)
        notes = srv.service.acting_for("ada")
        for path in files:
            uri = (root / path).as_uri()
            result = linkservice.notes_links(notes, uri)
            want_to = {o.path for o in result.outgoing if o.status == "note"} - {path}
            want_from = {b.path for b in result.backlinks} - {path}
            want_broken = {
                f"[[{o.target}]]" if o.type == "wikilink" else f"({o.target})"
                for o in result.outgoing
                if o.status in ("broken", "outside")
            }
            text = _prompt(prompts, uri)
            assert _parse(text) == (want_to, want_from, want_broken), (path, files[path], text)
    finally:
        srv.close()
