"""Notes as MCP resources: their ``file://`` URIs, listed, read, templated and completed.

A workspace's attachments (images and PDFs, :mod:`fsnotes.notes.index.attachments`) are resources
too: listed after its notes with their MIME type, and read as base64 blobs, size-capped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from fsnotes.notes.index.attachments import (
    MAX_ATTACHMENT_BYTES,
    AttachmentRow,
    AttachmentTooLarge,
    media_type,
    read_blob,
)
from fsnotes.notes.index.catalog import CatalogUnavailable
from fsnotes.notes.index.indexer import until_indexed
from fsnotes.notes.index.schema import Row
from fsnotes.notes.store import display, iso_time
from fsnotes.notes.tools.errors import ServiceError
from fsnotes.notes.tools.located import Located
from fsnotes.notes.tools.service import Notes, NotesService
from fsnotes.protocol import cursor as cursor_codec
from fsnotes.protocol.registry import (
    InputRequired,
    InternalError,
    InvalidParams,
    RequestContext,
    ResourceNotFound,
)
from fsnotes.security.grants import Access, NotGranted, Workspace
from sandbox import errors as sx
from sandbox import uri as lexical
from sandbox.uri import Components

JSONObject = dict[str, Any]

RESOURCES_PAGE = 100  # resources per resources/list page
MAX_COMPLETIONS = 100  # the spec's cap on completion values
TEMPLATE_ARGUMENT = "path"


def mime_for(name: str) -> str:
    return "text/plain" if name.lower().endswith(".txt") else "text/markdown"


class NotesResources:
    """A ResourceProvider over every workspace the request's principal may read."""

    def __init__(self, service: NotesService) -> None:
        self.service = service

    def _acting(self, ctx: RequestContext) -> Notes:
        return self.service.acting_for(ctx.principal, ctx.roots, ctx.ceiling)

    async def list_resources(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        notes = self._acting(ctx)
        for ws in await anyio.to_thread.run_sync(notes.readable):
            await _indexed(ctx, notes, ws)
        return await anyio.to_thread.run_sync(_list, notes, cursor)

    async def list_templates(self, ctx: RequestContext) -> list[JSONObject]:
        return [
            {
                # RFC 6570 reserved expansion: '{+path}' keeps the '/' between folders.
                "uriTemplate": ws.uri.rstrip("/") + "/{+" + TEMPLATE_ARGUMENT + "}",
                "name": ws.name,
                "title": f"Notes in {ws.name}",
                "description": "A note in this workspace, by its relative path.",
                "mimeType": "text/markdown",
            }
            for ws in self._acting(ctx).readable()
        ]

    async def read_resource(
        self, ctx: RequestContext, uri: str
    ) -> list[JSONObject] | InputRequired:
        return await anyio.to_thread.run_sync(_read, self._acting(ctx), uri)

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        if ref.get("type") != "ref/resource" or argument.get("name") != TEMPLATE_ARGUMENT:
            raise InvalidParams("Completion is offered for the 'path' of a notes template only.")
        template = ref.get("uri")
        value = argument.get("value")
        if not isinstance(value, str):
            raise InvalidParams("argument.value must be a string")
        notes = self._acting(ctx)
        for ws in notes.readable():
            if template == ws.uri.rstrip("/") + "/{+" + TEMPLATE_ARGUMENT + "}":
                await _indexed(ctx, notes, ws)
                return await anyio.to_thread.run_sync(_complete, notes, ws, value)
        raise InvalidParams("Unknown resource template; use one from resources/templates/list.")


async def _indexed(ctx: RequestContext, notes: Notes, ws: Workspace) -> None:
    loc = notes.relative(ws, "", allow_empty=True)
    try:
        catalog = await anyio.to_thread.run_sync(lambda: notes.catalog(loc, fresh=True))
    except ServiceError:
        return  # the listing itself reports it
    await until_indexed(catalog, ctx.report_progress)


_NOTES, _ATTACHMENTS = "n", "a"  # the two listings of a workspace, in this order


def _list(notes: Notes, cursor: str | None) -> tuple[list[JSONObject], str | None]:
    """One page: each workspace's notes, then its attachments, workspace after workspace."""
    start_ws, start_kind, after = _decode(cursor) if cursor else (0, _NOTES, ())
    workspaces = notes.readable()
    out: list[JSONObject] = []
    for index in range(start_ws, len(workspaces)):
        ws = workspaces[index]
        kinds = (_ATTACHMENTS,) if index == start_ws and start_kind == _ATTACHMENTS else None
        for kind in kinds or (_NOTES, _ATTACHMENTS):
            begin = after if index == start_ws and kind == start_kind and after else None
            try:
                catalog = notes.catalog(notes.relative(ws, "", allow_empty=True), fresh=True)
                room = RESOURCES_PAGE - len(out)
                if kind == _NOTES:
                    page = catalog.page((), begin, room)
                    out.extend(_resource(ws, row) for row in page.rows)
                    more, last = page.more, page.last
                else:
                    found = catalog.attachments(begin, room)
                    out.extend(_attachment(ws, row) for row in found.rows)
                    more, last = found.more, found.last
            except (ServiceError, CatalogUnavailable) as exc:
                # Never an empty list that hides a failure: the client is told, and may retry.
                raise InternalError(
                    f"Listing the notes of workspace '{ws.name}' failed: {exc}"
                ) from None
            if more and last:  # (short when stale rows were dropped)
                return out, _encode(index, kind, last)
            if len(out) == RESOURCES_PAGE:
                following = _following(index, kind, len(workspaces))
                return out, None if following is None else _encode(*following, ())
    return out, None


def _following(index: int, kind: str, workspaces: int) -> tuple[int, str] | None:
    """The listing after ``kind`` of workspace ``index`` (None: that was the last)."""
    if kind == _NOTES:
        return index, _ATTACHMENTS
    return (index + 1, _NOTES) if index + 1 < workspaces else None


def _read(notes: Notes, uri: str) -> list[JSONObject]:
    try:
        loc = notes.locate(uri, Access.READ)
        if media_type(loc.parts[-1] if loc.parts else "") and not loc.store.is_note_name(
            loc.parts[-1]
        ):
            return [_read_attachment(loc)]
        note = notes.read_located(loc)
    except (NotGranted, ServiceError):
        # Outside the grants, malformed, missing or not a note: to the client these are
        # all "no such resource" (and the message never tells which).
        raise ResourceNotFound(uri) from None
    return [{"uri": loc.uri, "mimeType": mime_for(loc.parts[-1]), "text": note.text}]


def _read_attachment(loc: Located) -> JSONObject:
    try:
        mime, blob = read_blob(loc.store, loc.parts)
    except AttachmentTooLarge as exc:
        raise InvalidParams(
            str(exc), data={"uri": loc.uri, "maxBytes": MAX_ATTACHMENT_BYTES}
        ) from None
    except sx.SandboxError:
        raise ServiceError("not readable") from None  # reported as not found, as for notes
    return {"uri": loc.uri, "mimeType": mime, "blob": blob}


def _complete(notes: Notes, ws: Workspace, prefix: str) -> tuple[list[str], int | None, bool]:
    loc = notes.relative(ws, "", allow_empty=True)
    try:
        catalog = notes.catalog(loc, fresh=True)
        paths, total = catalog.complete(prefix, MAX_COMPLETIONS)
    except (ServiceError, CatalogUnavailable):
        return [], 0, False  # completion is a convenience; an unusable index offers none
    return [display(p) for p in paths], total, total > len(paths)


def _resource(ws: Workspace, row: Row) -> JSONObject:
    return {
        "uri": lexical.to_file_uri(ws.components + row.parts),
        "name": display(row.parts),
        "title": f"{display(row.parts)} ({ws.name})",
        "mimeType": mime_for(row.parts[-1]),
        "size": row.size,
        "annotations": {"lastModified": iso_time(row.mtime_ns)},
    }


def _attachment(ws: Workspace, row: AttachmentRow) -> JSONObject:
    return {
        "uri": lexical.to_file_uri(ws.components + row.parts),
        "name": display(row.parts),
        "title": f"{display(row.parts)} ({ws.name})",
        "mimeType": row.mime_type,
        "size": row.size,
        "annotations": {"lastModified": iso_time(row.mtime_ns)},
    }


def _encode(index: int, kind: str, after: Components) -> str:
    return cursor_codec.encode({"v": 1, "w": index, "after": list(after), "k": kind})


def _decode(cursor: str) -> tuple[int, str, Components]:
    try:
        value = cursor_codec.decode_object(cursor, 1)
        if value is None:
            raise ValueError
        index, after = value["w"], value["after"]
        kind = value.get("k", _NOTES)
        if not isinstance(index, int) or index < 0:
            raise ValueError
        if not isinstance(after, list) or kind not in (_NOTES, _ATTACHMENTS):
            raise ValueError
        parts = tuple(lexical.check_name(p) for p in after if isinstance(p, str))
        if len(parts) != len(after):
            raise ValueError
        return index, kind, parts
    except (ValueError, KeyError, TypeError, sx.SandboxError):
        raise InvalidParams("Invalid cursor; list again from the start.") from None
