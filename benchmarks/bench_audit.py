"""What the audit log's hash chain costs a mutation, against the unchained log, same run.

Timed: one mutation's audit rows, the intent (committed durably before the mutation) and the
outcome (asynchronous commit), as ``Auditor.record`` writes them around a mutation that does
nothing. Two writers per backend:

* ``chained``: fsnotes' log as shipped (the next chain position from the head row, the row
  with its hash, the new head; likewise for the outcome: fsnotes/state/audit_chain.py);
* ``unchained``: the two statements the log wrote before the chain (an ``INSERT ...
  RETURNING id`` committing on its own, an ``UPDATE`` of the outcome with an asynchronous
  commit), on a table of their own in the same database: the peer.

Backends: the state directory's SQLite file (WAL, ``synchronous=FULL``) on this machine's disk
and a PostgreSQL 15 started here (tests/pgcluster.py, ``fsync=on``) over loopback TCP. Rounds
interleave the writers so machine noise hits them alike; p50 and p99 over all mutations.
Prints a table and writes ``benchmarks/results/audit.json``.

Run: ``.venv/bin/python benchmarks/bench_audit.py [--rounds N] [--mutations N]``
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import pgcluster  # noqa: E402

from fsnotes.state.audit import Auditor, AuditUnavailable, Entry, open_audit  # noqa: E402
from fsnotes.state.database import Database  # noqa: E402
from fsnotes.state.shared import SharedState  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "audit.json"
ENTRY = Entry("ada", "update", "notes_update", "notes", "a/b.md", "e" * 64)
# The table the unchained peer writes: the audit table as it was before the chain.
PEER_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS audit_peer ("
    " id INTEGER PRIMARY KEY, at REAL NOT NULL, finished REAL,"
    " principal TEXT NOT NULL, action TEXT NOT NULL, tool TEXT NOT NULL,"
    " workspace TEXT NOT NULL, path TEXT, path_after TEXT,"
    " etag_before TEXT, etag_after TEXT, confirmed_by TEXT,"
    " outcome TEXT NOT NULL, detail TEXT, instance TEXT NOT NULL)",
)


def unchained(db: Database) -> float:
    """The log's two writes before the chain (its SQL as it was), timed."""
    t0 = time.perf_counter()
    with db.reading() as sql:
        row = sql.execute(
            "INSERT INTO audit_peer(at, principal, action, tool, workspace, path, etag_before, "
            "confirmed_by, outcome, detail, instance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            (time.time(), ENTRY.principal, ENTRY.action, ENTRY.tool, ENTRY.workspace,
             ENTRY.path, ENTRY.etag_before, None, "pending", None, "bench"),
        ).fetchall()[0][0]  # fmt: skip
    with db.transaction(durable=False) as sql:
        sql.execute(
            "UPDATE audit_peer SET outcome = ?, finished = ?, path_after = ?, "
            "etag_before = COALESCE(?, etag_before), etag_after = ?, "
            "detail = COALESCE(?, detail) WHERE id = ? AND outcome = ?",
            ("done", time.time(), None, None, "f" * 64, None, row, "pending"),
        )
    return time.perf_counter() - t0


def chained(auditor: Auditor) -> float:
    t0 = time.perf_counter()
    with auditor.record(ENTRY) as ticket:
        ticket.done(etag_after="f" * 64)
    return time.perf_counter() - t0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--mutations", type=int, default=50, help="per writer per round")
    args = parser.parse_args()
    why = pgcluster.missing()
    if why is not None:
        print(f"SKIPPED: {why}")
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="fsnotes-bench-audit-") as tmp,
        pgcluster.running(durable=True) as cluster,
    ):
        backends = {
            "sqlite": SharedState.open(Path(tmp), None),
            "postgres tcp": SharedState.open(Path(tmp), cluster.new_database()),
        }
        writers: dict[str, Callable[[], float]] = {}
        for name, backend in backends.items():
            auditor = Auditor(open_audit(backend, clock=time.time), instance="bench")
            peer = backend.database("audit", timeout=5.0, error=AuditUnavailable)
            peer.create(PEER_SCHEMA)
            writers[f"{name} chained"] = lambda a=auditor: chained(a)  # type: ignore[misc]
            writers[f"{name} unchained"] = lambda d=peer: unchained(d)  # type: ignore[misc]
        names = list(writers)
        for write in writers.values():  # warm-up: connections made, statements prepared
            for _ in range(10):
                write()
        samples: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                samples[name] += [writers[name]() for _ in range(args.mutations)]
        for b in backends.values():
            b.close()
    rows: list[dict[str, Any]] = []
    for backend in ("sqlite", "postgres tcp"):
        base = statistics.median(samples[f"{backend} unchained"])
        for kind in ("unchained", "chained"):
            s = samples[f"{backend} {kind}"]
            rows.append({
                "backend": backend, "log": kind, "mutations": len(s),
                "p50_ms": statistics.median(s) * 1e3, "p99_ms": pct(s, 0.99) * 1e3,
                "ratio_p50_vs_unchained": statistics.median(s) / base,
            })  # fmt: skip
    print(f"{'backend':<14} {'log':<10} {'p50 ms':>8} {'p99 ms':>8} {'vs unchained':>13}")
    for row in rows:
        print(f"{row['backend']:<14} {row['log']:<10} {row['p50_ms']:>8.3f} "
              f"{row['p99_ms']:>8.3f} {row['ratio_p50_vs_unchained']:>12.2f}x")  # fmt: skip
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"machine": platform.platform(), "rounds": args.rounds, "results": rows}, indent=1
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
