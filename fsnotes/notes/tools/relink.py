"""Keeping links working when a note moves (``notes_move`` with ``updateLinks``).

The rule, as Obsidian's link updater does it: before the move, note where every link that
the move can affect points; after it, every such link must point to the same note (the
moved note at its new path). Links are rewritten only where that would otherwise fail:

* links to the moved note that no longer name it (a new name, a path form, a name that is
  now ambiguous), in every note that holds one;
* links that named another note but would now name the moved one (it took a name that
  wins the shortest-path tie-break): given enough folders to keep naming their note;
* the moved note's own relative links (Markdown links, ``./`` and ``../`` wikilinks), when
  it changed folder: recomputed from its new folder, to the same files (attachments and
  missing notes included).

Which links the move can affect is known from the index without reading any note: only
links whose leaf (the stem a note must have, see :mod:`fsnotes.notes.text.links`) is the
moved note's old or new stem, and the moved note's own. The notes that need a rewrite are
counted before anything moves (more than :data:`MAX_LINK_REWRITES` refuses the move); each
is then read, rewritten from the text it holds now, and written through the same update
that ``notes_update`` uses (atomic, etag-checked against that read, and covered by whatever
that update records), as a note of the moved note's workspace, which the move was
authorized for: no note is authorized again (workspaces never nest: the configuration
refuses it, and a run-time folder may not overlap another workspace). A note that cannot
be rewritten (changed meanwhile, too large, not readable, a link no wikilink can write) is
named in the result with the reason; the rest of the move stands.

A link keeps its form: only its target changes (``[[x|alias]]``, ``[[x#heading]]``,
embeds, Markdown titles and fragments stay), a wikilink written without an extension
stays without one (unless two notes then differ only by it), with as few folders as
still name the note and never fewer than it had, and a Markdown link is recomputed
relative to the note that holds it, with spaces and non-ASCII characters encoded as it
encoded them.

Not atomic across notes, but resumable: a server killed halfway leaves the notes not yet
rewritten pointing to the old path (each note is whole, old or new), and the move's row in
the move journal (:mod:`fsnotes.state.moves`, written by the service before the rename,
from :meth:`MovePlan.record`). The same move called again finishes the job
(:mod:`fsnotes.notes.tools.resume`): the moved note is rewritten first and alone so the row
can say it is done, and each linker's planned etag tells whether the killed run reached it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

from fsnotes.notes.index.catalog import Catalog, CatalogUnavailable, WriteBatch
from fsnotes.notes.index.linkgraph import candidate_rows, linking
from fsnotes.notes.store import NoteError, display
from fsnotes.notes.text import links as rules
from fsnotes.notes.text.edits import Edit
from fsnotes.notes.text.markdown import split_frontmatter
from fsnotes.notes.tools.errors import ServiceError, explain, index_unavailable
from fsnotes.notes.tools.located import Located
from fsnotes.notes.tools.models import LinkRewrite, LinkSkip, WriteResult
from fsnotes.notes.workers import borrowed_pool
from sandbox import errors as sx
from sandbox import uri as lexical
from sandbox.uri import Components


class Mover(Protocol):
    """What a move's rewrites need of one request's view of the notes (``Notes`` in
    service.py, which calls this module: the view is passed in, never imported)."""

    def catalog(self, loc: Located, *, fresh: bool = False) -> Catalog: ...

    def update_located(
        self,
        loc: Located,
        content: str | None,
        edits: Sequence[Edit | tuple[str, str]] | None,
        etag: str | None,
    ) -> WriteResult: ...


log = logging.getLogger("fsnotes.notes")


# Notes one move rewrites at most. Each rewrite is a whole-note atomic write (temp file,
# fsync, rename, directory fsync) and the note parsed again for the index: measured here
# at 100k notes (benchmarks/bench_links.py, two runs), 1,003 notes took 7.5 to 15.1 s (10
# to 12 ms a note, four at a time), so 2,000 take about 20 to 30 s, within the minute hosts
# give a tool call. A move that would need more is refused before anything changes.
MAX_LINK_REWRITES = 2_000
# Notes rewritten at once. A rewrite waits mostly on its two fsyncs (the note, its folder),
# and the disk commits concurrent ones together: measured here, 1 writer took 8.3 ms a
# note, 4 took 0.9 ms, 8 took 0.55 ms. Four keep most of that while bounding memory: each
# holds one note being rewritten (about 17 MiB for a 4 MiB note, see docs/limits.md's
# figures), and the server's other blocking steps go on beside them. The threads are taken
# from the limiter all blocking steps share (fsnotes.notes.workers): as many as are free, up
# to this; with none free the move's own thread rewrites the notes one by one.
REWRITE_WORKERS = 4

# One note's rewrite: what was rewritten (None: nothing) and what could not be.
_Rewritten = tuple[LinkRewrite | None, list[LinkSkip]]


@dataclass
class MovePlan:
    """What a move's link update needs, worked out from the index before the move."""

    src: Components
    dst: Components
    leaves: frozenset[str]
    before: list[Components]  # the notes with either stem, before the move (checked)
    after: list[Components]  # the same, after it
    linkers: list[Components] = field(default_factory=list)  # other notes to rewrite
    # Each linker's etag in the index when planned: on a resume, a linker whose etag is
    # still this was not rewritten yet (see resume_plan).
    etags: dict[Components, str] = field(default_factory=dict)
    own_done: bool = False  # a resumed move whose moved note was rewritten already

    def record(self) -> dict[str, Any]:
        """What the move journal keeps of this plan (JSON), to finish it after a kill."""
        return {
            "before": [list(p) for p in self.before],
            "linkers": [[list(p), self.etags.get(p)] for p in self.linkers],
            "moved": self.etags.get(self.dst),
        }


def resume_plan(src: Components, dst: Components, record: dict[str, Any]) -> MovePlan:
    """The plan of an interrupted move of ``src`` to ``dst``, from its journal ``record``
    (:meth:`MovePlan.record`): the links are judged against where they pointed before the
    move began, not against the index now (which already holds the moved note)."""
    before = [tuple(str(c) for c in p) for p in record.get("before", [])]
    if src not in before:
        before.append(src)
    linkers: list[Components] = []
    etags: dict[Components, str] = {}
    for parts, etag in record.get("linkers", []):
        linker = tuple(str(c) for c in parts)
        linkers.append(linker)
        if isinstance(etag, str):
            etags[linker] = etag
    moved = record.get("moved")
    if isinstance(moved, str):
        etags[dst] = moved
    leaves = frozenset({_leaf(src), _leaf(dst)})
    after = [p for p in before if p != src] + [dst]
    return MovePlan(src, dst, leaves, before, after, linkers, etags)


def _leaf(parts: Components) -> str:
    return rules.stem_of(parts[-1]).casefold()


def _intended(plan: MovePlan, target: rules.LinkTarget) -> Components | None:
    """The note ``target`` named before the move, at its path after it (None: none)."""
    before = rules.resolve(target, plan.before)
    return plan.dst if before == plan.src else before


def plan_move(notes: Mover, loc: Located, dst: Located) -> MovePlan:
    """The notes a move of ``loc`` to ``dst`` must rewrite. Raises ServiceError (nothing
    changed) when the index cannot tell yet, or when there are too many."""
    catalog = notes.catalog(loc, fresh=True)
    extensions = loc.store.extensions
    src, to = loc.parts, dst.parts
    leaves = frozenset({_leaf(src), _leaf(to)})
    with index_unavailable():
        status = catalog.status()
        if not status.complete:
            raise ServiceError(
                "The workspace is still being indexed, so not every link to this note can "
                "be found yet; try again shortly, or move it with updateLinks: false."
            )
        rows = candidate_rows(catalog, sorted(leaves))
        before = [row.parts for row in rows if row.parts != to]
        if src not in before:
            before.append(src)
        plan = MovePlan(src, to, leaves, before, [p for p in before if p != src] + [to])
        need: set[Components] = set()
        etags: dict[Components, str] = {}
        for link in linking(catalog, sorted(leaves)):
            holder = link.linker.parts
            if holder == src or holder in need:
                continue  # the moved note itself is always re-read
            target = rules.from_row(link.mode, link.want, extensions)
            intended = _intended(plan, target)
            if intended is not None and rules.resolve(target, plan.after) != intended:
                need.add(holder)
                etags[holder] = link.linker.etag
    if len(need) + 1 > MAX_LINK_REWRITES:
        raise ServiceError(
            f"Moving this note would rewrite links in {len(need):,} notes, more than the "
            f"{MAX_LINK_REWRITES:,} one move may change; nothing was moved. Move it with "
            "updateLinks: false, or move fewer linked notes at once."
        )
    plan.linkers = sorted(need)
    # The moved note's etag (checked against its file), kept under its new path: on a
    # resume, a moved note that no longer has it had its own links rewritten already.
    moved = next((row.etag for row in rows if row.parts == src), None)
    if moved is not None:
        etags[to] = moved
    plan.etags = etags
    return plan


@dataclass
class Rewrite:
    text: str
    changed: int  # links rewritten
    problems: list[str]  # links that could not be


def rewrite(
    text: str,
    plan: MovePlan,
    holder_before: Components,
    extensions: Sequence[str],
    refs: Sequence[rules.Occurrence] | None = None,
    *,
    settled: bool = False,
) -> Rewrite:
    """``text`` (the note that was at ``holder_before``) with its links rewritten for the
    move ``plan`` describes (see the module docstring). ``refs``: its links, when already
    parsed from exactly this text. ``settled``: the note may have been rewritten already
    (a resumed move, the note changed since the plan): a link that names the moved note
    now is left as it is."""
    moved = holder_before == plan.src
    holder = plan.dst if moved else holder_before
    if refs is None:
        _front, body, _start = split_frontmatter(text)
        refs = rules.occurrences(body, len(text) - len(body))
    edits: list[tuple[int, int, str]] = []
    problems: list[str] = []
    for occ in refs:
        target = rules.classify(occ, holder_before, extensions)
        if target.problem is not None:
            continue  # outside the workspace or undecodable: nothing to keep pointing at
        if settled and rules.resolve(target, plan.after) == plan.dst:
            continue
        new: str | None
        if target.style == "name":
            if target.leaf not in plan.leaves:
                continue
            intended = _intended(plan, target)
            if intended is None or rules.resolve(target, plan.after) == intended:
                continue
            new = rules.render_name(occ, intended, plan.after, extensions)
            if new is None:
                problems.append(
                    f"a link to '{display(intended)}' cannot be written as a wikilink "
                    "(its path holds '#', '|' or a bracket, or differs from another only "
                    "in case)"
                )
                continue
        else:
            intended = _intended(plan, target) if target.leaf in plan.leaves else None
            if intended is not None:
                same_folder = holder[:-1] == holder_before[:-1]
                if same_folder and rules.resolve(target, plan.after) == intended:
                    continue
                new = _path_to_note(occ, holder, intended, target, plan, extensions)
            elif moved and holder[:-1] != holder_before[:-1]:
                new = rules.render_path(occ, holder, target.parts)  # the same file as before
            else:
                continue
            if new is None:
                problems.append(f"the link '{occ.target}' cannot be rewritten")
                continue
        if new != occ.target:
            edits.append((occ.target_start, occ.target_end, new))
    for start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    return Rewrite(text, len(edits), problems)


def _path_to_note(
    occ: rules.Occurrence,
    holder: Components,
    note: Components,
    target: rules.LinkTarget,
    plan: MovePlan,
    extensions: Sequence[str],
) -> str | None:
    """A relative link from ``holder`` that names ``note``, without the extension if the
    link had none and that still names it."""
    forms = [note] if target.explicit else [(*note[:-1], rules.stem_of(note[-1])), note]
    for parts in forms:
        text = rules.render_path(occ, holder, parts)
        probe = rules.Occurrence(occ.kind, occ.embed, text, None, None, 0, 0, 0, 0, occ.angle)
        if rules.resolve(rules.classify(probe, holder, extensions), plan.after) == note:
            return text
    return None


def apply_move(
    notes: Mover,
    loc: Located,
    dst: Located,
    plan: MovePlan,
    *,
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    own: bool = True,
    own_done: Callable[[], None] | None = None,
    resuming: bool = False,
) -> tuple[list[LinkRewrite], list[LinkSkip]]:
    """Rewrite, after the move, the moved note itself (first, alone; then ``own_done()``),
    then every note ``plan`` names (a few at a time, their index writes batched), and say
    what was done and what was not.

    ``progress(done, total)`` is called after each note; once ``stop()`` is true (the call
    was cancelled) no further note is started: those left are listed as not rewritten, each
    note being either rewritten whole or untouched. ``own`` false: the moved note's own
    links were rewritten already (a resumed move). ``resuming``: a linker whose etag is not
    the plan's any more may hold rewritten links: those naming the moved note are kept."""
    catalog = notes.catalog(loc)
    batch = WriteBatch(catalog)
    check = plan.etags if resuming else None

    def one(parts: Components) -> _Rewritten:
        if stop is not None and stop():
            uri = lexical.to_file_uri(loc.workspace.components + parts)
            reason = "not rewritten: the move was cancelled before this note's turn"
            return None, [LinkSkip(uri=uri, path=display(parts), reason=reason)]
        with catalog.batched(batch):
            return _rewrite_one(notes, loc, plan, parts, check)

    done: list[LinkRewrite] = []
    skipped: list[LinkSkip] = []
    total = len(plan.linkers) + (1 if own else 0)
    first: list[_Rewritten] = []
    try:
        if own:
            # Alone and first, so that once it is recorded done (own_done) a resume after a
            # kill knows not to shift the moved note's relative links a second time.
            first.append(one(plan.dst))
            batch.flush()
            if own_done is not None and not (stop is not None and stop()):
                own_done()
        with borrowed_pool(REWRITE_WORKERS, "fsnotes-relink") as pool:
            todo = plan.linkers
            rest = map(one, todo) if pool is None else _in_pool(pool, one, todo)
            results = itertools.chain(first, rest)
            for count, (rewritten, problems) in enumerate(results, 1):
                if rewritten is not None:
                    done.append(rewritten)
                skipped.extend(problems)
                if progress is not None:
                    progress(count, total)
                if batch.full:
                    batch.flush()
    finally:
        batch.flush()
    done.sort(key=lambda r: r.path)
    skipped.sort(key=lambda r: r.path)
    if skipped:
        log.info("move of %s: %d link rewrite(s) not done", display(plan.src), len(skipped))
    return done, skipped


def _in_pool(
    pool: ThreadPoolExecutor,
    one: Callable[[Components], _Rewritten],
    todo: Iterable[Components],
) -> Iterator[_Rewritten]:
    """``one`` of each of ``todo`` on the pool's threads, results as they finish."""
    pending = iter(todo)
    running: set[Future[_Rewritten]] = set()
    # A few rewrites ahead of the workers, never the whole list: what is in flight (and in
    # the batch, written from the caller's thread whenever it fills) stays bounded.
    for parts in itertools.islice(pending, 2 * REWRITE_WORKERS):
        running.add(pool.submit(one, parts))
    while running:
        finished, running = wait(running, return_when=FIRST_COMPLETED)
        for future in finished:
            following = next(pending, None)
            if following is not None:
                running.add(pool.submit(one, following))
            yield future.result()


def _rewrite_one(
    notes: Mover,
    loc: Located,
    plan: MovePlan,
    parts: Components,
    check: dict[Components, str] | None = None,
) -> tuple[LinkRewrite | None, list[LinkSkip]]:
    uri = lexical.to_file_uri(loc.workspace.components + parts)
    try:
        note = loc.store.read(parts)
    except (sx.SandboxError, NoteError) as exc:
        return None, [LinkSkip(uri=uri, path=display(parts), reason=explain(exc, parts))]
    holder_before = plan.src if parts == plan.dst else parts
    settled = check is not None and check.get(parts) != note.etag
    if settled and parts == plan.dst and check is not None and parts in check:
        # A resume, the moved note changed since the plan: rewritten by the killed run
        # just before it could record that (or edited since); never shifted a second time.
        return None, []
    result = rewrite(
        note.text, plan, holder_before, loc.store.extensions, note.meta.refs, settled=settled
    )
    skipped = [LinkSkip(uri=uri, path=display(parts), reason=p) for p in result.problems]
    if not result.changed:
        return None, skipped
    try:
        here = Located(loc.workspace, loc.store, parts)
        written = notes.update_located(here, content=result.text, edits=None, etag=note.etag)
    except (ServiceError, CatalogUnavailable) as exc:
        return None, [*skipped, LinkSkip(uri=uri, path=display(parts), reason=str(exc))]
    return LinkRewrite(
        uri=uri, path=display(parts), links=result.changed, etag=written.etag
    ), skipped


__all__ = [
    "MAX_LINK_REWRITES",
    "MovePlan",
    "Rewrite",
    "apply_move",
    "plan_move",
    "resume_plan",
    "rewrite",
]
