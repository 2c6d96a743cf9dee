"""The notes tools: descriptors and thin async handlers over the service.

Tool and argument names are fixed (hosts script against them); their argument and result
models are :mod:`fsnotes.notes.tools.models`. A handler receives its validated argument model
and returns the service's result model (or, for a delete, the question to ask). Handlers run
the synchronous service in a worker thread so that the protocol loop keeps serving other
requests while a handler does file I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from fsnotes.notes.index.catalog import Catalog
from fsnotes.notes.index.indexer import until_indexed
from fsnotes.notes.tools import linkservice
from fsnotes.notes.tools.confirm import DeleteFlow
from fsnotes.notes.tools.errors import ServiceError
from fsnotes.notes.tools.models import (
    DeleteResult,
    MoveResult,
    NotesCreateArgs,
    NotesDeleteArgs,
    NotesHistoryArgs,
    NotesHistoryResult,
    NotesListArgs,
    NotesListResult,
    NotesMoveArgs,
    NotesReadArgs,
    NotesReadResult,
    NotesRestoreArgs,
    NotesRestoreResult,
    NotesSearchArgs,
    NotesSearchResult,
    NotesUpdateArgs,
    WorkspacesListArgs,
    WorkspacesListResult,
    WriteResult,
)
from fsnotes.notes.tools.models_links import (
    NotesLinksArgs,
    NotesLinksResult,
    NotesTagsArgs,
    NotesTagsResult,
)
from fsnotes.notes.tools.relink import MAX_LINK_REWRITES
from fsnotes.notes.tools.restore import notes_history, notes_restore
from fsnotes.notes.tools.service import Notes, NotesService
from fsnotes.protocol.registry import (
    InputRequired,
    RequestContext,
    Tool,
    ToolAnnotations,
    ToolError,
)
from fsnotes.security.consent import ConsentRefused
from fsnotes.security.grants import Access, NotGranted

T = TypeVar("T")

LINKS_DESCRIPTION = (
    "A note's outgoing links (wikilinks [[x]], [[x#heading|alias]], embeds ![[x]], Markdown "
    "links [t](path) and images), each resolved to a note or marked broken, other (a file "
    "that is not a note) or outside; and its backlinks (the notes whose links resolve to it). "
    "Wikilinks are names, case-insensitive: [[Name]] matches notes whose file name without "
    "extension is Name, [[a/Name]] those whose path ends with a/Name, [[Name.md]] the extension "
    "too; of several matches the shortest path wins, then the first in path order (so the exact "
    "path from the workspace root wins). Markdown links (and [[./x]], [[../x]]) are paths "
    "relative to the linking note, exact, the extension optional. Link syntax in code (fenced "
    "or indented code blocks, code spans) is text, not a link."
)


async def _call(fn: Callable[[], T]) -> T:
    """Run the synchronous service in a worker thread; its refusals become tool errors."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except (ServiceError, NotGranted, ConsentRefused) as exc:
        raise ToolError(str(exc)) from None


def _read_only(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only=True, destructive=False, idempotent=True)


async def _indexed(ctx: RequestContext, find: Callable[[], Catalog]) -> None:
    """Before a query: give the workspace's first indexing a bounded time to finish."""
    try:
        catalog = await anyio.to_thread.run_sync(find)
    except (ServiceError, NotGranted):
        return  # the query reports the same problem as its result
    await until_indexed(catalog, ctx.report_progress)


def build_tools(service: NotesService, deletes: DeleteFlow) -> list[Tool[Any, Any]]:
    """The notes tools. Each call acts as the principal its transport named, with its
    session's roots as hints (``ctx.roots``; None for a stateless request)."""

    def acting(ctx: RequestContext) -> Notes:
        # One Scope per handler call: the grants consulted once, here. A legacy handler
        # called again after a person answered a live question gets a new one on purpose:
        # a grant revoked while they decided stops a delete.
        return service.acting_for(ctx.principal, ctx.roots)

    async def workspaces_list(ctx: RequestContext, a: WorkspacesListArgs) -> WorkspacesListResult:
        return await _call(acting(ctx).workspaces_list)

    async def notes_list(ctx: RequestContext, a: NotesListArgs) -> NotesListResult:
        notes = acting(ctx)
        await _indexed(ctx, lambda: notes.workspace_catalog(a.workspaceUri))
        return await _call(
            lambda: notes.notes_list(a.workspaceUri, a.folder, a.tag, a.cursor, a.limit, a.where)
        )

    async def notes_read(ctx: RequestContext, a: NotesReadArgs) -> NotesReadResult:
        notes = acting(ctx)
        return await _call(lambda: notes.notes_read(a.uri, a.startLine, a.endLine))

    async def notes_search(ctx: RequestContext, a: NotesSearchArgs) -> NotesSearchResult:
        notes = acting(ctx)
        await _indexed(ctx, lambda: notes.workspace_catalog(a.workspaceUri))
        return await _call(
            lambda: notes.notes_search(a.workspaceUri, a.query, a.folder, a.tag, a.limit, a.where)
        )

    async def notes_create(ctx: RequestContext, a: NotesCreateArgs) -> WriteResult:
        notes = acting(ctx)
        return await _call(lambda: notes.notes_create(a.workspaceUri, a.path, a.content))

    async def notes_update(ctx: RequestContext, a: NotesUpdateArgs) -> WriteResult:
        notes = acting(ctx)
        edits = [e.as_op() for e in a.edits] if a.edits is not None else None
        return await _call(lambda: notes.notes_update(a.uri, a.content, edits, a.etag))

    async def notes_move(ctx: RequestContext, a: NotesMoveArgs) -> MoveResult:
        notes = acting(ctx)
        if a.updateLinks:  # the links to rewrite are found in the index: let it finish first
            await _indexed(ctx, lambda: linkservice.catalog_check(notes, a.uri))
        return await _call(lambda: notes.notes_move(a.uri, a.newPath, a.etag, a.updateLinks))

    async def notes_links(ctx: RequestContext, a: NotesLinksArgs) -> NotesLinksResult:
        notes = acting(ctx)
        await _indexed(ctx, lambda: linkservice.catalog_check(notes, a.uri, Access.READ))
        return await _call(lambda: linkservice.notes_links(notes, a.uri))

    async def notes_tags(ctx: RequestContext, a: NotesTagsArgs) -> NotesTagsResult:
        notes = acting(ctx)
        await _indexed(ctx, lambda: notes.workspace_catalog(a.workspaceUri))
        return await _call(
            lambda: linkservice.notes_tags(notes, a.workspaceUri, a.prefix, a.cursor, a.limit)
        )

    async def notes_delete(ctx: RequestContext, a: NotesDeleteArgs) -> DeleteResult | InputRequired:
        # A host that cannot show the form gets the form's own 'unavailable' sentence from
        # the core (2025-11-25) or -32021 (2026-07-28): nothing is deleted either way.
        notes = acting(ctx)
        bound = a.model_dump(mode="json", exclude_none=True)
        state = ctx.request_state
        if a.title is not None and state is None:
            await _indexed(ctx, lambda: notes.workspace_catalog(a.workspaceUri))
        if state is None:
            return await _call(lambda: deletes.ask(notes, bound))
        return await _call(lambda: deletes.resume(notes, bound, state, ctx.input_responses))

    async def history(ctx: RequestContext, a: NotesHistoryArgs) -> NotesHistoryResult:
        notes = acting(ctx)
        return await _call(lambda: notes_history(notes, a.uri, a.limit))

    async def restore(ctx: RequestContext, a: NotesRestoreArgs) -> NotesRestoreResult:
        notes = acting(ctx)
        return await _call(lambda: notes_restore(notes, a.uri, a.version, a.etag))

    return [
        Tool(
            name="workspaces_list",
            title="List workspaces",
            description="The notes workspaces you may use, with their file:// URI and your "
            "access (read, write or delete).",
            input_model=WorkspacesListArgs,
            output_model=WorkspacesListResult,
            annotations=_read_only("List workspaces"),
            handler=workspaces_list,
        ),
        Tool(
            name="notes_list",
            title="List notes",
            description="Notes in a workspace (optionally a folder or tag), in path order, "
            "with uri, title, size, modified time and tags. Paginated with cursor.",
            input_model=NotesListArgs,
            output_model=NotesListResult,
            annotations=_read_only("List notes"),
            handler=notes_list,
        ),
        Tool(
            name="notes_read",
            title="Read a note",
            description="A note's content (or a line range), title, etag, frontmatter, tags "
            "and links. Keep the etag to guard a later update or move.",
            input_model=NotesReadArgs,
            output_model=NotesReadResult,
            annotations=_read_only("Read a note"),
            handler=notes_read,
        ),
        Tool(
            name="notes_search",
            title="Search notes",
            description="Ranked full-text search of note titles, headings, paths, tags, "
            "frontmatter and content. Pass the user's question or its distinctive keywords as "
            "they are (any-word, best first: notes with all the words or with them in the "
            'title rank ahead); "quoted phrases" match in order, prefix* matches word starts; '
            "folder, tag and where narrow the scope. Each result has an excerpt with the "
            "matched words in **bold** and its line number.",
            input_model=NotesSearchArgs,
            output_model=NotesSearchResult,
            annotations=_read_only("Search notes"),
            handler=notes_search,
        ),
        Tool(
            name="notes_create",
            title="Create a note",
            description="Create a new note (.md, .markdown or .txt) at a relative path; "
            "refuses to overwrite an existing one.",
            input_model=NotesCreateArgs,
            output_model=WriteResult,
            annotations=ToolAnnotations(title="Create a note", destructive=False),
            handler=notes_create,
        ),
        Tool(
            name="notes_update",
            title="Update a note",
            description="Replace a note's content, or apply edits in order, atomically (all "
            "or none): exact text ({oldText, newText}), the section under a heading ({heading: "
            "'Projects > Shed', op: replace|append|prepend, text}; headings in code blocks do "
            "not count) or one frontmatter key ({frontmatterKey, op: set|remove, value}; the "
            "rest of the frontmatter is kept byte for byte). A missing or ambiguous heading is "
            "an error naming the candidates. Pass the etag from notes_read: if the note "
            "changed since, nothing is written.",
            input_model=NotesUpdateArgs,
            output_model=WriteResult,
            annotations=ToolAnnotations(title="Update a note", destructive=True),
            handler=notes_update,
        ),
        Tool(
            name="notes_move",
            title="Move a note",
            description="Move or rename a note within its workspace; never overwrites. With "
            "updateLinks (default true) every link that pointed to the note is rewritten to "
            "keep pointing to it, as are links to other notes that its new name would capture "
            "and its own relative links, each keeping its form (alias, #heading, extension or "
            "not, relative path); each rewritten note is an etag-checked atomic write, listed in "
            "linksUpdated; a note that could not be rewritten is listed in linksNotUpdated. A "
            f"move that would rewrite more than {MAX_LINK_REWRITES:,} notes is refused.",
            input_model=NotesMoveArgs,
            output_model=MoveResult,
            annotations=ToolAnnotations(title="Move a note", destructive=True),
            handler=notes_move,
        ),
        Tool(
            name="notes_links",
            title="Links of a note",
            description=LINKS_DESCRIPTION,
            input_model=NotesLinksArgs,
            output_model=NotesLinksResult,
            annotations=_read_only("Links of a note"),
            handler=notes_links,
        ),
        Tool(
            name="notes_tags",
            title="List tags",
            description="Tags in a workspace (optionally those starting with prefix), in order, "
            "each with how many notes carry it and how many carry it or a tag nested below it "
            "(a/b is below a). Paginated with cursor.",
            input_model=NotesTagsArgs,
            output_model=NotesTagsResult,
            annotations=_read_only("List tags"),
            handler=notes_tags,
        ),
        Tool(
            name="notes_delete",
            title="Delete a note",
            description="Delete a note by title (with workspaceUri) or by uri. Always asks the "
            "person to confirm in a form; nothing is deleted without their answer.",
            input_model=NotesDeleteArgs,
            output_model=DeleteResult,
            annotations=ToolAnnotations(title="Delete a note", destructive=True),
            handler=notes_delete,
        ),
        Tool(
            name="notes_history",
            title="A note's history",
            description="The versions of a note that notes_update, notes_move, notes_delete "
            "and notes_restore replaced, newest first (version, time, etag, size, principal, "
            "tool). A deleted or moved note keeps its history under its old uri.",
            input_model=NotesHistoryArgs,
            output_model=NotesHistoryResult,
            annotations=_read_only("A note's history"),
            handler=history,
        ),
        Tool(
            name="notes_restore",
            title="Restore a version",
            description="Bring back a version from notes_history as a normal write. Over an "
            "existing note pass its current etag (nothing is written if it changed); what it "
            "replaces becomes a version too, so a restore can be undone. A deleted note is "
            "re-created at its old uri (without etag), never replacing anything.",
            input_model=NotesRestoreArgs,
            output_model=NotesRestoreResult,
            annotations=ToolAnnotations(title="Restore a version", destructive=True),
            handler=restore,
        ),
    ]
