"""notes_links and notes_tags: the service side (authorize, contain, ask the index).

Functions over one request's :class:`~fsnotes.notes.tools.service.Notes` view, as its methods
are: authorization first, then layer 1, then the workspace's catalog.
"""

from __future__ import annotations

from fsnotes.notes.index import linkgraph
from fsnotes.notes.index.catalog import Catalog
from fsnotes.notes.store import display
from fsnotes.notes.text import links as rules
from fsnotes.notes.tools.errors import ServiceError, index_unavailable
from fsnotes.notes.tools.models_links import (
    Backlink,
    LinkStatus,
    NotesLinksResult,
    NotesTagsResult,
    OutgoingLink,
    TagOut,
)
from fsnotes.notes.tools.service import Notes, index_info
from fsnotes.protocol import cursor as cursor_codec
from fsnotes.security.grants import Access
from sandbox import uri as lexical
from sandbox.uri import Components


def _status(target: rules.LinkTarget, resolved: Components | None) -> LinkStatus:
    if target.problem == "outside":
        return "outside"
    if target.attachment:
        return "other"
    return "note" if resolved is not None else "broken"


def notes_links(notes: Notes, uri: str) -> NotesLinksResult:
    loc = notes.locate(uri, Access.READ)
    note = notes.read_located(loc)
    extensions = loc.store.extensions
    catalog = notes.catalog(loc, fresh=True)
    with index_unavailable():
        catalog.refresh(loc.parts)  # this note as read now, whatever the index had
        status = catalog.status()
        out, out_total = linkgraph.outgoing(catalog, loc.parts, note.meta.refs, extensions)
        back, back_total = linkgraph.backlinks(catalog, loc.parts, extensions)
    base = loc.workspace.components
    outgoing = []
    for link in out:
        target, resolved = link.target, link.resolved
        shown = resolved or (target.parts if target.style == "path" and target.parts else None)
        outgoing.append(
            OutgoingLink(
                type=link.occurrence.kind,
                embed=link.occurrence.embed,
                target=link.occurrence.target,
                heading=link.occurrence.heading,
                status=_status(target, resolved),
                uri=lexical.to_file_uri(base + resolved) if resolved else None,
                path=display(shown) if shown else None,
                count=link.count,
            )
        )
    return NotesLinksResult(
        uri=loc.uri,
        path=display(loc.parts),
        outgoing=outgoing,
        outgoingTotal=out_total,
        backlinks=[
            Backlink(
                uri=lexical.to_file_uri(base + b.row.parts),
                path=display(b.row.parts),
                title=b.row.title,
                links=b.links,
            )
            for b in back
        ],
        backlinksTotal=back_total,
        index=index_info(status),
    )


def notes_tags(
    notes: Notes,
    workspace_uri: str | None,
    prefix: str | None,
    cursor: str | None,
    limit: int | None,
) -> NotesTagsResult:
    catalog = notes.workspace_catalog(workspace_uri)
    after = _decode_tag_cursor(cursor) if cursor is not None else None
    size = min(limit or linkgraph.DEFAULT_TAGS_LIMIT, linkgraph.MAX_TAGS_LIMIT)
    with index_unavailable():
        status = catalog.status()
        page, more, total = linkgraph.tags(catalog, prefix or "", after, size)
    return NotesTagsResult(
        tags=[TagOut(tag=t.tag, notes=t.notes, withNested=t.with_nested) for t in page],
        total=total,
        nextCursor=_encode_tag_cursor(page[-1].tag) if more and page else None,
        index=index_info(status),
    )


def _encode_tag_cursor(tag: str) -> str:
    return cursor_codec.encode({"v": 1, "tag": tag})


def _decode_tag_cursor(cursor: str) -> str:
    bad = ServiceError("That cursor is not one this server issued; list the tags again without it.")
    value = cursor_codec.decode_object(cursor, 1)
    if value is None:
        raise bad
    tag = value.get("tag")
    if not isinstance(tag, str) or not tag:
        raise bad
    return tag


def catalog_check(notes: Notes, uri: str, needed: Access = Access.WRITE) -> Catalog:
    """The catalog of the workspace a note URI is in (authorized for ``needed``): what a
    links query, or a move before it plans its link rewrite, waits on."""
    return notes.prepare(notes.locate(uri, needed))


__all__ = ["catalog_check", "notes_links", "notes_tags"]
