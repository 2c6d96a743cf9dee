"""The catalog: which notes a workspace holds, with which metadata. One seam for every caller.

``notes_list``, ``notes_search``, the delete flow's candidates, ``resources/list`` and
completion all ask a :class:`Catalog`; none of them walks the workspace. Behind it is the
workspace's search index (:mod:`fsnotes.notes.index.noteindex`), kept fresh three ways: the server's
own writes update it in the same operation, a watcher's hints re-check what changed, and an
incremental rescan (:mod:`fsnotes.notes.index.scan`) is the ground truth, at start and on an
interval (:mod:`fsnotes.notes.index.indexer`).

Never wrong: before a row is returned, the note is stat-ed through the workspace's Root and
compared with what was indexed (device, inode, modification time, size). A note that changed
is read and indexed again before answering; one that vanished, or is now a symlink, a FIFO
or anything but a regular file, is dropped and never read through.

Methods are synchronous (SQLite and file I/O); the async tools run them in worker threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from fsnotes.notes.index import ranking
from fsnotes.notes.index import search as index_search
from fsnotes.notes.index.attachments import AttachmentRow
from fsnotes.notes.index.connections import (
    IndexBusy,
    IndexCorrupt,
    IndexProblem,
    IndexUnavailable,
    QueryRejected,
)
from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.scan import Progress, Scanner, ScanReport
from fsnotes.notes.index.schema import Document, Row, key_of, scope_token, where_token
from fsnotes.notes.store import NoteError, NoteStore, stem_of
from fsnotes.notes.text.markdown import analyse
from fsnotes.notes.text.query import Term
from fsnotes.state import statedir
from sandbox import errors as sx
from sandbox.root import FileInfo
from sandbox.uri import Components

log = logging.getLogger("fsnotes.index")

T = TypeVar("T")


# Rows re-checked against their files before a page is returned: when some changed, they are
# re-indexed and the page is asked again, at most this many times (then stale rows are
# dropped from the answer, never returned).
MAX_VERIFY_ROUNDS = 3
# A WriteBatch writes its notes once it holds this many (a transaction of the scanner's size,
# see fsnotes.notes.index.scan.BATCH) or this much text (so that a batch of large notes does not
# hold them all in memory until the end).
BATCH_NOTES = 1000
BATCH_BYTES = 32 * 1024 * 1024


class CatalogUnavailable(Exception):
    """The index cannot answer now (busy, or being rebuilt); one sentence, retryable."""


@dataclass(frozen=True)
class IndexStatus:
    """How far the index of one workspace is (what a result says about its completeness)."""

    complete: bool  # a full scan has finished at least once: every note is in the index
    notes: int  # notes in the index now
    skipped_folders: int  # folders not indexed in the last full scan (too deep or too big)
    done: int = 0  # progress of a scan running now (any process)
    total: int = 0
    scanning: bool = False


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    more: bool  # another page follows ``last``
    status: IndexStatus
    # The last note this page looked at, returned or dropped as stale: the next page starts
    # after it (None: the page looked at nothing).
    last: Components | None = None


@dataclass(frozen=True)
class AttachmentPage:
    rows: list[AttachmentRow]
    more: bool  # another page follows ``last``
    last: Components | None = None  # as in Page


@dataclass(frozen=True)
class SearchHit:
    row: Row
    score: float
    excerpt: ranking.Excerpt | None
    all_terms: bool = True  # holds every term the search selected by


@dataclass(frozen=True)
class Found:
    hits: list[SearchHit]
    total: int  # notes that match, counted up to ranking.COUNT_CAP
    total_exact: bool  # below the cap: every match was counted
    ranked_all: bool  # every match was ranked by bm25 (see fsnotes.notes.index.search)
    scanned: int  # notes in scope that were searched
    status: IndexStatus
    dropped: list[Term] = field(default_factory=list)  # past the term bound, not searched
    common: list[Term] = field(default_factory=list)  # too common to select or rank


@dataclass
class _Local:
    """What this process knows about a scan it runs (the index's meta has the rest)."""

    scanning: bool = False
    done: int = 0
    total: int = 0
    needs_scan: bool = True
    finished: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class WriteBatch:
    """Index writes of this process's own note writes, collected by :meth:`Catalog.batched`
    (from any number of threads) and written a transaction at a time by :meth:`flush`,
    which the thread that owns the batch calls (whenever :attr:`full`, and at the end): a
    helper thread never opens an index connection of its own."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._docs: list[Document] = []
        self._bytes = 0
        self._lock = threading.Lock()

    def add(self, doc: Document) -> None:
        with self._lock:
            self._docs.append(doc)
            self._bytes += len(doc.meta.body)

    @property
    def full(self) -> bool:
        with self._lock:
            return len(self._docs) >= BATCH_NOTES or self._bytes >= BATCH_BYTES

    def flush(self) -> None:
        with self._lock:
            docs, self._docs, self._bytes = self._docs, [], 0
        if docs:
            self.catalog._quietly(lambda: self.catalog.index.upsert(docs), docs[0].parts)


class Catalog:
    """The notes of one workspace as the index knows them, checked against the files."""

    def __init__(self, name: str, store: NoteStore, index: NoteIndex, base: Components) -> None:
        self.name = name
        self.store = store
        self.index = index
        self.base = base
        self.on_folder: Callable[[Components], None] | None = None
        self.scanner = Scanner(store, index, base, on_folder=self._folder_seen)
        self._local = _Local()
        self._batching = threading.local()

    def _folder_seen(self, parts: Components) -> None:
        if self.on_folder is not None:
            self.on_folder(parts)

    # --- errors ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except IndexUnavailable as exc:
            log.warning("search index of %r cannot be used: %s", self.name, exc)
            raise CatalogUnavailable(
                f"The search index cannot be used right now ({exc}); ask the person running "
                "fsnotes to check its state directory."
            ) from None
        except IndexBusy:
            raise CatalogUnavailable(
                "The search index is busy (another fsnotes process is writing it); try "
                "again in a moment."
            ) from None
        except QueryRejected as exc:
            log.error("FTS5 refused a query built by fsnotes (a bug): %s", exc)
            raise CatalogUnavailable(
                'That query could not be run; search with plain words, "quoted phrases" or '
                "prefix* only."
            ) from None
        except IndexCorrupt as exc:
            log.warning("search index of %r is damaged (%s); rebuilding it", self.name, exc)
            try:
                self.index.recreate()
            except (IndexProblem, OSError) as again:
                log.warning("could not recreate the index of %r: %s", self.name, again)
            self._local.needs_scan = True
            raise CatalogUnavailable(
                "The search index was damaged and is being rebuilt from the notes; try "
                "again in a few seconds."
            ) from None

    # --- status ----------------------------------------------------------------------------

    def status(self) -> IndexStatus:
        with self._guard():
            meta = self.index.meta()
            notes = self.index.count()
        local = self._local
        scanning = local.scanning or self._scan_lock_held()
        done = local.done if local.scanning else int(meta.get("scan_done", "0"))
        total = local.total if local.scanning else int(meta.get("scan_total", "0"))
        return IndexStatus(
            complete=meta.get("complete") == "1",
            notes=notes,
            skipped_folders=int(meta.get("skipped_folders", "0")),
            done=done if scanning else 0,
            total=total if scanning else 0,
            scanning=scanning,
        )

    @property
    def needs_scan(self) -> bool:
        return self._local.needs_scan

    def mark_for_rescan(self) -> None:
        self._local.needs_scan = True

    @property
    def last_scan(self) -> float | None:
        """Monotonic time this process's last full rescan finished (None: never)."""
        return self._local.finished

    # --- queries -----------------------------------------------------------------------------

    def page(
        self,
        folder: Components,
        after: Components | None,
        limit: int,
        tag: str | None = None,
        where: Sequence[tuple[str, str]] = (),
    ) -> Page:
        """Up to ``limit`` notes below ``folder`` (filtered by tag and by the frontmatter
        pairs ``where``, see fsnotes.notes.text.where) in path order after ``after``."""
        want = tag.strip().lstrip("#").casefold() if tag else None
        with self._guard():
            # Status first: an index said complete was complete before the rows were read
            # (read after, a build finishing meanwhile would vouch for an older page).
            status = self.status()
            for attempt in range(MAX_VERIFY_ROUNDS):
                rows = self.index.page(folder, after, limit + 1, want, where)
                checked = rows[:limit]  # the one more row only tells whether more follow
                stale = self._stale(checked)
                if not stale:
                    break
                self._refresh(stale)
                if attempt == MAX_VERIFY_ROUNDS - 1:
                    checked = [r for r in checked if r not in stale]
        last = rows[:limit][-1].parts if rows else None
        return Page(rows=checked, more=len(rows) > limit, status=status, last=last)

    def search(
        self,
        terms: Sequence[Term],
        folder: Components,
        tag: str | None,
        limit: int,
        where: Sequence[tuple[str, str]] = (),
    ) -> Found:
        scope = [scope_token("f", key_of(folder))] if folder else []
        want = tag.strip().lstrip("#").casefold() if tag else ""
        if want:
            scope.append(scope_token("t", want))
        scope.extend(where_token(key, value) for key, value in where)
        scoped = [f'{{scope}} : "{token}"' for token in scope]  # ours, never the caller's
        with self._guard():
            status = self.status()  # first, as in page()
            for attempt in range(MAX_VERIFY_ROUNDS):
                result = index_search.search(self.index, terms, scoped, limit, self._text)
                hits = result.hits
                stale = self._stale([h.row for h in hits])
                if not stale:
                    break
                self._refresh(stale)
                if attempt == MAX_VERIFY_ROUNDS - 1:
                    hits = [h for h in hits if h.row not in stale]
            scanned = self.index.count(folder)
        several = len(result.plan.selecting) > 1
        shown = ranking.scores([(h.score, h.tier, h.all_terms) for h in hits], several)
        return Found(
            hits=[
                SearchHit(
                    h.row, score, ranking.excerpt(h.snippet, h.body, h.body_start), h.all_terms
                )
                for h, score in zip(hits, shown, strict=True)
            ],
            total=result.matched,
            total_exact=result.matched < ranking.COUNT_CAP,
            ranked_all=result.ranked_all,
            scanned=scanned,
            status=status,
            dropped=result.plan.dropped,
            common=result.plan.common,
        )

    def _text(self, parts: Components) -> str | None:
        """A note's text from its file, for search's excerpts and feedback (None when it
        cannot be read as a note now: the hit is then checked and dropped or indexed
        again by the caller)."""
        try:
            return self.store.text(parts)
        except (NoteError, sx.SandboxError):
            return None

    def titled(self, needle: str, limit: int) -> list[Row]:
        """Notes whose title contains ``needle`` (case-insensitive), checked against the
        files, in path order; at most ``limit``."""
        with self._guard():
            rows = self.index.titled(needle.casefold(), limit)
            stale = self._stale(rows)
            if stale:
                self._refresh(stale)
                rows = self.index.titled(needle.casefold(), limit)
        return rows

    def complete(self, prefix: str, limit: int) -> tuple[list[Components], int]:
        """Note paths starting with ``prefix`` (case-insensitive), and how many there are.
        Each path offered is checked to still be a note (a stat through the Root); the ones
        that are not are dropped from the index and from the answer."""
        with self._guard():
            paths, total = self.index.paths_with_prefix(prefix.casefold(), limit)
            gone = [p for p in paths if not self._is_note(p)]
            for parts in gone:
                self.scanner.refresh(parts)
        return [p for p in paths if p not in gone], total - len(gone)

    def attachments(self, after: Components | None, limit: int) -> AttachmentPage:
        """Up to ``limit`` attachments (fsnotes/notes/index/attachments.py) in path order after
        ``after``, each checked against its file like a note (one that changed is recorded
        again first; one that vanished or is no longer a regular file is dropped)."""
        with self._guard():
            for attempt in range(MAX_VERIFY_ROUNDS):
                rows = self.index.attachments_page(after, limit + 1)
                checked = rows[:limit]
                stale = [r for r in checked if not self._still(r)]
                if not stale:
                    break
                for row in stale:
                    self.scanner.refresh(row.parts)
                if attempt == MAX_VERIFY_ROUNDS - 1:
                    checked = [r for r in checked if r not in stale]
        last = rows[:limit][-1].parts if rows else None
        return AttachmentPage(rows=checked, more=len(rows) > limit, last=last)

    def _still(self, row: AttachmentRow) -> bool:
        try:
            return row.matches(self.store.root.stat(row.parts))
        except sx.SandboxError:
            return False

    def read(self, fn: Callable[[NoteIndex], T]) -> T:
        """One read of the index by ``fn`` (its problems as CatalogUnavailable)."""
        with self._guard():
            return fn(self.index)

    def check(self, rows: Sequence[Row]) -> list[Row]:
        """The rows that no longer match their files, each re-indexed from its file (or
        dropped) before this returns: a caller that got any asks the index again."""
        with self._guard():
            stale = self._stale(rows)
            self._refresh(stale)
        return stale

    def _is_note(self, parts: Components) -> bool:
        try:
            return self.store.root.stat(parts).kind == "file"
        except sx.SandboxError:
            return False

    def _stale(self, rows: Sequence[Row]) -> list[Row]:
        stale = []
        for row in rows:
            try:
                info = self.store.root.stat(row.parts)
            except sx.SandboxError:
                stale.append(row)
                continue
            if not row.matches(info):
                stale.append(row)
        return stale

    def _refresh(self, rows: Sequence[Row]) -> None:
        for row in rows:
            self.scanner.refresh(row.parts)

    # --- the server's own writes -------------------------------------------------------------

    def wrote(self, parts: Components, text: str, etag: str, info: FileInfo) -> None:
        """A note this process just created or replaced with ``text`` (``info``: its stat).
        Inside :meth:`batched` (on this thread), it is written with the batch instead."""
        doc = Document(parts, info, etag, analyse(text, stem_of(parts[-1])))
        batch: WriteBatch | None = getattr(self._batching, "batch", None)
        if batch is not None and batch.catalog is self:
            batch.add(doc)
            return
        self._quietly(lambda: self.index.upsert([doc]), parts)

    @contextlib.contextmanager
    def batched(self, batch: WriteBatch) -> Iterator[None]:
        """While it lasts, this thread's :meth:`wrote` calls go to ``batch`` (many writes of
        one operation, such as a move's link rewrites, in a few index transactions rather
        than one each). Until the batch is written, those notes' rows are stale, and the
        check against the files before every answer re-reads them: never wrong, just
        slower for a moment."""
        self._batching.batch = batch
        try:
            yield
        finally:
            self._batching.batch = None

    def removed(self, parts: Components) -> None:
        self._quietly(lambda: self.index.delete([parts]), parts)

    def moved(self, src: Components, dst: Components) -> None:
        def apply() -> None:
            self.index.delete([src])
            self.scanner.refresh(dst)

        self._quietly(apply, dst)

    def refresh(self, parts: Components) -> None:
        self._quietly(lambda: self.scanner.refresh(parts), parts)

    def _quietly(self, fn: Callable[[], object], parts: Components) -> None:
        # The file operation already happened: the file is the truth, and a failed index
        # write must not turn a done write into an error. The note is re-checked by the next
        # lookup that returns it and by the next rescan.
        try:
            fn()
        except (IndexProblem, sx.SandboxError, OSError) as exc:
            log.warning("index not updated for %s (%s); the rescan will", "/".join(parts), exc)
            self._local.needs_scan = True

    # --- the full rescan ---------------------------------------------------------------------

    @property
    def _scan_lock_path(self) -> Path:
        return self.index.path.with_name(self.index.path.name + ".scan.lock")

    def _scan_lock_held(self) -> bool:
        """Whether another process is scanning this workspace now."""
        return statedir.held_elsewhere(self._scan_lock_path)

    def rescan(
        self, *, progress: Progress | None = None, stop: Callable[[], bool] = lambda: False
    ) -> ScanReport | None:
        """A full incremental rescan, unless another process is running one (None then).

        Serialised across processes by a lock file beside the index: one builds, the others
        read what it commits.
        """
        local = self._local
        if not local.lock.acquire(blocking=False):
            return None  # this process is already scanning this workspace
        try:
            with statedir.exclusive_or_none(self._scan_lock_path) as mine:
                return self._rescan_locked(progress, stop) if mine else None
        finally:
            local.lock.release()

    def _rescan_locked(self, progress: Progress | None, stop: Callable[[], bool]) -> ScanReport:
        local = self._local
        started = time.monotonic()

        def seen(done: int, total: int) -> None:
            local.done, local.total = done, total
            if progress is not None:
                progress(done, total)

        local.scanning, local.done, local.total = True, 0, 0
        local.needs_scan = False
        try:
            try:
                report = self.scanner.scan(progress=seen, stop=stop)
            except IndexProblem as exc:
                local.needs_scan = True
                if isinstance(exc, IndexCorrupt):
                    self.index.recreate()
                raise
            if report.cancelled:
                local.needs_scan = True
                return report
            self.index.set_meta(
                {
                    "complete": "1",
                    "skipped_folders": str(report.skipped_folders),
                    "scan_done": "0",
                    "scan_total": "0",
                    "last_scan": str(int(time.time())),
                }
            )
            local.finished = time.monotonic()
            if report.indexed or report.removed:
                log.info(
                    "index of %r: %d notes, %d (re)indexed, %d removed, %d skipped "
                    "folder(s), in %.1f s",
                    self.name,
                    report.notes,
                    report.indexed,
                    report.removed,
                    report.skipped_folders,
                    time.monotonic() - started,
                )
            return report
        finally:
            local.scanning = False

    def scan_folder(self, folder: Components) -> None:
        """Bring one subtree up to date (a folder a watcher saw appear or change)."""
        self._quietly(lambda: self.scanner.scan(folder), folder)

    def forget_folder(self, folder: Components) -> None:
        self._quietly(lambda: self.index.delete_folders([folder]), folder)
