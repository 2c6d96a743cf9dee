"""Attachments (images, PDFs) as resources: listed with their MIME type, read as blobs."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from fsnotes.app.server import Server
from fsnotes.notes.index.attachments import MAX_ATTACHMENT_BYTES, media_type
from fsnotes.notes.tools.resources import RESOURCES_PAGE, NotesResources
from fsnotes.protocol.registry import InvalidParams, RequestContext, ResourceNotFound

CTX = RequestContext(
    era="modern",
    protocol_version="2026-07-28",
    method="resources/list",
    principal="ada",
    client_capabilities={},
    client_info=None,
)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # not UTF-8: it is never decoded


def _all(provider: NotesResources) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page, cursor = anyio.run(provider.list_resources, CTX, cursor)
        out.extend(page)
        if cursor is None:
            return out


def _read(provider: NotesResources, uri: str) -> list[dict[str, Any]]:
    return anyio.run(provider.read_resource, CTX, uri)


def test_media_types_come_from_the_extension_only() -> None:
    assert media_type("a.PNG") == "image/png"
    assert media_type("scan.pdf") == "application/pdf"
    assert media_type("x.jpeg") == media_type("x.jpg") == "image/jpeg"
    for name in ("drawing.svg", "note.md", "png", ".png", "archive.png.zip"):
        assert media_type(name) is None, name


def test_attachments_are_listed_after_the_notes_with_mime_and_size(
    server: Server, vault: Path
) -> None:
    (vault / "media").mkdir()
    (vault / "media" / "photo.JPG").write_bytes(b"\xff\xd8jpeg")
    (vault / "media" / "paper.pdf").write_bytes(b"%PDF-1.7 tiny")
    (vault / "media" / "drawing.svg").write_text("<svg/>")  # not an attachment
    (vault / ".obsidian" / "icon.png").write_bytes(PNG)  # hidden folder
    (vault / "media" / "link.png").symlink_to(vault.parent / "outside" / "secret.md")
    listed = _all(NotesResources(server.service))
    by_name = {r["name"]: r for r in listed}
    assert [r["name"] for r in listed][-3:] == ["image.png", "media/paper.pdf", "media/photo.JPG"]
    assert by_name["media/paper.pdf"]["mimeType"] == "application/pdf"
    assert by_name["media/paper.pdf"]["size"] == len(b"%PDF-1.7 tiny")
    assert by_name["media/photo.JPG"]["mimeType"] == "image/jpeg"
    assert by_name["media/photo.JPG"]["uri"] == (vault / "media" / "photo.JPG").as_uri()
    assert "lastModified" in by_name["image.png"]["annotations"]
    for absent in ("media/drawing.svg", ".obsidian/icon.png", "media/link.png"):
        assert absent not in by_name


def test_attachments_are_not_notes(server: Server, vault: Path) -> None:
    (vault / "photo.png").write_bytes(PNG)
    svc = server.service.acting_for("ada")
    assert "photo.png" not in [n.path for n in svc.notes_list(None, None, None, None, 500).notes]
    assert svc.notes_search(None, "png", None, None, None).results == []
    provider = NotesResources(server.service)
    (template,) = anyio.run(provider.list_templates, CTX)
    ref = {"type": "ref/resource", "uri": template["uriTemplate"]}
    values, _, _ = anyio.run(provider.complete, CTX, ref, {"name": "path", "value": "ph"}, {})
    assert values == []


def test_an_attachment_is_read_as_a_base64_blob(server: Server, vault: Path) -> None:
    (vault / "media").mkdir()
    (vault / "media" / "photo one.png").write_bytes(PNG)
    uri = (vault / "media" / "photo one.png").as_uri()
    assert uri.endswith("/media/photo%20one.png")
    (content,) = _read(NotesResources(server.service), uri)
    assert content == {"uri": uri, "mimeType": "image/png", "blob": base64.b64encode(PNG).decode()}
    assert "text" not in content


def test_an_attachment_at_the_limit_is_served_and_one_byte_more_is_refused(
    server: Server, vault: Path
) -> None:
    provider = NotesResources(server.service)
    (vault / "max.pdf").write_bytes(b"%" * MAX_ATTACHMENT_BYTES)
    (vault / "big.pdf").write_bytes(b"%" * (MAX_ATTACHMENT_BYTES + 1))
    (content,) = _read(provider, (vault / "max.pdf").as_uri())
    assert len(base64.b64decode(content["blob"])) == MAX_ATTACHMENT_BYTES
    with pytest.raises(InvalidParams) as err:
        _read(provider, (vault / "big.pdf").as_uri())
    assert str(err.value) == (
        "'big.pdf' is larger than 4,194,304 bytes (4 MiB), the most fsnotes serves as an "
        "attachment; it was not read."
    )
    assert err.value.data == {"uri": (vault / "big.pdf").as_uri(), "maxBytes": 4194304}
    assert str(vault) not in str(err.value)
    # Still listed, with its size, so a client can tell before asking.
    sizes = {r["name"]: r["size"] for r in _all(provider)}
    assert sizes["big.pdf"] == MAX_ATTACHMENT_BYTES + 1


def test_unreadable_attachments_are_not_found_and_never_followed(
    server: Server, vault: Path
) -> None:
    provider = NotesResources(server.service)
    outside = vault.parent / "outside" / "photo.png"
    outside.write_bytes(PNG)
    (vault / "link.png").symlink_to(outside)
    (vault / ".hidden").mkdir()
    (vault / ".hidden" / "x.png").write_bytes(PNG)
    os.mkfifo(vault / "fifo.png")
    os.link(vault / "image.png", vault / "hardlink.png")
    for uri in (
        (vault / "link.png").as_uri(),
        (vault / ".hidden" / "x.png").as_uri(),
        (vault / "fifo.png").as_uri(),  # never opened for reading: no hang
        (vault / "hardlink.png").as_uri(),
        (vault / "nope.png").as_uri(),
        vault.as_uri() + "/%2e%2e/outside/photo.png",
        outside.as_uri(),
    ):
        with pytest.raises(ResourceNotFound):
            _read(provider, uri)


def test_a_changed_or_vanished_attachment_is_never_listed_stale(
    server: Server, vault: Path
) -> None:
    svc = server.service.acting_for("ada")
    catalog = svc.workspace_catalog(None)  # built, with image.png recorded
    (row,) = catalog.attachments(None, 10).rows
    assert row.parts == ("image.png",) and row.size == len("not a note")
    (vault / "image.png").write_bytes(PNG)
    (row,) = catalog.attachments(None, 10).rows  # checked against the file: recorded again
    assert row.size == len(PNG)
    (vault / "image.png").unlink()
    assert catalog.attachments(None, 10).rows == []


def test_many_attachments_page_with_the_notes(server: Server, vault: Path) -> None:
    (vault / "pics").mkdir()
    for i in range(RESOURCES_PAGE + 7):
        (vault / "pics" / f"p{i:03}.png").write_bytes(PNG[:16])
    listed = _all(NotesResources(server.service))
    names = [r["name"] for r in listed]
    assert len(names) == len(set(names)) == 5 + 1 + RESOURCES_PAGE + 7
    assert names[:5] == [
        "inbox.md",
        "journal/2026-11-28.md",
        "projects/budget.md",
        "projects/plan.md",
        "readme.txt",
    ]
    assert names[5:] == sorted(names[5:]) and names[5] == "image.png"


def test_other_principals_see_no_attachment(server: Server, vault: Path) -> None:
    stranger = RequestContext(
        era="modern",
        protocol_version="2026-07-28",
        method="resources/read",
        principal="mallory",
        client_capabilities={},
        client_info=None,
    )
    provider = NotesResources(server.service)
    page, _ = anyio.run(provider.list_resources, stranger, None)
    assert page == []
    with pytest.raises(ResourceNotFound):
        anyio.run(provider.read_resource, stranger, (vault / "image.png").as_uri())
