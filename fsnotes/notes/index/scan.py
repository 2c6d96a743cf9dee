"""The index's builder: an incremental rescan of one workspace, through its Root only.

The ground truth of what is in a workspace is the workspace. A rescan lists every folder
(``Root.listdir``: descriptors, no symlink followed, no mount crossed) and compares each
note's ``(st_dev, st_ino, st_mtime_ns, st_size)`` with what the index remembers; only notes
whose tuple changed are read and parsed again, and notes (or whole folders) that are gone
are dropped. A first build is the same rescan against an empty index, so a build that is
interrupted (a kill, a restart) resumes where its last committed batch ended.

Two passes bound memory by the largest folder, not the vault: the first only counts what
changed (so progress has one total), the second lists each changed folder again and
indexes it in batches. Folders deeper than a note may be (:data:`sandbox.uri.MAX_DEPTH`) or
with more entries than :data:`MAX_FOLDER_ENTRIES` are skipped and counted, never a failure.

Inherent limit: a file rewritten in place within the filesystem's timestamp granularity
(a few milliseconds on ext4) without a change of size looks unchanged until it changes again
(editors and sync tools write a new file and rename it, which changes the inode).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from fsnotes.notes.index.attachments import SUFFIXES, is_attachment, media_type
from fsnotes.notes.index.newnotes import NewNotes
from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.schema import Document
from fsnotes.notes.store import MAX_NOTE_BYTES, NoteError, NoteStore
from fsnotes.notes.workers import borrowed_pool
from sandbox import errors as sx
from sandbox import uri as lexical
from sandbox.root import DirEntry, FileInfo, is_leftover_name
from sandbox.uri import Components

log = logging.getLogger("fsnotes.index")


# A folder with more entries than this is skipped (and counted): one listing holds its names
# in memory. Far above any real notes folder; keeps a hostile or mistaken mount (a maildir, a
# cache) from costing the rescan its memory bound.
MAX_FOLDER_ENTRIES = 500_000
# Notes per workspace. The index and a rescan handle millions; past this a vault is more
# likely a mistake (a home directory given as a workspace) than notes.
MAX_NOTES = 2_000_000
# Notes read and written per index transaction: readers see batches appear whole; a kill
# loses at most one batch of work (a second or so); fewer, larger transactions build faster.
BATCH = 1000
# Batches read ahead of the writer (each up to BATCH parsed notes, a few MB).
PIPELINE_DEPTH = 2
_QUEUE_POLL_S = 0.05
# While a build's two threads run, the interpreter hands its lock between threads this often
# (CPython's default is 5 ms). The writer spends its time in SQLite, which lets the lock go,
# but it needs the lock back after every statement (some 60 per batch) while the reader
# parses notes in Python: at 5 ms it waited up to 5 ms each time. Measured on a 100k-note
# build (2 cores, runs alternated): 102 s wall on average at 5 ms, 85 s at 0.5 ms, the same CPU.
BUILD_SWITCH_INTERVAL_S = 0.0005


@dataclass
class ScanReport:
    notes: int = 0  # notes found
    indexed: int = 0  # read and (re)written to the index
    removed: int = 0  # dropped from the index (gone, or no longer a note)
    rejected: int = 0  # note-named files that are not notes (not UTF-8, too large, ...)
    skipped_folders: int = 0  # too deep or too many entries: not indexed
    cancelled: bool = False


Progress = Callable[[int, int], None]  # (done, total)
FileInfoEntry = tuple[str, FileInfo]


class Scanner:
    """Rescans one workspace into its index."""

    def __init__(
        self,
        store: NoteStore,
        index: NoteIndex,
        base: Components,
        *,
        on_folder: Callable[[Components], None] | None = None,
    ) -> None:
        self.store = store
        self.index = index
        self.base = base  # the workspace's own components (to know which names URIs can hold)
        self.on_folder = on_folder  # called for every folder listed (the watcher adds it)

    # --- a whole workspace -------------------------------------------------------------------

    def scan(
        self,
        folder: Components = (),
        *,
        progress: Progress | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> ScanReport:
        """Bring the index of ``folder``'s subtree (the workspace by default) up to date."""
        report = ScanReport()
        pending: list[Components] = []
        seen_folders: set[Components] = set()
        # The folders the index held before listing began. Only these can be dropped at the
        # end as gone: a folder indexed meanwhile (a write of this process into a folder it
        # just made, a watcher's hint) appeared after the listing passed its parent, and
        # dropping it would hide a note that exists until the next rescan.
        known = [f for f in self.index.folders() if _below(f, folder)]
        total = 0
        for parts, entries in self._folders(folder, report, seen_folders):
            if stop():
                report.cancelled = True
                return report
            # Counted without asking whether a URI can name each new note (the costliest
            # check of a build, made again in pass 2 where it decides): a note-named file
            # no URI can hold counts as one changed note, done when pass 2 skips it.
            changed, vanished, _unlisted = self._diff(parts, entries, check=False)
            report.notes += len(entries)
            if changed or vanished:
                pending.append(parts)
                total += len(changed)
        if progress is not None:
            progress(0, total)
        with self.index.bulk(total):
            written = self._write_pending(pending, report, progress, total, stop)
        if not written:
            report.cancelled = True
            return report
        gone = [f for f in known if f not in seen_folders]
        if gone:
            report.removed += self.index.delete_folders(gone)
        return report

    def _folders(
        self, top: Components, report: ScanReport, seen: set[Components]
    ) -> Iterator[tuple[Components, list[FileInfoEntry]]]:
        """Every folder of the subtree with its listed entries, depth first."""
        stack = [top]
        notes = 0
        while stack:
            parts = stack.pop()
            try:
                listed = self.store.root.listdir(parts, max_entries=MAX_FOLDER_ENTRIES)
            except sx.LimitExceeded:
                log.warning("not indexing a folder with over %d entries", MAX_FOLDER_ENTRIES)
                report.skipped_folders += 1
                continue
            except sx.SandboxError:
                continue  # vanished, swapped for a link, or unreadable: nothing to index
            seen.add(parts)
            if self.on_folder is not None:
                self.on_folder(parts)
            if any(is_leftover_name(e.name) for e in listed):
                self._sweep(parts)
            self._attachments(parts, listed)
            children: list[Components] = []
            for entry in listed:
                child = (*parts, entry.name)
                if entry.info.kind == "dir" and _folder_name(entry.name):
                    if len(child) >= lexical.MAX_DEPTH:
                        # A note in it would be deeper than any path a client may send.
                        report.skipped_folders += 1
                    else:
                        children.append(child)
            entries = self._candidates(listed)
            notes += len(entries)
            if notes > MAX_NOTES:
                log.warning("not indexing past %d notes in one workspace", MAX_NOTES)
                report.skipped_folders += 1 + len(stack)
                return
            yield parts, entries
            stack.extend(reversed(children))

    def _sweep(self, parts: Components) -> None:
        """Remove the leftovers of killed writes and deletes of ours in this folder (the
        Root decides what is stale: nothing a live writer of any process holds)."""
        try:
            removed = self.store.root.remove_stale_temps(parts)
        except sx.SandboxError:
            return  # gone or changed since it was listed: nothing of ours to do there
        if removed:
            log.info("removed %d stale leftover file(s) of killed writes", removed)

    def _attachments(self, parts: Components, listed: list[DirEntry]) -> None:
        """Record the folder's attachments (images, PDFs: fsnotes/notes/index/attachments.py) as
        listed, when they differ from what the index holds; they are never read."""
        found = [
            (e.name, e.info)
            for e in listed
            # The suffix first: one C call for each of the (mostly note) names listed.
            if e.name.lower().endswith(SUFFIXES)
            and self._attachment_name(e.name)
            and is_attachment((*parts, e.name), e.info, self.base)
        ]
        known = self.index.attachment_manifest(parts)
        now = {n: (i.identity.dev, i.identity.ino, i.mtime_ns, i.size) for n, i in found}
        if now != known:
            self.index.set_attachments(parts, found)

    def _attachment_name(self, name: str) -> bool:
        # A name configured as a note's extension is a note, whatever else it could be.
        return media_type(name) is not None and not self.store.is_note_name(name)

    def _candidates(self, listed: list[DirEntry]) -> list[FileInfoEntry]:
        """Regular files with a note's name (cheap checks only: whether a URI can hold the
        name is asked only of files that changed, see _diff)."""
        is_note_name = self.store.is_note_name
        return [(e.name, e.info) for e in listed if e.info.kind == "file" and is_note_name(e.name)]

    def _diff(
        self, parts: Components, entries: list[FileInfoEntry], *, check: bool = True
    ) -> tuple[list[tuple[str, FileInfo, bool]], list[str], int]:
        """What changed in one folder: (name, info, known before) for each note to read,
        the names the index knows that are gone, and how many changed files are not notes
        to list after all (a name no URI can hold; only asked when ``check``)."""
        known = self.index.manifest(parts)
        changed = []
        unlisted = 0
        for name, info in entries:
            was = known.pop(name, None)
            if was == (info.identity.dev, info.identity.ino, info.mtime_ns, info.size):
                continue
            # Addressability depends on the name only, so an unchanged note passed it already.
            if not check or self.store.is_listed((*parts, name), info, self.base):
                changed.append((name, info, was is not None))
            else:
                unlisted += 1
        return changed, list(known), unlisted

    def _write_pending(
        self,
        pending: list[Components],
        report: ScanReport,
        progress: Progress | None,
        total: int,
        stop: Callable[[], bool],
    ) -> bool:
        """Read the changed notes of ``pending`` folders and write them to the index, in
        batches; False when ``stop`` said so first (what was committed stays).

        With a thread to spare (one token of the limiter all blocking steps share, see
        :mod:`fsnotes.notes.workers`), a pipeline of two: that thread reads and parses the
        next batch and makes its rows (Python, holding the GIL; :meth:`NoteIndex.prepare` for
        new notes) while this one writes the last (SQLite, a few statements per batch, which
        release the GIL), so a build uses both cores; at most :data:`PIPELINE_DEPTH` batches
        wait (each with its rows: about twice its notes' text). Without one, this thread
        reads and writes in turn."""
        done = 0
        with borrowed_pool(1, "fsnotes-scan") as reader:
            batches = self._batches(pending)
            ahead = batches if reader is None else _read_ahead(reader, batches, stop)
            switching = contextlib.nullcontext() if reader is None else _quick_switching()
            with contextlib.closing(ahead), switching:
                for item in ahead:
                    if isinstance(item, _Stopped) or stop():
                        return False
                    if item.vanished:
                        report.removed += self.index.delete(item.vanished)
                    done += item.size
                    if not (item.written or item.rejects or item.vanished):
                        # Nothing to write (a folder whose only change is a file that is
                        # not a note after all): no transaction, only progress.
                        if progress is not None:
                            progress(min(done, total), total)
                        continue
                    meta = {"scan_done": str(min(done, total)), "scan_total": str(total)}
                    writes = item.docs if item.new is None else item.new
                    self.index.upsert(writes, meta=meta, fresh=item.fresh)
                    if item.rejects:
                        self.index.reject(item.rejects)
                    report.indexed += item.written
                    report.rejected += len(item.rejects)
                    if progress is not None:
                        progress(min(done, total), total)
        return True

    def _batches(self, pending: list[Components]) -> Generator[_Batch]:
        """The work of pass 2, folder by folder: each folder listed again (it may have
        changed since pass 1) and its changed notes read in batches of :data:`BATCH`."""
        for parts in pending:
            try:
                listed = self.store.root.listdir(parts, max_entries=MAX_FOLDER_ENTRIES)
            except sx.SandboxError:
                listed = []  # gone since the first pass: its notes are dropped
            changed, vanished, unlisted = self._diff(parts, self._candidates(listed))
            gone = [(*parts, name) for name in vanished]
            if not changed:
                yield _Batch([], [], set(), gone, unlisted)
                continue
            for start in range(0, len(changed), BATCH):
                chunk = changed[start : start + BATCH]
                docs, rejects = self._read_batch(parts, [(n, i) for n, i, _known in chunk])
                fresh = {(*parts, n) for n, _i, known in chunk if not known}
                first = start == 0
                size = len(chunk) + (unlisted if first else 0)
                # Rows of new notes are made here, in the reader, not in the writer.
                new = (
                    self.index.prepare(docs)
                    if len(docs) > 1 and all(d.parts in fresh for d in docs)
                    else None
                )
                written = len(docs)
                if new is not None:
                    docs = []  # their rows are made: let the documents go (see NewNotes)
                yield _Batch(docs, rejects, fresh, gone if first else [], size, new, written)

    def _read_batch(
        self, parts: Components, batch: list[tuple[str, FileInfo]]
    ) -> tuple[list[Document], list[tuple[Components, FileInfo]]]:
        """The notes of ``batch`` (in the folder ``parts``) read and analysed, and those that
        are not notes now, with the stat they were listed with (looked at again only once
        they change): too large, not UTF-8, or changed under us (swapped for a link,
        removed, hard-linked).

        Read with :meth:`NoteStore.read_many`: a window of notes opened and named to the
        kernel before the first of them is read, so that reads from a cold disk overlap
        (a first build usually reads a vault that is on disk, not in memory), with one open
        per note. Measured at 100k notes, in-process, with the page cache dropped first:
        42.5 s without any hint; 28.6-30.2 s with every note of a batch of 1,000 hinted
        first, by a second open of each (which cost 1 s of the reader's CPU warm).
        """
        docs: list[Document] = []
        rejects: list[tuple[Components, FileInfo]] = []
        listed = dict(batch)
        names = [name for name, info in batch if info.size <= MAX_NOTE_BYTES]
        for name, info in batch:
            if info.size > MAX_NOTE_BYTES:
                rejects.append(((*parts, name), info))
        for name, note in self.store.read_many(parts, names):
            if isinstance(note, NoteError | sx.SandboxError):
                rejects.append(((*parts, name), listed[name]))
                continue
            docs.append(Document(note.parts, note.info, note.etag, note.meta))
        return docs, rejects

    # --- one note ------------------------------------------------------------------------

    def refresh(self, parts: Components) -> bool:
        """Re-check one note (or attachment) against the file (a stat through the Root, a
        read if a note changed). Returns whether the index now holds it."""
        if self._attachment_name(parts[-1]):
            return self._refresh_attachment(parts)
        try:
            info = self.store.root.stat(parts)
        except sx.SandboxError:
            self.index.delete([parts])
            return False
        if not self.store.is_listed(parts, info, self.base) or len(parts) > lexical.MAX_DEPTH:
            self.index.delete([parts])
            return False
        row = self.index.get(parts)
        if row is not None and row.matches(info):
            return True
        docs, rejects = self._read_batch(parts[:-1], [(parts[-1], info)])
        if docs:
            self.index.upsert(docs)
            return True
        self.index.reject(rejects)
        return False

    def _refresh_attachment(self, parts: Components) -> bool:
        try:
            info: FileInfo | None = self.store.root.stat(parts)
        except sx.SandboxError:
            info = None
        if info is not None and (
            not is_attachment(parts, info, self.base) or len(parts) > lexical.MAX_DEPTH
        ):
            info = None
        self.index.put_attachment(parts, info)
        return info is not None


_switch_lock = threading.Lock()
_switch_users = 0
_switch_before = 0.0


@contextlib.contextmanager
def _quick_switching() -> Iterator[None]:
    """The interpreter's switch interval at :data:`BUILD_SWITCH_INTERVAL_S` while any
    build's pipeline runs (it is one setting for the whole process: builds of several
    workspaces at once share it, and the last to end puts back what was there before).
    Other threads (the event loop's, a request's) get the lock sooner too; the cost is more
    switches (a build's CPU time was the same within its runs' noise)."""
    global _switch_users, _switch_before
    with _switch_lock:
        if _switch_users == 0:
            _switch_before = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_before, BUILD_SWITCH_INTERVAL_S))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_before)


def _read_ahead(
    reader: ThreadPoolExecutor, batches: Iterator[_Batch], stop: Callable[[], bool]
) -> Generator[_Batch | _Stopped]:
    """``batches`` made on the ``reader`` thread, at most :data:`PIPELINE_DEPTH` ahead of
    the caller; ends with :data:`_STOPPED` once ``stop`` said so, raises what stopped the
    reader. Close it to stop the reader (it then ends at its next batch)."""
    queue_: queue.Queue[_Batch | BaseException | None] = queue.Queue(PIPELINE_DEPTH)
    halt = threading.Event()

    def put(item: _Batch | BaseException | None) -> bool:
        while not halt.is_set():
            try:
                queue_.put(item, timeout=_QUEUE_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        # Ends with exactly one of: None (all read), the exception that stopped it, or
        # nothing when the caller has halted (it no longer reads the queue).
        try:
            for batch in batches:
                if not put(batch):
                    return
                if stop():
                    put(_STOPPED)
                    return
        except BaseException as exc:  # handed to the caller, which raises it
            put(exc)
            return
        put(None)

    reader.submit(produce)
    try:
        while True:
            item = queue_.get()
            if item is None:
                return
            if item is _STOPPED:
                yield _STOPPED
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        halt.set()
        with contextlib.suppress(queue.Empty):
            while True:  # unblock a reader waiting to put
                queue_.get_nowait()


class _Stopped(Exception):
    """The reader saw ``stop()`` and read no further (a marker, never raised)."""


_STOPPED = _Stopped()


@dataclass
class _Batch:
    docs: list[Document]
    rejects: list[tuple[Components, FileInfo]]
    fresh: set[Components]  # notes the index does not hold yet
    vanished: list[Components]  # notes the index holds that are gone
    size: int  # changed notes this batch accounts for (progress)
    new: NewNotes | None = None  # the notes ready to write, when all are new to the index
    written: int = 0  # notes to write (``docs`` is emptied once ``new`` holds their rows)


def _folder_name(name: str) -> bool:
    """Whether notes below a folder of this name can be listed: not hidden, and a name a
    URI can hold (not undecodable bytes, no control character, ...)."""
    if name.startswith("."):
        return False
    try:
        lexical.check_name(name)
    except sx.SandboxError:
        return False
    return True


def _below(folder: Components, top: Components) -> bool:
    return folder[: len(top)] == top
