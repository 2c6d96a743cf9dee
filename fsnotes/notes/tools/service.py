"""The notes domain behind the tools: authorize, contain, then act through the store.

:class:`NotesService` holds what every request shares and knows no principal;
:meth:`NotesService.acting_for` gives one request's view, :class:`Notes`, for the principal
its transport named, with that request's :class:`~fsnotes.security.grants.Scope` (the grants
consulted once, when the request starts). Every public method of :class:`Notes` starts with
authorization against that scope, then turns the caller's URI or relative path into
components with layer 1 (:mod:`sandbox.uri`), and only then touches a workspace through its
:class:`~fsnotes.notes.store.NoteStore`. Every mutation runs inside :meth:`Notes.audited`
(the audit log's intent before it, its outcome after). Methods are synchronous (they do
file I/O); the async tool handlers run them in a worker thread.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fsnotes.notes.history import History, HistoryUnavailable, Keep, current_etag
from fsnotes.notes.index.catalog import Catalog, IndexStatus
from fsnotes.notes.index.indexer import Catalogs
from fsnotes.notes.index.schema import Row
from fsnotes.notes.store import (
    Note,
    NoteError,
    NoteStore,
    WorkspaceStores,
    display,
    etag_of,
    iso_time,
)
from fsnotes.notes.text.edits import Edit, apply_edits
from fsnotes.notes.text.query import QueryError
from fsnotes.notes.text.query import parse as parse_query
from fsnotes.notes.text.where import conditions
from fsnotes.notes.tools import relink
from fsnotes.notes.tools.errors import ServiceError, explain, index_unavailable
from fsnotes.notes.tools.located import Located
from fsnotes.notes.tools.models import (
    DEFAULT_LIST_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    MAX_LIST_LIMIT,
    MAX_SEARCH_LIMIT,
    IndexInfo,
    Link,
    LinkRewrite,
    LinkSkip,
    MoveResult,
    NotesListResult,
    NotesReadResult,
    NotesSearchResult,
    NoteSummary,
    SearchHitOut,
    Snippet,
    WhereValue,
    WorkspaceOut,
    WorkspacesListResult,
    WriteResult,
)
from fsnotes.protocol import cursor as cursor_codec
from fsnotes.security.grants import Access, Grants, Scope, Workspace, check_level
from fsnotes.state.audit import Auditor, AuditUnavailable, Entry, Ticket
from fsnotes.state.moves import MoveJournalError, SQLMoveJournal
from sandbox import errors as sx
from sandbox import uri as lexical
from sandbox.uri import Components

log = logging.getLogger("fsnotes.notes")


@dataclass
class NotesService:
    """What every request shares: the grants, the workspaces' stores and their catalogs.

    It knows no principal: each request gets its own view, :meth:`acting_for`, from what
    its transport says about it (the principal, and a legacy session's roots).
    """

    grants: Grants
    stores: WorkspaceStores  # by workspace name
    catalogs: Catalogs
    audit: Auditor
    history: History = field(default_factory=History.off)  # what changes keep (history.py)
    moves: SQLMoveJournal | None = None  # moves whose link update has not finished yet

    def acting_for(
        self,
        principal: str,
        roots: Sequence[Any] | None = None,
        ceiling: Literal["read", "write", "delete"] | None = None,
    ) -> Notes:
        """The notes as ``principal`` may use them, for one request (one :class:`Scope`, so
        one consultation of the grants). ``roots``: the roots a legacy session's client
        reported (None for a modern, stateless request): hints that may pick the default
        workspace among the granted ones, never add one. ``ceiling``: the most the request's
        credentials allow (the request context's; ``None``: no limit beyond the grants)."""
        scope = self.grants.scope(principal, roots, ceiling=Access.from_ceiling(ceiling))
        return Notes(scope, self.stores, self.catalogs, self.audit, self.history, self.moves)


@dataclass(frozen=True)
class Notes:
    """One request's view of the notes: its :class:`Scope` (principal, granted workspaces,
    root hints), and what it resolved so far.

    Within the request a workspace or note URI is resolved against the scope once, and a
    catalog made fresh to wait for the index (:meth:`workspace_catalog`, :meth:`prepare`) is
    the one the tool's query then uses, without a second refresh (:meth:`catalog`).
    """

    scope: Scope
    stores: WorkspaceStores
    catalogs: Catalogs
    audit: Auditor
    history: History = field(default_factory=History.off)
    moves: SQLMoveJournal | None = None
    # What this request resolved: by workspace URI (None: the default), by note components
    # (only successes), and the catalogs prepared for the next query, by workspace name.
    _named: dict[str | None, tuple[Workspace, Access]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _contained: dict[Components, tuple[Workspace, Access, Components]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _prepared: dict[str, Catalog] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def principal(self) -> str:
        return self.scope.principal

    # --- scope ---------------------------------------------------------------------------

    def workspace(self, workspace_uri: str | None, needed: Access) -> Workspace:
        """The workspace a call names, or its default when it names none (where a legacy
        session's roots may choose among several granted ones)."""
        found = self._named.get(workspace_uri)
        if found is None:
            found = self._named[workspace_uri] = self.scope.named(workspace_uri)
        return check_level(*found, needed)

    def locate(self, uri: str, needed: Access) -> Located:
        """Authorize and contain a note URI: the granted workspace and the relative names."""
        try:
            components = lexical.parse_file_uri(uri)
        except sx.InvalidURI as exc:
            raise ServiceError(explain(exc)) from None
        found = self._contained.get(components)
        if found is None:
            try:
                found = self._contained[components] = self.scope.containing(components)
            except sx.TooDeep as exc:
                raise ServiceError(explain(exc)) from None
        ws, access, rel = found
        return Located(check_level(ws, access, needed), self.stores[ws.name], rel)

    def relative(self, ws: Workspace, path: str, *, allow_empty: bool = False) -> Located:
        try:
            parts = lexical.parse_relative(path, allow_empty=allow_empty)
            lexical.to_file_uri(ws.components + parts)  # the result's URI must be valid too
        except sx.SandboxError as exc:
            raise ServiceError(explain(exc)) from None
        return Located(ws, self.stores[ws.name], parts)

    def readable(self) -> list[Workspace]:
        return self.scope.workspaces()

    # --- tools ---------------------------------------------------------------------------

    def workspaces_list(self) -> WorkspacesListResult:
        return WorkspacesListResult(
            workspaces=[
                WorkspaceOut(uri=ws.uri, name=ws.name, access=access.label)
                for ws, access in self.scope.granted
            ]
        )

    def notes_list(
        self,
        workspace_uri: str | None,
        folder: str | None,
        tag: str | None,
        cursor: str | None,
        limit: int | None,
        where: Mapping[str, WhereValue] | None = None,
    ) -> NotesListResult:
        ws = self.workspace(workspace_uri, Access.READ)
        loc = self.relative(ws, folder or "", allow_empty=True)
        self.check_folder(loc)
        after = decode_cursor(cursor) if cursor is not None else None
        limit = min(limit or DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT)
        catalog = self.catalog(loc, fresh=True)
        with index_unavailable():
            page = catalog.page(loc.parts, after, limit, tag, conditions(where))
        next_cursor = encode_cursor(page.last) if page.more and page.last else None
        return NotesListResult(
            notes=[_summary(ws, row) for row in page.rows],
            nextCursor=next_cursor,
            index=index_info(page.status),
        )

    def notes_read(self, uri: str, start: int | None, end: int | None) -> NotesReadResult:
        loc = self.locate(uri, Access.READ)
        note = self.read_located(loc)
        lines = note.text.splitlines()
        total = len(lines)
        content = note.text
        first, last = 1, total
        if start is not None or end is not None:
            first = start or 1
            last = min(end or total, total)
            if first > max(total, 1) or (end is not None and end < first):
                raise ServiceError(
                    f"Lines {first}-{end or total} are outside the note, which has {total} "
                    "lines; ask for a range within it."
                )
            content = "\n".join(lines[first - 1 : last])
        return NotesReadResult(
            uri=loc.uri,
            path=display(loc.parts),
            title=note.meta.title,
            etag=note.etag,
            content=content,
            startLine=first,
            endLine=last,
            totalLines=total,
            frontmatter=note.meta.frontmatter,
            tags=note.meta.tags,
            links=[Link.model_validate(link) for link in note.meta.links],
            size=note.info.size,
            modified=iso_time(note.info.mtime_ns),
        )

    def notes_search(
        self,
        workspace_uri: str | None,
        query: str,
        folder: str | None,
        tag: str | None,
        limit: int | None,
        where: Mapping[str, WhereValue] | None = None,
    ) -> NotesSearchResult:
        ws = self.workspace(workspace_uri, Access.READ)
        loc = self.relative(ws, folder or "", allow_empty=True)
        self.check_folder(loc)
        try:
            terms = parse_query(query)
        except QueryError as exc:
            raise ServiceError(str(exc)) from None
        limit = min(limit or DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT)
        catalog = self.catalog(loc, fresh=True)
        with index_unavailable():
            found = catalog.search(terms, loc.parts, tag, limit, conditions(where))
        results = [
            SearchHitOut(
                uri=lexical.to_file_uri(ws.components + hit.row.parts),
                path=display(hit.row.parts),
                title=hit.row.title,
                score=hit.score,
                allTerms=hit.all_terms,
                snippets=(
                    [Snippet(line=hit.excerpt.line, text=hit.excerpt.text)] if hit.excerpt else []
                ),
            )
            for hit in found.hits
        ]
        return NotesSearchResult(
            results=results,
            total=found.total,
            totalExact=found.total_exact,
            rankedAll=found.ranked_all,
            dropped=[t.typed() for t in found.dropped],
            common=[t.typed() for t in found.common],
            scanned=found.scanned,
            index=index_info(found.status),
        )

    def notes_create(self, workspace_uri: str | None, path: str, content: str) -> WriteResult:
        ws = self.workspace(workspace_uri, Access.WRITE)
        loc = self.relative(ws, path)
        try:
            with self.audited("create", "notes_create", loc) as ticket:
                etag, info = loc.store.create(loc.parts, content)
                ticket.done(etag_after=etag)
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts)) from None
        self.after_write(loc, lambda c: c.wrote(loc.parts, content, etag, info))
        return WriteResult(uri=loc.uri, path=display(loc.parts), etag=etag, size=info.size)

    def notes_update(
        self,
        uri: str,
        content: str | None,
        edits: Sequence[Edit | tuple[str, str]] | None,
        etag: str | None,
    ) -> WriteResult:
        return self.update_located(self.locate(uri, Access.WRITE), content, edits, etag)

    def update_located(
        self,
        loc: Located,
        content: str | None,
        edits: Sequence[Edit | tuple[str, str]] | None,
        etag: str | None,
    ) -> WriteResult:
        """:meth:`notes_update` of a note this request already located for writing (the
        caller's authorization is what it rests on: a note of a move's link rewrite)."""
        written: list[str] = []
        before: list[str] = []

        def transform(current: str) -> str:
            before.append(etag_of(current.encode("utf-8")))
            if content is not None:
                written.append(content)
                return content
            text = apply_edits(current, edits or ())
            written.append(text)
            return text

        try:
            with self.audited("update", "notes_update", loc) as ticket:
                with self.keeping(loc, "notes_update") as keep:
                    new_etag, info = loc.store.update(
                        loc.parts, transform, expect_etag=etag, keep=keep
                    )
                ticket.etag_before = before[-1]
                ticket.done(etag_after=new_etag)
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts)) from None
        except HistoryUnavailable as exc:
            raise ServiceError(f"Nothing was written: {exc}.") from None
        self.after_write(loc, lambda c: c.wrote(loc.parts, written[-1], new_etag, info))
        return WriteResult(uri=loc.uri, path=display(loc.parts), etag=new_etag, size=info.size)

    def plan_move(self, uri: str, new_path: str) -> relink.MovePlan:
        """Where every link a move of ``uri`` affects points, from the index, before
        anything moves (see fsnotes.notes.tools.relink): what :meth:`notes_move` rewrites."""
        loc = self.locate(uri, Access.WRITE)
        return relink.plan_move(self, loc, self.relative(loc.workspace, new_path))

    def relink_moved(
        self,
        loc: Located,
        dst: Located,
        plan: relink.MovePlan,
        progress: Callable[[int, int], None] | None,
        stop: Callable[[], bool] | None,
        *,
        resuming: bool = False,
    ) -> tuple[list[LinkRewrite], list[LinkSkip]]:
        """The link update of a move whose rename is done; its journal row (if any) is
        marked as the moved note is rewritten and deleted when the update ran to its end."""
        journal = self.moves
        key = (loc.workspace.name, display(loc.parts), display(dst.parts))

        def own_done() -> None:
            if journal is not None:
                with contextlib.suppress(MoveJournalError):
                    journal.own_done(*key)

        result = relink.apply_move(
            self,
            loc,
            dst,
            plan,
            progress=progress,
            stop=stop,
            own=not plan.own_done,
            own_done=own_done,
            resuming=resuming,
        )
        if journal is not None:
            try:
                journal.end(*key)
            except MoveJournalError as exc:
                log.warning("the move journal kept a finished move: %s", exc)
        return result

    def notes_move(
        self,
        uri: str,
        new_path: str,
        etag: str | None,
        update_links: bool = True,
        *,
        plan: relink.MovePlan | None = None,
        progress: Callable[[int, int], None] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> MoveResult:
        """Move the note; with ``update_links``, rewrite the links ``plan`` (made now when
        not given) names, reporting ``progress`` and stopping early once ``stop()`` is true
        (see :func:`relink.apply_move`)."""
        loc = self.locate(uri, Access.WRITE)
        dst = self.relative(loc.workspace, new_path)
        # Where every affected link points, from the index, before anything moves (see
        # fsnotes.notes.tools.relink); the notes holding them are rewritten after the move.
        if update_links and plan is None:
            plan = relink.plan_move(self, loc, dst)
        elif not update_links:
            plan = None
        journal = self.moves if plan else None
        key = (loc.workspace.name, display(loc.parts), display(dst.parts))
        if journal is not None and plan is not None:
            # Before the rename: a server killed during the link update leaves this row,
            # and the same move called again finishes the job (interrupted_move).
            try:
                journal.begin(*key, self.principal, plan.record())
            except MoveJournalError as exc:
                raise ServiceError(f"Nothing was moved: {exc}.") from None
        try:
            with self.audited("move", "notes_move", loc) as ticket:
                with self.keeping(loc, "notes_move") as keep:
                    moved_etag, _info = loc.store.move(
                        loc.parts, dst.parts, expect_etag=etag, keep=keep
                    )
                ticket.etag_before = moved_etag
                ticket.done(etag_after=moved_etag, path_after=display(dst.parts))
        except BaseException as exc:
            if journal is not None:
                with contextlib.suppress(MoveJournalError):
                    journal.end(*key)  # nothing moved: nothing to finish
            if isinstance(exc, (sx.SandboxError, NoteError)):
                raise ServiceError(explain(exc, loc.parts, dst.parts)) from None
            if isinstance(exc, HistoryUnavailable):
                raise ServiceError(f"Nothing was moved: {exc}.") from None
            raise
        self.after_write(loc, lambda c: c.moved(loc.parts, dst.parts))
        updated, skipped = self.relink_moved(loc, dst, plan, progress, stop) if plan else ([], [])
        return MoveResult(
            uri=dst.uri,
            path=display(dst.parts),
            previousUri=loc.uri,
            etag=next((u.etag for u in updated if u.uri == dst.uri), moved_etag),
            linksUpdated=updated,
            linksNotUpdated=skipped,
        )

    # --- helpers -------------------------------------------------------------------------

    @contextlib.contextmanager
    def audited(
        self,
        action: str,
        tool: str,
        loc: Located,
        *,
        etag_before: str | None = None,
        confirmed_by: str | None = None,
    ) -> Iterator[Ticket]:
        """The audit log around one mutation of ``loc`` (see :mod:`fsnotes.state.audit`):
        when its intent cannot be recorded, ServiceError and the block does not run."""
        entry = Entry(
            principal=self.principal,
            action=action,
            tool=tool,
            workspace=loc.workspace.name,
            path=display(loc.parts),
            etag_before=etag_before,
            confirmed_by=confirmed_by,
        )
        try:
            ticket = self.audit.begin(entry)
        except AuditUnavailable as exc:
            raise ServiceError(f"Nothing was changed: {exc}.") from None
        try:
            yield ticket
        except BaseException as exc:
            self.audit.finish(ticket, exc)
            raise
        self.audit.finish(ticket)

    def keeping(self, loc: Located, tool: str) -> contextlib.AbstractContextManager[Keep]:
        """One change of the note at ``loc`` by this request's principal with ``tool``: what
        it replaces is kept first (see :meth:`History.keeping`; HistoryUnavailable)."""
        return self.history.keeping(
            loc.workspace.uri,
            loc.parts,
            principal=self.principal,
            tool=tool,
            current=lambda: current_etag(loc.store, loc.parts),
        )

    def workspace_catalog(self, workspace_uri: str | None, needed: Access = Access.READ) -> Catalog:
        """The catalog of the workspace a call names (authorized for ``needed``), prepared
        for the call's query (see :meth:`prepare`)."""
        ws = self.workspace(workspace_uri, needed)
        return self.prepare(self.relative(ws, "", allow_empty=True))

    def prepare(self, loc: Located) -> Catalog:
        """The fresh catalog of ``loc``'s workspace, kept for the next :meth:`catalog` query
        of this request (a handler waits on it for the index, then its query uses it: one
        refresh per call, not two)."""
        catalog = self.catalog(loc, fresh=True)
        self._prepared[loc.workspace.name] = catalog
        return catalog

    def catalog(self, loc: Located, *, fresh: bool = False) -> Catalog:
        """The catalog of ``loc``'s workspace; ``fresh`` for a query (see Catalogs.fresh),
        unless :meth:`prepare` just made it fresh for this query."""
        with index_unavailable():
            if not fresh:
                return self.catalogs.of(loc.workspace, loc.store)
            prepared = self._prepared.pop(loc.workspace.name, None)
            if prepared is not None:
                return prepared
            return self.catalogs.fresh(loc.workspace, loc.store)

    def after_write(self, loc: Located, update: Callable[[Catalog], None]) -> None:
        """Tell the catalog about a write that already happened. Never raises: the file is
        the truth, and the next lookup or rescan re-checks what the index missed."""
        try:
            update(self.catalog(loc))
        except ServiceError as exc:
            log.warning("index not updated after a write to %s: %s", display(loc.parts), exc)

    def check_folder(self, loc: Located) -> None:
        """A folder filter must be a folder that may hold notes (not hidden)."""
        try:
            loc.store.check_folder(loc.parts)
        except NoteError as exc:
            raise ServiceError(str(exc)) from None

    def read_located(self, loc: Located) -> Note:
        try:
            return loc.store.read(loc.parts)
        except (sx.SandboxError, NoteError) as exc:
            raise ServiceError(explain(exc, loc.parts)) from None

    @staticmethod
    def try_read(store: NoteStore, parts: Components) -> Note | None:
        """Read a note the catalog named; skip (and log) one that vanished or is unreadable."""
        try:
            return store.read(parts)
        except (sx.SandboxError, NoteError) as exc:
            log.info("skipping %s: %s", display(parts), type(exc).__name__)
            return None


def index_info(status: IndexStatus) -> IndexInfo:
    """What a result says about the index it was answered from."""
    message = None
    if not status.complete:
        progress = (
            f"{status.done:,} of {status.total:,} notes indexed"
            if status.total
            else "listing the workspace's folders"
        )
        message = (
            f"The workspace is still being indexed ({progress}); these results cover only "
            "the notes indexed so far. Ask again shortly for complete results."
        )
    elif status.skipped_folders:
        message = (
            f"{status.skipped_folders} folder(s) were not indexed: nested deeper than "
            f"{lexical.MAX_DEPTH} levels or holding too many entries."
        )
    return IndexInfo(
        complete=status.complete,
        indexedNotes=status.notes,
        skippedFolders=status.skipped_folders,
        message=message,
    )


def _summary(ws: Workspace, row: Row) -> NoteSummary:
    return NoteSummary(
        uri=lexical.to_file_uri(ws.components + row.parts),
        path=display(row.parts),
        title=row.title,
        size=row.size,
        modified=iso_time(row.mtime_ns),
        tags=list(row.tags),
    )


def encode_cursor(after: Components) -> str:
    return cursor_codec.encode({"v": 1, "after": list(after)})


def decode_cursor(cursor: str) -> Components:
    """The position a cursor encodes; ServiceError for anything this server did not issue."""
    bad = ServiceError("That cursor is not one this server issued; list again without it.")
    value = cursor_codec.decode_object(cursor, 1)
    if value is None:
        raise bad
    after = value.get("after")
    if not isinstance(after, list) or not after:
        raise bad
    if not all(isinstance(p, str) for p in after):
        raise bad
    try:
        return tuple(lexical.check_name(p) for p in after)
    except sx.SandboxError:
        raise bad from None
