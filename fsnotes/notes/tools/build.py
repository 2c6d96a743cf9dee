"""The notes tools, each declared by its function (:mod:`fsnotes.notes.tools.declare`).

Tool and argument names are fixed (hosts script against them); their argument and result
models are :mod:`fsnotes.notes.tools.models`. Each function receives the call (the request's
view of the notes) and its validated argument model, and returns the service's result model
(or, for a delete, the question to ask). A docstring here is what hosts and models read: its
first paragraph is the tool's title, the rest its description.
"""

from __future__ import annotations

from typing import Any

from fsnotes.notes.index.catalog import Catalog
from fsnotes.notes.tools import linkservice, restore, resume
from fsnotes.notes.tools.confirm import DeleteFlow
from fsnotes.notes.tools.declare import Toolbox, ToolCall
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
from fsnotes.notes.tools.service import NotesService
from fsnotes.protocol.registry import InputRequired, Tool, ToolAnnotations
from fsnotes.security.grants import Access

# The hints each kind of tool gives the host (untrusted; the title is put in per tool).
READS = ToolAnnotations(read_only=True, destructive=False, idempotent=True)
CREATES = ToolAnnotations(destructive=False)
CHANGES = ToolAnnotations(destructive=True)

# A move that rewrites more notes than this becomes a task (when the client opted in to
# them): measured at 10 to 12 ms a note (MAX_LINK_REWRITES' figures), and three to five
# times that on a loaded machine, 100 notes take 1 to 6 s, past what a client should wait on
# one call without a word; fewer finish about as fast as any other write.
MOVE_TASK_REWRITES = 100

TOOLS = Toolbox()


def _workspace_index(call: ToolCall, a: Any) -> Catalog | None:
    """A query of a workspace waits for that workspace's index."""
    return call.notes.workspace_catalog(a.workspaceUri)


@TOOLS.tool(READS)
def workspaces_list(call: ToolCall, a: WorkspacesListArgs) -> WorkspacesListResult:
    """List workspaces

    The notes workspaces you may use, with their file:// URI and your access (read, write or
    delete).
    """
    return call.notes.workspaces_list()


@TOOLS.tool(READS, waits=_workspace_index)
def notes_list(call: ToolCall, a: NotesListArgs) -> NotesListResult:
    """List notes

    Notes in a workspace (optionally a folder or tag), in path order, with uri, title, size,
    modified time and tags. Paginated with cursor.
    """
    return call.notes.notes_list(a.workspaceUri, a.folder, a.tag, a.cursor, a.limit, a.where)


@TOOLS.tool(READS)
def notes_read(call: ToolCall, a: NotesReadArgs) -> NotesReadResult:
    """Read a note

    A note's content (or a line range), title, etag, frontmatter, tags and links. Keep the
    etag to guard a later update or move.
    """
    return call.notes.notes_read(a.uri, a.startLine, a.endLine)


@TOOLS.tool(READS, waits=_workspace_index)
def notes_search(call: ToolCall, a: NotesSearchArgs) -> NotesSearchResult:
    """Search notes

    Ranked full-text search of note titles, headings, paths, tags, frontmatter and content.
    Pass the user's question or its distinctive keywords as they are (any-word, best first:
    notes with all the words or with them in the title rank ahead); "quoted phrases" match in
    order, prefix* matches word starts; folder, tag and where narrow the scope. Each result
    has an excerpt with the matched words in **bold** and its line number.
    """
    return call.notes.notes_search(a.workspaceUri, a.query, a.folder, a.tag, a.limit, a.where)


@TOOLS.tool(CREATES)
def notes_create(call: ToolCall, a: NotesCreateArgs) -> WriteResult:
    """Create a note

    Create a new note (.md, .markdown or .txt) at a relative path; refuses to overwrite an
    existing one.
    """
    return call.notes.notes_create(a.workspaceUri, a.path, a.content)


@TOOLS.tool(CHANGES)
def notes_update(call: ToolCall, a: NotesUpdateArgs) -> WriteResult:
    """Update a note

    Replace a note's content, or apply edits in order, atomically (all or none): exact text
    ({oldText, newText}), the section under a heading ({heading: 'Projects > Shed', op:
    replace|append|prepend, text}; headings in code blocks do not count) or one frontmatter
    key ({frontmatterKey, op: set|remove, value}; the rest of the frontmatter is kept byte for
    byte). A missing or ambiguous heading is an error naming the candidates. Pass the etag
    from notes_read: if the note changed since, nothing is written.
    """
    edits = [e.as_op() for e in a.edits] if a.edits is not None else None
    return call.notes.notes_update(a.uri, a.content, edits, a.etag)


def _links_index(call: ToolCall, a: Any) -> Catalog | None:
    """The links to rewrite are found in the index: let it finish first."""
    return linkservice.catalog_check(call.notes, a.uri) if a.updateLinks else None


@TOOLS.tool(CHANGES, waits=_links_index, facts={"MAX_LINK_REWRITES": f"{MAX_LINK_REWRITES:,}"})
def notes_move(call: ToolCall, a: NotesMoveArgs) -> MoveResult:
    """Move a note

    Move or rename a note within its workspace; never overwrites. With updateLinks (default
    true) every link that pointed to the note is rewritten to keep pointing to it, as are
    links to other notes that its new name would capture and its own relative links, each
    keeping its form (alias, #heading, extension or not, relative path); each rewritten note
    is an etag-checked atomic write, listed in linksUpdated; a note that could not be
    rewritten is listed in linksNotUpdated. A move that would rewrite more than
    {MAX_LINK_REWRITES} notes is refused.
    """
    notes = call.notes
    if not a.updateLinks:
        return notes.notes_move(a.uri, a.newPath, a.etag, False)
    # The same move called again after a server was killed during its link update: the
    # note is already at newPath, and the move journal says which links are left.
    resumed = resume.interrupted_move(notes, a.uri, a.newPath)
    plan = resumed if resumed is not None else notes.plan_move(a.uri, a.newPath)
    rewrites = len(plan.linkers) + (0 if plan.own_done else 1)
    if rewrites > MOVE_TASK_REWRITES:
        doing = "Finishing an interrupted move" if resumed is not None else "Moving the note"
        call.long(f"{doing}: {rewrites:,} notes to rewrite")

    def progress(done: int, total: int) -> None:
        call.progress(done, total, f"Rewrote links in {done:,} of {total:,} notes")

    if resumed is not None:
        return resume.finish_move(
            notes, a.uri, a.newPath, resumed, progress=progress, stop=call.stopped
        )
    return notes.notes_move(
        a.uri, a.newPath, a.etag, True, plan=plan, progress=progress, stop=call.stopped
    )


@TOOLS.tool(READS, waits=lambda call, a: linkservice.catalog_check(call.notes, a.uri, Access.READ))
def notes_links(call: ToolCall, a: NotesLinksArgs) -> NotesLinksResult:
    """Links of a note

    A note's outgoing links (wikilinks [[x]], [[x#heading|alias]], embeds ![[x]], Markdown
    links [t](path) and images), each resolved to a note or marked broken, other (a file that
    is not a note) or outside; and its backlinks (the notes whose links resolve to it).
    Wikilinks are names, case-insensitive: [[Name]] matches notes whose file name without
    extension is Name, [[a/Name]] those whose path ends with a/Name, [[Name.md]] the extension
    too; of several matches the shortest path wins, then the first in path order (so the
    exact path from the workspace root wins). Markdown links (and [[./x]], [[../x]]) are
    paths relative to the linking note, exact, the extension optional. Link syntax in code
    (fenced or indented code blocks, code spans) is text, not a link.
    """
    return linkservice.notes_links(call.notes, a.uri)


@TOOLS.tool(READS, waits=_workspace_index)
def notes_tags(call: ToolCall, a: NotesTagsArgs) -> NotesTagsResult:
    """List tags

    Tags in a workspace (optionally those starting with prefix), in order, each with how many
    notes carry it and how many carry it or a tag nested below it (a/b is below a).
    Paginated with cursor.
    """
    return linkservice.notes_tags(call.notes, a.workspaceUri, a.prefix, a.cursor, a.limit)


def _delete_index(call: ToolCall, a: Any) -> Catalog | None:
    """A first call by title looks the title up in the index (a retry reads the sealed
    candidates' files, not the index)."""
    return _workspace_index(call, a) if a.title is not None and call.state is None else None


@TOOLS.tool(CHANGES, waits=_delete_index)
def notes_delete(call: ToolCall, a: NotesDeleteArgs) -> DeleteResult | InputRequired:
    """Delete a note

    Delete a note by title (with workspaceUri) or by uri. Always asks the person to confirm
    in a form; nothing is deleted without their answer.
    """
    # A host that cannot show the form gets the form's own 'unavailable' sentence from the
    # core (2025-11-25) or -32021 (2026-07-28): nothing is deleted either way.
    if call.state is None:
        return call.deletes.ask(call.notes, a)
    return call.deletes.resume(call.notes, a, call.state, call.answers)


@TOOLS.tool(READS)
def notes_history(call: ToolCall, a: NotesHistoryArgs) -> NotesHistoryResult:
    """A note's history

    The versions of a note that notes_update, notes_move, notes_delete and notes_restore
    replaced, newest first (version, time, etag, size, principal, tool). A deleted or moved
    note keeps its history under its old uri.
    """
    return restore.notes_history(call.notes, a.uri, a.limit)


@TOOLS.tool(CHANGES)
def notes_restore(call: ToolCall, a: NotesRestoreArgs) -> NotesRestoreResult:
    """Restore a version

    Bring back a version from notes_history as a normal write. Over an existing note pass its
    current etag (nothing is written if it changed); what it replaces becomes a version too,
    so a restore can be undone. A deleted note is re-created at its old uri (without etag),
    never replacing anything.
    """
    return restore.notes_restore(call.notes, a.uri, a.version, a.etag)


def build_tools(service: NotesService, deletes: DeleteFlow) -> list[Tool[Any, Any]]:
    """The notes tools, bound to the server's service and delete flow.

    Every one may become an MCP task (2026-07-28, for a client that opted in): by measured
    duration (still running after limits.TASK_AFTER_S), or at once when it knows it will be
    long: a move rewriting more than MOVE_TASK_REWRITES notes, a query that must wait for
    the workspace's index to be built (docs/tasks.md)."""
    return TOOLS.bound(service, deletes)
