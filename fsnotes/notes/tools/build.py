"""The notes tools: descriptors and thin async handlers over the service.

Tool and argument names are fixed (hosts script against them); their argument and result
models are :mod:`fsnotes.notes.tools.models`. A handler receives its validated argument model
and returns the service's result model (or, for a delete, the question to ask). Handlers run
the synchronous service in a worker thread so that the protocol loop keeps serving other
requests while a handler does file I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from fsnotes.notes.index.catalog import Catalog, CatalogUnavailable
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

# A move that rewrites more notes than this becomes a task (when the client opted in to
# them): measured at 10 to 12 ms a note (MAX_LINK_REWRITES' figures), and three to five
# times that on a loaded machine, 100 notes take 1 to 6 s, past what a client should wait on
# one call without a word; fewer finish about as fast as any other write.
MOVE_TASK_REWRITES = 100
# How often a long call's progress is reported: a status message at most this stale, and a
# few notifications a second at most.
PROGRESS_EVERY_S = 0.25

LINKS_DESCRIPTION = (
    "A note's outgoing links (wikilinks [[x]], [[x#heading|alias]], embeds ![[x]], Markdown "
    "links [t](path) and images), each resolved to a note or marked broken, other (a file "
    "that is not a note) or outside; and its backlinks (the notes whose links resolve to it). "
    "Wikilinks are names, case-insensitive: [[Name]] matches notes whose file name without "
    "extension is Name, [[a/Name]] those whose path ends with a/Name, [[Name.md]] the extension "
    "too; of several matches the shortest path wins, then the first in path order (so the exact "
    "path from the workspace root wins). Markdown links (and [[./x]], [[../x]]) are paths "
    "relative to the linking note, exact, the extension optional."
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
    """Before a query: give the workspace's first indexing a bounded time to finish. A wait
    for a build is long: the call becomes a task then (when the client opted in to them)."""
    try:
        catalog = await anyio.to_thread.run_sync(find)
    except (ServiceError, NotGranted):
        return  # the query reports the same problem as its result
    try:
        building = not (await anyio.to_thread.run_sync(catalog.status)).complete
    except CatalogUnavailable:
        building = False  # the query itself says why
    if building:
        await ctx.run_as_task("Waiting for the workspace's index to be built")
    await until_indexed(catalog, ctx.report_progress)


async def _reporting(
    ctx: RequestContext,
    work: Callable[[Callable[[int, int], None], Callable[[], bool]], T],
    describe: Callable[[int, int], str],
) -> T:
    """``work(progress, stop)`` in a worker thread, its progress reported every
    PROGRESS_EVERY_S (notifications/progress, and a task's status message); a cancel of
    this call makes ``stop()`` true, so the work ends at its next step instead of running
    to the end unseen."""
    reached = [0, 0]
    stopping = threading.Event()

    def progress(done: int, total: int) -> None:
        reached[:] = [done, total]  # one list assignment: safe to read from the loop

    async def report() -> None:
        shown = 0
        try:
            while True:
                await anyio.sleep(PROGRESS_EVERY_S)
                done, total = reached
                if done > shown:
                    shown = done
                    await ctx.report_progress(done, total, describe(done, total))
        finally:
            stopping.set()  # cancelled: the call ended, or was cancelled

    failed: list[Exception] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(report)
        try:
            result = await _call(lambda: work(progress, stopping.is_set))
        except Exception as exc:
            # Raised below, outside the group, as itself (a tool error stays a tool error,
            # not an exception group).
            failed.append(exc)
        else:
            # A thread is not interrupted: the cancel waited for it. It is raised here, so
            # a cancelled call's partial result is never reported as its result.
            await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return result


def build_tools(service: NotesService, deletes: DeleteFlow) -> list[Tool[Any, Any]]:
    """The notes tools. Each call acts as the principal its transport named, with its
    session's roots as hints (``ctx.roots``; None for a stateless request).

    Every one may become an MCP task (2026-07-28, for a client that opted in): by measured
    duration (still running after limits.TASK_AFTER_S), or at once when it knows it will be
    long: a move rewriting more than MOVE_TASK_REWRITES notes, a query that must wait for
    the workspace's index to be built (docs/tools.md, "Long calls as tasks")."""

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
        if not a.updateLinks:
            return await _call(lambda: notes.notes_move(a.uri, a.newPath, a.etag, False))
        # The links to rewrite are found in the index: let it finish first.
        await _indexed(ctx, lambda: linkservice.catalog_check(notes, a.uri))
        plan = await _call(lambda: notes.plan_move(a.uri, a.newPath))
        rewrites = 1 + len(plan.linkers)
        if rewrites > MOVE_TASK_REWRITES:
            await ctx.run_as_task(f"Moving the note: {rewrites:,} notes to rewrite")
        return await _reporting(
            ctx,
            lambda progress, stop: notes.notes_move(
                a.uri, a.newPath, a.etag, True, plan=plan, progress=progress, stop=stop
            ),
            lambda done, total: f"Rewrote links in {done:,} of {total:,} notes",
        )

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
            task_support="optional",
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
            task_support="optional",
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
            task_support="optional",
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
            task_support="optional",
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
            task_support="optional",
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
            task_support="optional",
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
            task_support="optional",
        ),
        Tool(
            name="notes_links",
            title="Links of a note",
            description=LINKS_DESCRIPTION,
            input_model=NotesLinksArgs,
            output_model=NotesLinksResult,
            annotations=_read_only("Links of a note"),
            handler=notes_links,
            task_support="optional",
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
            task_support="optional",
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
            task_support="optional",
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
            task_support="optional",
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
            task_support="optional",
        ),
    ]
