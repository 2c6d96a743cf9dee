"""Argument and result models of notes_links and notes_tags (as fsnotes.notes.tools.models)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from fsnotes.notes.index.linkgraph import MAX_TAGS_LIMIT
from fsnotes.notes.tools.models import _WS, IndexInfo, _Args


class NotesLinksArgs(_Args):
    uri: str = Field(description="The note's file:// URI.")


LinkStatus = Literal["note", "broken", "other", "outside"]


class OutgoingLink(BaseModel):
    type: Literal["wikilink", "markdown"]
    embed: bool = Field(description="![[...]] or ![...](...): shown inside the note.")
    target: str = Field(description="The target as written (without #heading or |alias).")
    heading: str | None = Field(default=None, description="The #heading (or fragment) part.")
    status: LinkStatus = Field(
        description="note: resolved (uri, path); broken: no note matches; other: a file "
        "that is not a note (an image, a PDF: not checked); outside: leaves the workspace."
    )
    uri: str | None = Field(default=None, description="The note it resolves to.")
    path: str | None = Field(
        default=None,
        description="The note's path, or for 'other' and 'broken' path links the path named.",
    )
    count: int = Field(description="How often this link occurs in the note.")


class Backlink(BaseModel):
    uri: str
    path: str
    title: str
    links: int = Field(description="Distinct links in that note that resolve to this one.")


class NotesLinksResult(BaseModel):
    uri: str
    path: str
    outgoing: list[OutgoingLink]
    outgoingTotal: int = Field(description="Distinct outgoing links (outgoing holds at most 500).")
    backlinks: list[Backlink] = Field(description="Notes linking here, in path order.")
    backlinksTotal: int = Field(description="Notes linking here (backlinks holds at most 500).")
    index: IndexInfo


class NotesTagsArgs(_Args):
    workspaceUri: str | None = _WS
    prefix: str | None = Field(
        default=None, description="Only tags starting with this (case-insensitive, no '#')."
    )
    cursor: str | None = Field(default=None, description="nextCursor from a previous page.")
    limit: int | None = Field(default=None, ge=1, le=MAX_TAGS_LIMIT, description="Page size.")


class TagOut(BaseModel):
    tag: str = Field(description="The tag, case-folded (tags match case-insensitively).")
    notes: int = Field(description="Notes that carry this tag itself.")
    withNested: int = Field(
        description="Notes that carry it or a tag nested below it (a/b is below a): what "
        "the tag filter of notes_list and notes_search finds."
    )


class NotesTagsResult(BaseModel):
    tags: list[TagOut]
    total: int = Field(description="Distinct tags that start with the prefix.")
    nextCursor: str | None = None
    index: IndexInfo
