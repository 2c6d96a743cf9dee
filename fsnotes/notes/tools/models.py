"""The notes tools' argument and result models: each shape written once.

An argument model generates its tool's ``inputSchema`` and validates the call's arguments
(the protocol core does that, then hands the handler the model); a result model generates
the ``outputSchema``, and the service builds and returns it. Field names are the wire names
(hosts script against them).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from fsnotes.notes.text import edits, frontedit
from fsnotes.notes.text.where import MAX_WHERE_KEYS, MAX_WHERE_VALUE_CHARS

DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 500  # a page of summaries stays well under a megabyte of JSON
DEFAULT_SEARCH_LIMIT = 10
MAX_SEARCH_LIMIT = 50  # results the model can actually read in one answer
# A question pasted whole (a paragraph, a long keyword list) is a query; past the term
# bound the search keeps the most distinctive terms, so length costs only the parse.
MAX_QUERY_CHARS = 4000
MAX_EDITS = 100  # edits in one notes_update: more is a rewrite (send content instead)
# A heading path names a few headings, not a paragraph.
MAX_HEADING_PATH_CHARS = 1_000


class _Args(BaseModel):
    # Unknown arguments are refused rather than ignored: a misspelt 'etag' must not turn a
    # guarded update into an unguarded one.
    model_config = ConfigDict(extra="forbid")


_WS = Field(
    default=None,
    description="The workspace's file:// URI from workspaces_list. May be omitted only when "
    "you have exactly one workspace.",
)


WhereValue = str | int | float | bool | None


def _check_where(where: dict[str, WhereValue] | None) -> dict[str, WhereValue] | None:
    for key, value in (where or {}).items():
        if not key:
            raise ValueError("a where key must not be empty")
        if isinstance(value, str) and len(value) > MAX_WHERE_VALUE_CHARS:
            raise ValueError(f"where values are at most {MAX_WHERE_VALUE_CHARS} characters")
    return where


_WHERE = Field(
    default=None,
    max_length=MAX_WHERE_KEYS,
    description="Only notes whose frontmatter has each of these keys with this value (for a "
    'list, among its items), e.g. {"status": "done"}. Keys match exactly; values '
    'case-insensitively, read as frontmatter is (yes/true are the same boolean, null or "" '
    "an empty value).",
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
    where: dict[str, WhereValue] | None = _WHERE
    cursor: str | None = Field(default=None, description="nextCursor from a previous page.")
    limit: int | None = Field(default=None, ge=1, le=MAX_LIST_LIMIT, description="Page size.")

    _where = field_validator("where")(_check_where)


class NotesReadArgs(_Args):
    uri: str = Field(description="The note's file:// URI (from notes_list or notes_search).")
    startLine: int | None = Field(default=None, ge=1, description="First line (1-based).")
    endLine: int | None = Field(default=None, ge=1, description="Last line, inclusive.")


class NotesSearchArgs(_Args):
    workspaceUri: str | None = _WS
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Words to find: the question itself or its keywords. Notes holding any "
        "of them match, those holding all of them (or in their title) first; very common "
        "words count for little (case and accents ignored, English word endings too: plan "
        'finds planned); "quoted phrase" for words in that order; prefix* for words '
        "starting with prefix. Nothing else is syntax.",
    )
    folder: str | None = Field(default=None, description="Only notes below this folder.")
    tag: str | None = Field(default=None, description="Only notes with this tag.")
    where: dict[str, WhereValue] | None = _WHERE
    limit: int | None = Field(default=None, ge=1, le=MAX_SEARCH_LIMIT)

    _where = field_validator("where")(_check_where)


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

    def as_op(self) -> edits.TextEdit:
        return edits.TextEdit(self.oldText, self.newText)


class SectionEditArgs(_Args):
    heading: str = Field(
        min_length=1,
        max_length=MAX_HEADING_PATH_CHARS,
        description="The heading whose section to edit, optionally after its parent headings "
        "and '>': 'Shed' or 'Projects > Shed' (case ignored). The section runs to the next "
        "heading of the same or a higher level.",
    )
    op: Literal["replace", "append", "prepend"] = Field(
        description="replace the section's content (its sub-sections included; the heading "
        "stays), append after its last line, or prepend before its first line."
    )
    text: str = Field(description="The Markdown to write (whole lines).")

    def as_op(self) -> edits.SectionEdit:
        return edits.SectionEdit(self.heading, self.op, self.text)


class FrontmatterEditArgs(_Args):
    frontmatterKey: str = Field(
        min_length=1,
        max_length=frontedit.MAX_KEY_CHARS,
        description="The frontmatter key to set or remove; every other key stays byte for byte.",
    )
    op: Literal["set", "remove"] = Field(
        description="set (adds the key, and the frontmatter if the note has none) or remove."
    )
    value: str | int | float | bool | list[str | int | float | bool] | None = Field(
        default=None,
        description="For set: a string, number, true/false, null or a list of those.",
    )

    @model_validator(mode="after")
    def _value_for_set(self) -> FrontmatterEditArgs:
        if self.op == "set" and "value" not in self.model_fields_set:
            raise ValueError("'set' needs a 'value' (null to set it empty)")
        if self.op == "remove" and "value" in self.model_fields_set:
            raise ValueError("'remove' takes no 'value'")
        return self

    def as_op(self) -> edits.FrontmatterEdit:
        return edits.FrontmatterEdit(self.frontmatterKey, self.op, self.value)


def _edit_kind(value: Any) -> str | None:
    """Which kind of edit an item is, by the field that names what it addresses."""
    if isinstance(value, dict):
        for field, kind in (("oldText", "text"), ("heading", "section")):
            if field in value:
                return kind
        return "frontmatter" if "frontmatterKey" in value else None
    kinds: dict[type, str] = {Edit: "text", SectionEditArgs: "section"}
    kinds[FrontmatterEditArgs] = "frontmatter"
    return kinds.get(type(value))


AnyEdit = Annotated[
    Annotated[Edit, Tag("text")]
    | Annotated[SectionEditArgs, Tag("section")]
    | Annotated[FrontmatterEditArgs, Tag("frontmatter")],
    Discriminator(
        _edit_kind,
        custom_error_type="edit_kind",
        custom_error_message="each edit needs 'oldText' (exact text), 'heading' (a section) "
        "or 'frontmatterKey' (a frontmatter key)",
    ),
]


class NotesUpdateArgs(_Args):
    uri: str = Field(description="The note's file:// URI.")
    content: str | None = Field(default=None, description="The new full text (or use edits).")
    edits: list[AnyEdit] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_EDITS,
        description="Edits applied in order, all or none (or use content). Each is one of: "
        "{oldText, newText} (exact text, must occur once); {heading, op: replace|append|"
        "prepend, text} (the section under a heading); {frontmatterKey, op: set|remove, "
        "value} (one frontmatter key).",
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
    updateLinks: bool = Field(
        default=True,
        description="Rewrite the links in other notes (and the note's own relative links) so "
        "they keep pointing to the same notes (default true).",
    )


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


class SearchHitOut(BaseModel):
    # The wire shape of the index's SearchHit; its schema keeps the title it always had.
    model_config = ConfigDict(title="SearchHit")

    uri: str
    path: str
    title: str
    score: float
    allTerms: bool = Field(
        description="True when the note holds every searched term (those in 'dropped' and "
        "'common' aside)."
    )
    snippets: list[Snippet]


class NotesSearchResult(BaseModel):
    results: list[SearchHitOut]
    total: int = Field(
        description="How many notes matched (results holds the best 'limit'), counted up to 10,000."
    )
    totalExact: bool = Field(description="False when more than 'total' notes matched.")
    rankedAll: bool = Field(
        description="False when not every match was ranked one by one (only the rarest "
        "terms' notes, up to 4,000, plus the newest with every term or with them in the "
        "title or path): the best of the rest may be missing; narrow the query, folder or tag."
    )
    dropped: list[str] = Field(
        description="Terms not searched: the query had more than 32, and these were the "
        "least distinctive (found in the most notes). No note matches by them alone; they "
        "still help order a question's best matches."
    )
    common: list[str] = Field(
        description="Terms found in so many notes that they neither select nor rank notes."
    )
    scanned: int = Field(description="How many notes were searched (those in scope).")
    index: IndexInfo


class WriteResult(BaseModel):
    uri: str
    path: str
    etag: str
    size: int


class LinkRewrite(BaseModel):
    uri: str
    path: str
    links: int = Field(description="Links rewritten in this note.")
    etag: str = Field(description="The note's etag after the rewrite.")


class LinkSkip(BaseModel):
    uri: str
    path: str
    reason: str = Field(description="Why this note's links were not (all) rewritten.")


class MoveResult(BaseModel):
    uri: str
    path: str
    previousUri: str
    etag: str = Field(description="The moved note's etag (after its own links were rewritten).")
    linksUpdated: list[LinkRewrite] = Field(
        default_factory=list, description="Every note whose links the move rewrote."
    )
    linksNotUpdated: list[LinkSkip] = Field(
        default_factory=list,
        description="Notes with links to rewrite that could not be (changed meanwhile, too "
        "large, unreadable): fix them by hand.",
    )
    resumed: bool = Field(
        default=False,
        description="True when this call finished a move that had been interrupted (the "
        "note was already at its new path): only the links still to rewrite were.",
    )


class DeleteResult(BaseModel):
    deleted: bool
    outcome: Literal["deleted", "declined", "cancelled", "not_confirmed"]
    message: str
    uri: str | None = None
    path: str | None = None


# --- history ---------------------------------------------------------------------------------

DEFAULT_HISTORY_LIMIT = 20
MAX_HISTORY_LIMIT = 100  # versions the model can weigh in one answer


class NotesHistoryArgs(_Args):
    uri: str = Field(
        description="The note's file:// URI; a note that was deleted or moved away keeps its "
        "history under its old URI."
    )
    limit: int | None = Field(default=None, ge=1, le=MAX_HISTORY_LIMIT, description="Versions.")


class NotesRestoreArgs(_Args):
    uri: str = Field(description="The note's file:// URI (its old URI for a deleted note).")
    version: int = Field(ge=1, description="The version's number from notes_history.")
    etag: str | None = Field(
        default=None,
        description="Required when the note exists: its current etag (currentEtag from "
        "notes_history, or from notes_read). Leave it out to re-create a deleted note.",
    )


class HistoryVersion(BaseModel):
    version: int = Field(description="Pass to notes_restore.")
    time: str = Field(description="When a tool replaced these bytes, ISO 8601 UTC.")
    etag: str = Field(description="SHA-256 of this version's content.")
    size: int
    principal: str = Field(description="Who made the change that replaced this version.")
    tool: str = Field(
        description="The change that replaced it: notes_update, notes_move, notes_delete or "
        "notes_restore."
    )
    movedTo: str | None = Field(default=None, description="notes_move: where the note went.")


class NotesHistoryResult(BaseModel):
    uri: str
    path: str
    exists: bool = Field(description="Whether a note is at this path now.")
    currentEtag: str | None = Field(
        default=None, description="The etag of the note there now (pass it to notes_restore)."
    )
    versions: list[HistoryVersion] = Field(description="Newest first.")
    total: int = Field(description="How many versions are kept in all.")


class NotesRestoreResult(BaseModel):
    uri: str
    path: str
    etag: str = Field(description="The note's etag now.")
    size: int
    restored: int = Field(description="The version brought back.")
    created: bool = Field(description="True when the note did not exist and was re-created.")
    keptVersion: int | None = Field(
        default=None,
        description="The version that now holds what the restore replaced (restore it to "
        "undo this one).",
    )


# --- handlers ------------------------------------------------------------------------------
