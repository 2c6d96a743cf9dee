"""Notes as resources: paginated listing, reading, templates and path completion."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from fsnotes.app.server import Server
from fsnotes.notes.tools.resources import RESOURCES_PAGE, NotesResources
from fsnotes.protocol.registry import InvalidParams, RequestContext, ResourceNotFound

CTX = RequestContext(
    era="modern",
    protocol_version="2026-07-28",
    method="resources/list",
    principal="ada",  # the server fixture's configured principal
    client_capabilities={},
    client_info=None,
)


def test_listing_pages_through_every_note_once(server: Server, vault: Path) -> None:
    for i in range(RESOURCES_PAGE + 30):
        (vault / "bulk" / f"n{i:03}.md").parent.mkdir(exist_ok=True)
        (vault / "bulk" / f"n{i:03}.md").write_text(f"# {i}\n")
    provider = NotesResources(server.service)
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page, cursor = anyio.run(provider.list_resources, CTX, cursor)
        pages += 1
        seen.extend(r["uri"] for r in page)
        if cursor is None:
            break
    assert pages == 2
    # Plus the vault's 5 notes and its one attachment (image.png, listed after the notes).
    assert len(seen) == len(set(seen)) == RESOURCES_PAGE + 30 + 5 + 1
    assert seen[-1] == (vault / "image.png").as_uri()
    assert (vault / ".obsidian" / "config.md").as_uri() not in seen
    with pytest.raises(InvalidParams):
        anyio.run(provider.list_resources, CTX, "garbage")


def test_read_and_not_found(server: Server, vault: Path) -> None:
    provider = NotesResources(server.service)
    contents = anyio.run(provider.read_resource, CTX, (vault / "inbox.md").as_uri())
    assert contents == [
        {
            "uri": (vault / "inbox.md").as_uri(),
            "mimeType": "text/markdown",
            "text": (vault / "inbox.md").read_text(),
        }
    ]
    (vault / "data.bin").write_bytes(b"neither a note nor an attachment")
    for uri in (
        (vault / "data.bin").as_uri(),
        (vault / "missing.md").as_uri(),
        (vault / "missing.png").as_uri(),
        "file:///etc/passwd",
        vault.as_uri() + "/%2e%2e/outside/secret.md",
    ):
        with pytest.raises(ResourceNotFound):
            anyio.run(provider.read_resource, CTX, uri)


def test_template_and_completion(server: Server, vault: Path) -> None:
    provider = NotesResources(server.service)
    (template,) = anyio.run(provider.list_templates, CTX)
    assert template["uriTemplate"] == vault.as_uri() + "/{+path}"
    ref = {"type": "ref/resource", "uri": template["uriTemplate"]}
    values, total, more = anyio.run(
        provider.complete, CTX, ref, {"name": "path", "value": "PRO"}, {}
    )
    assert values == ["projects/budget.md", "projects/plan.md"] and total == 2 and not more
    with pytest.raises(InvalidParams):
        anyio.run(
            provider.complete,
            CTX,
            {"type": "ref/resource", "uri": "file:///x/{+path}"},
            {"name": "path", "value": ""},
            {},
        )
