"""Every workspace's catalog, and the background work that keeps their indexes fresh.

:class:`Catalogs` opens a workspace's index the first time it is needed (configured
workspaces and folders granted at run time alike) and runs, for as long as the server
serves (:meth:`Catalogs.run`, entered from the server's lifespan):

* a full incremental rescan of each workspace at start, in a worker thread: ``initialize``
  and every other request are answered meanwhile (queries answer from what is indexed and
  say how far indexing is);
* an inotify watcher whose events re-check the named notes or rescan the folders that
  appeared, within about :data:`DEBOUNCE_S` of the change;
* a full rescan every ``rescan_interval`` seconds, the ground truth where inotify says
  nothing (network filesystems, Docker Desktop bind mounts) or overflowed.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio

from fsnotes.notes.index.catalog import Catalog, CatalogUnavailable
from fsnotes.notes.index.connections import IndexProblem
from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.schema import SCHEMA_VERSION
from fsnotes.notes.store import NoteStore
from fsnotes.security.grants import Workspace
from sandbox.watch import DirectoryWatcher, WatchEvent, WatchUnavailable, max_user_watches

log = logging.getLogger("fsnotes.index")

T = TypeVar("T")

# Default interval of the full rescan: the freshness bound where inotify gives no events. A
# rescan lists every folder and stats every note (about 1 s of one core per 100k notes here,
# see benchmarks/bench_vault.py), so once a minute costs ~2% of a core for a 100k vault.
DEFAULT_RESCAN_INTERVAL_S = 60.0
# After the first event of a burst, wait this long for the rest (an editor's save is
# several events) before re-checking: the freshness goal is one second.
DEBOUNCE_S = 0.2
# Directories watched per process. inotify's budget is per user and shared with editors
# and sync tools (max_user_watches is 8192 on older kernels); we take at most a quarter of
# it, and never more than this. Directories past it are kept fresh by the rescan only.
MAX_WATCHES = 65_536
# How often the supervisor looks for new workspaces (granted at run time) and due rescans.
TICK_S = 1.0
# A query that arrives while a workspace's first indexing runs waits up to this long for it
# (sending notifications/progress when the request asked for them, and honouring
# cancellation), then answers from what is indexed so far, saying how far indexing is.
# A vault of 10k notes is indexed well within it; hosts time tool calls out after a minute.
INDEX_WAIT_S = 10.0
INDEX_POLL_S = 0.25

ProgressReport = Callable[[float, float | None, str | None], Awaitable[None]]


async def until_indexed(
    catalog: Catalog, report: ProgressReport, *, bound: float = INDEX_WAIT_S
) -> None:
    """Wait (at most ``bound`` seconds) until ``catalog``'s first full indexing is done."""
    with anyio.move_on_after(bound):
        while True:
            try:
                status = await anyio.to_thread.run_sync(catalog.status)
            except CatalogUnavailable:
                return  # the query itself says why
            if status.complete:
                return
            if status.total:
                await report(
                    float(status.done),
                    float(status.total),
                    f"Indexing the workspace: {status.done:,} of {status.total:,} notes",
                )
            await anyio.sleep(INDEX_POLL_S)


Source = Callable[[], Sequence[tuple[Workspace, NoteStore]]]


def fingerprint(extensions: Sequence[str]) -> str:
    """What an index depends on besides the files: the schema and what counts as a note."""
    raw = f"{SCHEMA_VERSION}|{','.join(sorted(extensions))}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def environment() -> dict[str, object]:
    """What the search index can count on here, for ``fsnotes doctor`` (JSON types)."""
    from fsnotes.notes.index.db import sqlite

    facts: dict[str, object] = {"sqlite": sqlite.sqlite_version}
    try:
        probe = sqlite.connect(":memory:")
        probe.execute("CREATE VIRTUAL TABLE t USING fts5(x, content='', contentless_delete=1)")
        probe.close()
        facts["fts5"] = True
    except sqlite.Error as exc:
        facts["fts5"] = False
        facts["fts5_detail"] = str(exc)
    kernel = max_user_watches()
    facts.update(
        max_user_watches=kernel,
        watch_budget=watch_budget(),
        default_rescan_interval_s=DEFAULT_RESCAN_INTERVAL_S,
    )
    try:
        DirectoryWatcher(1).close()
        facts["inotify"] = True
    except WatchUnavailable as exc:
        facts["inotify"] = False
        facts["inotify_detail"] = str(exc)
    return facts


def watch_budget() -> int:
    kernel = max_user_watches()
    return MAX_WATCHES if kernel is None else max(0, min(MAX_WATCHES, kernel // 4))


@dataclass
class _CatalogEntry:
    catalog: Catalog
    store: NoteStore
    last_scan: float | None = None  # monotonic time the last full rescan finished
    failures: int = 0  # full rescans failed in a row (a full disk, say)
    retry_at: float = 0.0  # monotonic time before which a failed rescan is not retried


class Catalogs:
    """The catalogs of every workspace (thread-safe lookups)."""

    def __init__(
        self,
        state_dir: Path,
        extensions: Sequence[str],
        source: Source,
        *,
        rescan_interval: float = DEFAULT_RESCAN_INTERVAL_S,
        watch: bool = True,
    ) -> None:
        self.state_dir = state_dir
        self.fingerprint = fingerprint(extensions)
        self.source = source
        self.rescan_interval = rescan_interval
        self.watch = watch
        # Read now: the server builds its catalogs before the Landlock jail goes up, and
        # /proc/sys (the kernel's watch budget) is not readable inside it.
        self.watch_budget = watch_budget()
        self.watcher: DirectoryWatcher | None = None
        self.watch_problem: str | None = None
        self._entries: dict[str, _CatalogEntry] = {}
        self._lock = threading.Lock()
        # True while run() keeps the indexes fresh in the background. Without it (the
        # server used as a library, as the tests do), every query first brings the index up
        # to date with an incremental rescan, so answers are as fresh as a walk.
        self.background = False

    def of(self, ws: Workspace, store: NoteStore) -> Catalog:
        """The catalog of ``ws`` (opened, and its index created, on first use)."""
        with self._lock:
            entry = self._entries.get(ws.name)
            if entry is not None and entry.store is store:
                return entry.catalog
        index = NoteIndex.open(
            self.state_dir, store.root.identity, self.fingerprint, store.extensions
        )
        catalog = Catalog(ws.name, store, index, ws.components)
        with self._lock:
            entry = self._entries.get(ws.name)
            if entry is not None and entry.store is store:
                index.close()
                return entry.catalog
            if entry is not None:  # a new folder under an old name (revoked, re-granted)
                self._forget(ws.name, entry)
            self._entries[ws.name] = _CatalogEntry(catalog, store)
        self._hook_watcher(catalog)
        return catalog

    def fresh(self, ws: Workspace, store: NoteStore) -> Catalog:
        """The catalog of ``ws`` for a query: up to date now when nothing runs in the
        background (see :attr:`background`), else as the background keeps it."""
        catalog = self.of(ws, store)
        if not self.background:
            catalog.rescan()
        return catalog

    def _forget(self, name: str, entry: _CatalogEntry) -> None:
        if self.watcher is not None:
            self.watcher.drop_token(id(entry.catalog))
        entry.catalog.index.close()

    def current(self) -> list[Catalog]:
        """The catalogs of every workspace there is now (opening new ones)."""
        out = []
        for ws, store in self.source():
            try:
                out.append(self.of(ws, store))
            except (IndexProblem, OSError) as exc:
                log.warning("cannot open the index of %r: %s", ws.name, exc)
        return out

    def close(self) -> None:
        with self._lock:
            entries, self._entries = dict(self._entries), {}
        for name, entry in entries.items():
            self._forget(name, entry)
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    # --- watching ------------------------------------------------------------------------

    def _hook_watcher(self, catalog: Catalog) -> None:
        watcher = self.watcher
        if watcher is None:
            return
        root = catalog.store.root
        token = id(catalog)
        catalog.on_folder = lambda parts: _ignore(watcher.add(root, parts, token))

    def start_watching(self) -> None:
        if not self.watch:
            self.watch_problem = "turned off"
            return
        try:
            self.watcher = DirectoryWatcher(self.watch_budget)
        except WatchUnavailable as exc:
            self.watch_problem = str(exc)
            log.info(
                "no inotify watcher (%s): changes made outside fsnotes are seen by "
                "the rescan every %.0f s",
                exc,
                self.rescan_interval,
            )
            return
        with self._lock:
            catalogs = [e.catalog for e in self._entries.values()]
        for catalog in catalogs:
            self._hook_watcher(catalog)

    def _catalog_by_token(self, token: object) -> Catalog | None:
        with self._lock:
            for entry in self._entries.values():
                if id(entry.catalog) == token:
                    return entry.catalog
        return None

    def apply_events(self, events: Sequence[WatchEvent]) -> None:
        """Act on a burst of watcher events (in a worker thread)."""
        done: set[tuple[int, tuple[str, ...]]] = set()
        for event in events:
            if event.overflow:
                log.info("inotify queue overflowed; rescanning every workspace")
                with self._lock:
                    for entry in self._entries.values():
                        entry.catalog.mark_for_rescan()
                continue
            catalog = self._catalog_by_token(event.token)
            if catalog is None or event.name is None or event.name.startswith("."):
                continue
            parts = (*event.parts, event.name)
            key = (id(catalog), parts)
            if event.is_dir:
                if event.gone:
                    if self.watcher is not None:
                        self.watcher.drop_below(id(catalog), parts)
                    catalog.forget_folder(parts)
                else:
                    catalog.scan_folder(parts)
                done.discard(key)
                continue
            if key in done:
                continue
            done.add(key)
            catalog.refresh(parts)

    async def _watch_loop(self, watcher: DirectoryWatcher) -> None:
        while True:
            await anyio.wait_readable(watcher.fileno())
            events = watcher.read()
            await anyio.sleep(DEBOUNCE_S)
            events += watcher.read()
            if events:
                try:
                    await anyio.to_thread.run_sync(self.apply_events, events)
                except Exception as exc:  # hints only: the rescan still covers the change
                    log.warning("watcher events not applied: %s", type(exc).__name__)

    # --- the supervisor ------------------------------------------------------------------

    async def run(self) -> None:
        """Build, watch and rescan until cancelled (the server's lifespan)."""
        self.start_watching()
        self.background = True
        try:
            await self._supervise()
        finally:
            self.background = False

    async def _supervise(self) -> None:
        async with anyio.create_task_group() as tg:
            if self.watcher is not None:
                tg.start_soon(self._watch_loop, self.watcher)
            while True:
                for catalog in await anyio.to_thread.run_sync(self.current):
                    if self._due(catalog):
                        await self._rescan(catalog)
                await anyio.sleep(TICK_S)

    def _due(self, catalog: Catalog) -> bool:
        with self._lock:
            entry = self._entries.get(catalog.name)
        if entry is None or entry.catalog is not catalog:
            return False
        if time.monotonic() < entry.retry_at:
            return False
        if catalog.needs_scan or entry.last_scan is None:
            return True
        return time.monotonic() - entry.last_scan >= self.rescan_interval

    async def _rescan(self, catalog: Catalog) -> None:
        stop = threading.Event()
        failed = False
        try:
            report = await anyio.to_thread.run_sync(
                lambda: catalog.rescan(stop=stop.is_set), abandon_on_cancel=True
            )
        except (IndexProblem, OSError) as exc:
            log.warning("rescan of %r failed (%s); trying again later", catalog.name, exc)
            report, failed = None, True
        except Exception as exc:  # housekeeping must never stop the server
            # The type only: an unexpected error's text could name a host path (a Root
            # closed under the scan says ValueError).
            log.warning("rescan of %r stopped: %s", catalog.name, type(exc).__name__)
            report, failed = None, True
        finally:
            stop.set()  # a cancelled (abandoned) scan stops at its next folder or batch
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(catalog.name)
            if entry is None or entry.catalog is not catalog:
                return
            if failed:
                # Back off: a full disk or a failing directory is not fixed in a second, and
                # every attempt lists the whole workspace again.
                entry.failures += 1
                entry.retry_at = now + min(2.0**entry.failures, self.rescan_interval)
            else:
                entry.failures, entry.retry_at = 0, 0.0
            if report is not None or not catalog.needs_scan:
                entry.last_scan = now


def _ignore(_value: object) -> None:
    return None
