"""The history store on PostgreSQL against the same store on SQLite (issue 21's figures).

What is timed is what a change pays for its copy, as a tool makes it: the note's writers'
lock, :meth:`HistoryStore.add` (the copy committed durably), :meth:`HistoryStore.settle`, the
lock released (the change itself, a rename, is not included). Backends, with durable commits
as shipped:

* ``sqlite``: the state directory's ``history.sqlite3`` (WAL, ``synchronous=FULL``) on this
  machine's disk;
* ``postgres``: a PostgreSQL 15 from Debian started here for the run (tests/pgcluster.py,
  ``fsync=on``, defaults otherwise: its TOAST compression, pglz), over loopback TCP, through
  fsnotes' pool.

Five measurements, each on both backends, the two interleaved where they repeat:

1. **A 4 MiB note** (prose, as notes are: it compresses): time per version and the space
   the store takes per version (SQLite: the file after a checkpoint; PostgreSQL:
   ``pg_total_relation_size`` of the history tables, TOAST included).
2. **100,000 versions of a small note** (2.2 KiB of prose each, every one different: the
   size bound's worst case, no blob shared): time per version at the start, middle and end
   of the fill, and the space per version beyond the kept bytes (what
   ``ROW_OVERHEAD_BYTES`` must cover).
3. **At the size bound**: each new version prunes the oldest one (the steady state of a
   store in long use).
4. **The prune**: every one of those versions past the age bound at once (a month away),
   one ``prune()``.
5. **A version's own cost in space**: 10,000 versions of a 115-byte note (too small to
   compress), the growth beyond those bytes: what the bound counts per row must cover it.

Prints a table and writes ``benchmarks/results/history.json``.

Run: ``.venv/bin/python benchmarks/bench_history.py [--versions N] [--large N]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import pgcluster  # noqa: E402

from fsnotes.state.history_store import DB_NAME, HistoryStore  # noqa: E402
from fsnotes.state.shared import SharedState  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "history.json"
WS = "file:///srv/notes"
MIB = 1024 * 1024
LARGE_BYTES = 4 * MIB  # the largest note fsnotes writes
SMALL_BYTES = 2200  # the benchmark vaults' average note
TINY_BYTES = 115  # as ROW_OVERHEAD_BYTES was measured on SQLite
TINY_VERSIONS = 10_000
# Versions timed at each stage of the small fill (start, middle, end) and at the bound.
STAGE = 500
# Far above what the fill keeps, so that nothing is pruned before it is measured.
UNBOUNDED = 1 << 40
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "been",
    "one",
    "all",
    "we",
    "their",
    "has",
    "would",
    "when",
    "if",
    "so",
    "no",
    "will",
    "more",
    "can",
    "said",
    "who",
    "about",
    "out",
    "up",
    "what",
    "some",
    "them",
    "into",
    "only",
    "time",
    "could",
    "other",
]


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _corpus(size: int) -> bytes:
    out: list[str] = []
    n, x = 0, 1
    while n < size:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(WORDS[(x >> 33) % len(WORDS)] + ("\n" if x % 13 == 0 else " "))
        n += len(out[-1])
    return "".join(out).encode()


CORPUS = _corpus(2 * LARGE_BYTES)


def prose(size: int, seed: int) -> bytes:
    """``size`` bytes of word-like text, different for every ``seed``."""
    start = (seed * 7919) % (len(CORPUS) - size)
    head = f"version {seed}\n".encode()
    return head + CORPUS[start : start + size - len(head)]


def keep(store: HistoryStore, data: bytes, path: str) -> float:
    t0 = time.perf_counter()
    with store.writing(WS, path):
        store.settle(store.add(WS, path, data, principal="ada", tool="notes_update"))
    return time.perf_counter() - t0


class Backend:
    def __init__(self, name: str, state_dir: Path, dsn: str | None) -> None:
        self.name = name
        self.state_dir = state_dir
        self.dsn = dsn
        self.shared = SharedState.open(state_dir, dsn)
        self.clock = Clock()

    def store(self, max_bytes: int = UNBOUNDED) -> HistoryStore:
        return HistoryStore(
            self.state_dir, max_bytes=max_bytes, clock=self.clock, shared=self.shared
        )

    def disk_bytes(self) -> int:
        """The space the store takes now."""
        if self.dsn is None:
            path = self.state_dir / DB_NAME
            db = sqlite3.connect(path)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()
            return path.stat().st_size
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'fsnotes' AND c.relkind = 'r'"
                " AND c.relname LIKE 'history_%'"
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def vacuum(self) -> None:
        """PostgreSQL: what autovacuum does after a large delete (SQLite gives pages back
        itself, incremental_vacuum)."""
        if self.dsn is None:
            return
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for table in ("history_version", "history_blob", "history_usage"):
                conn.execute(f"VACUUM fsnotes.{table}")

    def close(self) -> None:
        self.shared.close()


def ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3,
        "mean_ms": statistics.fmean(ordered) * 1e3,
    }


def measure_large(backends: list[Backend], count: int) -> dict[str, dict[str, Any]]:
    stores = {b.name: b.store() for b in backends}
    before = {b.name: b.disk_bytes() for b in backends}
    times: dict[str, list[float]] = {b.name: [] for b in backends}
    for i in range(count):  # interleaved: machine noise hits both alike
        data = prose(LARGE_BYTES, 1_000_000 + i)
        for b in backends[i % 2 :] + backends[: i % 2]:
            times[b.name].append(keep(stores[b.name], data, "large.md"))
    out = {}
    for b in backends:
        grown = b.disk_bytes() - before[b.name]
        out[b.name] = {
            **ms(times[b.name]),
            "versions": count,
            "disk_bytes_per_version": grown / count,
        }
    return out


def fill(backends: list[Backend], versions: int) -> dict[str, dict[str, Any]]:
    stores = {b.name: b.store() for b in backends}
    before = {b.name: b.disk_bytes() for b in backends}
    stages = {"start": range(STAGE), "middle": range(versions // 2, versions // 2 + STAGE),
              "end": range(versions - STAGE, versions)}  # fmt: skip
    timed = {i for r in stages.values() for i in r}
    times: dict[str, dict[int, float]] = {b.name: {} for b in backends}
    walls: dict[str, float] = {b.name: 0.0 for b in backends}
    for i in range(versions):
        data = prose(SMALL_BYTES, i)
        for b in backends[i % 2 :] + backends[: i % 2]:
            took = keep(stores[b.name], data, "small.md")
            walls[b.name] += took
            if i in timed:
                times[b.name][i] = took
        if i and i % 10_000 == 0:
            print(f"  fill: {i:,} versions", flush=True)
    out = {}
    for b in backends:
        used, count = stores[b.name].usage()
        grown = b.disk_bytes() - before[b.name]
        out[b.name] = {
            "versions": count,
            "wall_s": walls[b.name],
            "stages": {k: ms([times[b.name][i] for i in r]) for k, r in stages.items()},
            "disk_bytes_per_version": grown / count,
            "overhead_bytes_per_version": (grown - count * SMALL_BYTES) / count,
            "counted_bytes": used,
        }
    return out


def row_overhead(backends: list[Backend], count: int) -> dict[str, dict[str, Any]]:
    """The space per version beyond the kept bytes, with notes too small to compress
    (TINY_BYTES): what the size bound's row overhead must cover."""
    stores = {b.name: b.store() for b in backends}
    before = {b.name: b.disk_bytes() for b in backends}
    for i in range(count):
        data = f"tiny note {i:09d} ".encode().ljust(TINY_BYTES, b".")
        for b in backends:
            stores[b.name].add(WS, "tiny.md", data, principal="ada", tool="notes_update")
    return {
        b.name: {
            "versions": count,
            "overhead_bytes_per_version": (b.disk_bytes() - before[b.name]) / count - TINY_BYTES,
            "counted_overhead_bytes": stores[b.name].row_overhead,
        }
        for b in backends
    }


def at_bound(backends: list[Backend], versions: int) -> dict[str, dict[str, Any]]:
    stores = {}
    for b in backends:
        used, _ = b.store().usage()
        stores[b.name] = b.store(max_bytes=used)  # full: every add prunes to make room
    times: dict[str, list[float]] = {b.name: [] for b in backends}
    for i in range(STAGE):
        data = prose(SMALL_BYTES, versions + i)
        for b in backends[i % 2 :] + backends[: i % 2]:
            times[b.name].append(keep(stores[b.name], data, "small.md"))
    return {b.name: {**ms(times[b.name]), "versions": STAGE} for b in backends}


def prune_all(backends: list[Backend]) -> dict[str, dict[str, Any]]:
    out = {}
    for b in backends:
        store = b.store()
        before = b.disk_bytes()
        b.clock.now += store.max_age_s + 1
        t0 = time.perf_counter()
        pruned = store.prune()
        took = time.perf_counter() - t0
        b.vacuum()
        out[b.name] = {
            "pruned": pruned,
            "seconds": took,
            "us_per_version": took / max(pruned, 1) * 1e6,
            "disk_bytes_before": before,
            "disk_bytes_after": b.disk_bytes(),
            "left": store.usage(),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=100_000, help="small-note versions")
    parser.add_argument("--large", type=int, default=20, help="4 MiB versions")
    args = parser.parse_args()
    if args.versions < 3 * STAGE:
        parser.error(f"--versions must be at least {3 * STAGE}")
    why = pgcluster.missing()
    if why is not None:
        print(f"SKIPPED: {why}")
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="fsnotes-bench-history-") as tmp,
        pgcluster.running(durable=True) as cluster,
    ):
        (Path(tmp) / "sqlite").mkdir(mode=0o700)
        (Path(tmp) / "pg").mkdir(mode=0o700)
        backends = [
            Backend("sqlite", Path(tmp) / "sqlite", None),
            Backend("postgres", Path(tmp) / "pg", cluster.new_database()),
        ]
        try:
            for b in backends:  # warm-up: tables made, connections pooled
                keep(b.store(), b"warm\n", "warm.md")
            tiny = row_overhead(backends, TINY_VERSIONS)
            large = measure_large(backends, args.large)
            print("4 MiB note done", flush=True)
            small = fill(backends, args.versions)
            bound = at_bound(backends, args.versions)
            pruned = prune_all(backends)
        finally:
            for b in backends:
                b.close()

    names = [b.name for b in backends]
    print(f"\n{'':<44} {'sqlite':>12} {'postgres':>12} {'pg/sqlite':>10}")

    def row(label: str, values: list[float], unit: str) -> None:
        ratio = values[1] / values[0] if values[0] else float("nan")
        cells = " ".join(f"{v:>9.2f} {unit:<2}" for v in values)
        print(f"{label:<44} {cells} {ratio:>9.2f}x")

    row("4 MiB note: time per version, p50", [large[n]["p50_ms"] for n in names], "ms")
    row(
        "4 MiB note: disk per version",
        [large[n]["disk_bytes_per_version"] / MIB for n in names],
        "Mi",
    )
    for stage in ("start", "middle", "end"):
        row(f"small note: time per version, p50 ({stage})",
            [small[n]["stages"][stage]["p50_ms"] for n in names], "ms")  # fmt: skip
    row("small note: time per version, p99 (end)",
        [small[n]["stages"]["end"]["p99_ms"] for n in names], "ms")  # fmt: skip
    row(
        f"{args.versions:,} versions: disk per version",
        [small[n]["disk_bytes_per_version"] for n in names],
        "B",
    )
    row(
        "  of which beyond the kept bytes",
        [small[n]["overhead_bytes_per_version"] for n in names],
        "B",
    )
    row("at the bound (each prunes the oldest), p50", [bound[n]["p50_ms"] for n in names], "ms")
    row(f"{TINY_VERSIONS:,} tiny notes: bytes per version beyond them",
        [tiny[n]["overhead_bytes_per_version"] for n in names], "B")  # fmt: skip
    row(f"prune of {args.versions:,} expired, whole", [pruned[n]["seconds"] for n in names], "s")
    row("  per version", [pruned[n]["us_per_version"] for n in names], "us")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "history store, PostgreSQL vs SQLite",
                "machine": {
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                    "cpus": os.cpu_count(),
                    "load_average": os.getloadavg(),
                },
                "large_note_bytes": LARGE_BYTES,
                "small_note_bytes": SMALL_BYTES,
                "results": {
                    "row_overhead": tiny,
                    "large": large,
                    "small": small,
                    "at_bound": bound,
                    "prune": pruned,
                },
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
