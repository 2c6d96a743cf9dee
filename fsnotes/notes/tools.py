"""The notes tools: argument and result models, descriptors, and thin async handlers.

Tool and argument names are fixed (hosts script against them). Each argument model
generates the tool's ``inputSchema`` and validates its arguments; each result model
generates its ``outputSchema``. Handlers run the synchronous service in a worker thread so
that the protocol loop keeps serving other requests while a handler does file I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..protocol.registry import (
    InputRequired,
    RequestContext,
    Tool,
    ToolAnnotations,
    ToolError,
    ToolResult,
)
from ..security.consent import ConsentRefused
from ..security.grants import NotGranted
from .catalog import Catalog
from .confirm import DeleteFlow
from .indexer import until_indexed
from .service import (
    MAX_LIST_LIMIT,
    MAX_QUERY_CHARS,
    MAX_SEARCH_LIMIT,
    NotesService,
    ServiceError,
)


class _Args(BaseModel):
    # Unknown arguments are refused rather than ignored: a misspelt 'etag' must not turn a
    # guarded update into an unguarded one.
    model_config = ConfigDict(extra="forbid")


_WS = Field(
    default=None,
    description="The workspace's file:// URI from workspaces_list. May be omitted only when "
    "you have exactly one workspace.",
)


# --- arguments -----------------------------------------------------------------------------


class WorkspacesListArgs(_Args):
    pass


class NotesListArgs(_Args):
    workspaceUri: str | None = _WS
    folder: str | None = Field(
        default=None, description="Only notes below this folder (relative to the workspace)."
    )
    tag: str | None = Field(default=None, description="Only notes with this tag (without '#').")
    cursor: str | None = Field(default=None, description="nextCursor from a previous page.")
    limit: int | None = Field(default=None, ge=1, le=MAX_LIST_LIMIT, description="Page size.")


class NotesReadArgs(_Args):
    uri: str = Field(description="The note's file:// URI (from notes_list or notes_search).")
    startLine: int | None = Field(default=None, ge=1, description="First line (1-based).")
    endLine: int | None = Field(default=None, ge=1, description="Last line, inclusive.")


class NotesSearchArgs(_Args):
    workspaceUri: str | None = _WS
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Words to find, all of them (case and accents ignored, English word "
        'endings too: plan finds planned); "quoted phrase" for words in that order; prefix* '
        "for words starting with prefix. Nothing else is syntax.",
    )
    folder: str | None = Field(default=None, description="Only notes below this folder.")
    tag: str | None = Field(default=None, description="Only notes with this tag.")
    limit: int | None = Field(default=None, ge=1, le=MAX_SEARCH_LIMIT)


class NotesCreateArgs(_Args):
    workspaceUri: str | None = _WS
    path: str = Field(
        description="Relative path of the new note, e.g. 'projects/plan.md'. Missing folders "
        "are created; an existing note is never overwritten."
    )
    content: str = Field(description="The note's full text (Markdown).")


class Edit(_Args):
    oldText: str = Field(min_length=1, description="Exact text to replace; must occur once.")
    newText: str = Field(description="Replacement text.")


class NotesUpdateArgs(_Args):
    uri: str = Field(description="The note's file:// URI.")
    content: str | None = Field(default=None, description="The new full text (or use edits).")
    edits: list[Edit] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="Exact replacements applied in order (or use content).",
    )
    etag: str | None = Field(
        default=None,
        description="The etag from notes_read; if the note changed since, nothing is written.",
    )

    @model_validator(mode="after")
    def _one_of(self) -> NotesUpdateArgs:
        if (self.content is None) == (self.edits is None):
            raise ValueError("give exactly one of 'content' or 'edits'")
        return self


class NotesMoveArgs(_Args):
    uri: str = Field(description="The note's file:// URI.")
    newPath: str = Field(description="New relative path in the same workspace; never overwrites.")
    etag: str | None = Field(default=None, description="The etag from notes_read, to guard it.")


class NotesDeleteArgs(_Args):
    workspaceUri: str | None = _WS
    title: str | None = Field(
        default=None,
        min_length=1,
        description="Delete a note whose title contains this (case-insensitive); the person "
        "picks among the matches.",
    )
    uri: str | None = Field(default=None, description="Or: the exact note's file:// URI.")

    @model_validator(mode="after")
    def _one_of(self) -> NotesDeleteArgs:
        if (self.title is None) == (self.uri is None):
            raise ValueError("give exactly one of 'title' (with workspaceUri) or 'uri'")
        if self.uri is not None and self.workspaceUri is not None:
            raise ValueError(
                "'workspaceUri' goes with 'title'; a 'uri' already names its workspace"
            )
        return self


# --- results -------------------------------------------------------------------------------


class WorkspaceOut(BaseModel):
    uri: str
    name: str
    access: Literal["read", "write", "delete"]


class WorkspacesListResult(BaseModel):
    workspaces: list[WorkspaceOut]


class NoteSummary(BaseModel):
    uri: str
    path: str
    title: str
    size: int
    modified: str = Field(description="Last modification, ISO 8601 UTC.")
    tags: list[str]


class IndexInfo(BaseModel):
    complete: bool = Field(
        description="False while the workspace's first indexing runs: the answer then covers "
        "only the notes indexed so far."
    )
    indexedNotes: int = Field(description="Notes in the workspace's index.")
    skippedFolders: int = Field(
        description="Folders left out of the index: nested deeper than a note may be, or "
        "holding too many entries."
    )
    message: str | None = Field(default=None, description="Why the answer may be incomplete.")


class NotesListResult(BaseModel):
    notes: list[NoteSummary]
    nextCursor: str | None = None
    index: IndexInfo


class Link(BaseModel):
    type: Literal["wikilink", "markdown"]
    target: str


class NotesReadResult(BaseModel):
    uri: str
    path: str
    title: str
    etag: str = Field(description="Pass to notes_update/notes_move to guard against changes.")
    content: str
    startLine: int
    endLine: int
    totalLines: int
    frontmatter: dict[str, Any]
    tags: list[str]
    links: list[Link]
    size: int
    modified: str


class Snippet(BaseModel):
    line: int
    text: str


class SearchHit(BaseModel):
    uri: str
    path: str
    title: str
    score: float
    snippets: list[Snippet]


class NotesSearchResult(BaseModel):
    results: list[SearchHit]
    total: int = Field(description="How many notes matched (results holds the best 'limit').")
    rankedAll: bool = Field(
        description="False when more notes matched than are ranked one by one (the 2,000 "
        "most recently changed, plus the newest with every word in the title or path): "
        "the best of the rest may be missing; narrow the query, folder or tag."
    )
    scanned: int = Field(description="How many notes were searched (those in scope).")
    index: IndexInfo


class WriteResult(BaseModel):
    uri: str
    path: str
    etag: str
    size: int


class MoveResult(BaseModel):
    uri: str
    path: str
    previousUri: str
    etag: str


class DeleteResult(BaseModel):
    deleted: bool
    outcome: Literal["deleted", "declined", "cancelled", "not_confirmed"]
    message: str
    uri: str | None = None
    path: str | None = None


# --- handlers ------------------------------------------------------------------------------


async def _run(fn: Callable[[], dict[str, Any]], model: type[BaseModel]) -> ToolResult:
    try:
        body = await anyio.to_thread.run_sync(fn)
    except (ServiceError, NotGranted) as exc:
        raise ToolError(str(exc)) from None
    return ToolResult(structured=model.model_validate(body))


def _read_only(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only=True, destructive=False, idempotent=True)


async def _indexed(ctx: RequestContext, find: Callable[[], Catalog]) -> None:
    """Before a query: give the workspace's first indexing a bounded time to finish."""
    try:
        catalog = await anyio.to_thread.run_sync(find)
    except (ServiceError, NotGranted):
        return  # the query reports the same problem as its result
    await until_indexed(catalog, ctx.report_progress)


def _hinted(ctx: RequestContext) -> bool:
    """Client roots may choose the default workspace only within a legacy session."""
    return ctx.era == "legacy"


def build_tools(service: NotesService, deletes: DeleteFlow) -> list[Tool]:
    """The notes tools over one service (one principal's view of its workspaces)."""

    async def workspaces_list(ctx: RequestContext, args: BaseModel) -> ToolResult:
        return await _run(lambda: {"workspaces": service.workspaces_list()}, WorkspacesListResult)

    async def notes_list(ctx: RequestContext, args: BaseModel) -> ToolResult:
        a = NotesListArgs.model_validate(args)
        await _indexed(ctx, lambda: service.workspace_catalog(a.workspaceUri, hinted=_hinted(ctx)))
        return await _run(
            lambda: service.notes_list(
                a.workspaceUri, a.folder, a.tag, a.cursor, a.limit, hinted=_hinted(ctx)
            ),
            NotesListResult,
        )

    async def notes_read(ctx: RequestContext, args: BaseModel) -> ToolResult:
        a = NotesReadArgs.model_validate(args)
        return await _run(
            lambda: service.notes_read(a.uri, a.startLine, a.endLine), NotesReadResult
        )

    async def notes_search(ctx: RequestContext, args: BaseModel) -> ToolResult:
        a = NotesSearchArgs.model_validate(args)
        await _indexed(ctx, lambda: service.workspace_catalog(a.workspaceUri, hinted=_hinted(ctx)))
        return await _run(
            lambda: service.notes_search(
                a.workspaceUri, a.query, a.folder, a.tag, a.limit, hinted=_hinted(ctx)
            ),
            NotesSearchResult,
        )

    async def notes_create(ctx: RequestContext, args: BaseModel) -> ToolResult:
        a = NotesCreateArgs.model_validate(args)
        return await _run(
            lambda: service.notes_create(a.workspaceUri, a.path, a.content, hinted=_hinted(ctx)),
            WriteResult,
        )

    async def notes_update(ctx: RequestContext, args: BaseModel) -> ToolResult:
        a = NotesUpdateArgs.model_validate(args)
        edits = [(e.oldText, e.newText) for e in a.edits] if a.edits is not None else None
        return await _run(
            lambda: service.notes_update(a.uri, a.content, edits, a.etag), WriteResult
        )

    async def notes_move(ctx: RequestContext, args: BaseModel) -> ToolResult:
        a = NotesMoveArgs.model_validate(args)
        return await _run(lambda: service.notes_move(a.uri, a.newPath, a.etag), MoveResult)

    async def notes_delete(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
        a = NotesDeleteArgs.model_validate(args)
        if ctx.era == "legacy" and not ctx.supports_elicitation("form"):
            # The modern era answers -32021 (the core does that for an InputRequired the
            # request's capabilities cannot carry); a legacy host gets a sentence instead.
            raise ToolError(
                "This host cannot ask you for confirmation (it did not declare form "
                "elicitation), and fsnotes deletes nothing without a person's confirmation; "
                "delete the note in your file manager instead."
            )
        bound = a.model_dump(mode="json", exclude_none=True)
        state = ctx.request_state
        if a.title is not None and state is None:
            await _indexed(
                ctx, lambda: service.workspace_catalog(a.workspaceUri, hinted=_hinted(ctx))
            )

        def step() -> InputRequired | dict[str, Any]:
            if state is None:
                return deletes.ask(bound, hinted=_hinted(ctx))
            return deletes.resume(bound, state, ctx.input_responses, hinted=_hinted(ctx))

        try:
            outcome = await anyio.to_thread.run_sync(step)
        except (ServiceError, NotGranted, ConsentRefused) as exc:
            raise ToolError(str(exc)) from None
        if isinstance(outcome, InputRequired):
            return outcome
        return ToolResult(structured=DeleteResult.model_validate(outcome))

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
            'frontmatter and content. Query: words are ANDed; "quoted phrases" match in order; '
            "prefix* matches word starts; case, accents and English word endings are ignored; "
            "folder and tag narrow the scope. Each result has an excerpt with the matched words "
            "in **bold** and its line number.",
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
            description="Replace a note's content or apply exact text edits, atomically. Pass "
            "the etag from notes_read: if the note changed since, nothing is written.",
            input_model=NotesUpdateArgs,
            output_model=WriteResult,
            annotations=ToolAnnotations(title="Update a note", destructive=True),
            handler=notes_update,
        ),
        Tool(
            name="notes_move",
            title="Move a note",
            description="Move or rename a note within its workspace; never overwrites.",
            input_model=NotesMoveArgs,
            output_model=MoveResult,
            annotations=ToolAnnotations(title="Move a note", destructive=True),
            handler=notes_move,
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
    ]
