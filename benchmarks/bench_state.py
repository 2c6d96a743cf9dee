"""A replay claim on PostgreSQL against one on SQLite (the shared-state issue's figure).

What is timed is what a confirmed delete adds for its claim: ``with store.claim(nonce, exp):
pass``, a fresh nonce each time (the insert, the prune of expired rows, the row count, the
commit). Backends, each with durable commits as shipped:

* ``sqlite``: the state directory's ``replay.sqlite3`` (WAL, ``synchronous=FULL``: one fsync
  per commit) on this machine's disk;
* ``postgres tcp`` and ``postgres socket``: a PostgreSQL 15 from Debian started here for the
  run (tests/pgcluster.py, ``fsync=on``, defaults otherwise), over loopback TCP and over its
  Unix socket, through fsnotes' pool (each connection checked before it is handed out).

Single-claim latency: rounds interleave the backends (every round runs each one in rotating
order) so machine noise hits them alike; p50 and p99 over all claims. Throughput: 8 threads
claiming different nonces at once for a fixed time, per backend (SQLite serialises all
writers on its one lock; PostgreSQL only claims of the same nonce). Prints a table and
writes ``benchmarks/results/state.json``.

Run: ``.venv/bin/python benchmarks/bench_state.py [--rounds N] [--claims N] [--seconds S]``
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import pgcluster  # noqa: E402

from fsnotes.state.replay import SQLReplayStore, open_replay  # noqa: E402
from fsnotes.state.shared import SharedState  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "state.json"
THREADS = 8


def claim_once(store: SQLReplayStore) -> float:
    nonce = secrets.token_urlsafe(16)
    t0 = time.perf_counter()
    with store.claim(nonce, time.time() + 300):
        pass
    return time.perf_counter() - t0


def throughput(store: SQLReplayStore, seconds: float) -> float:
    stop = time.monotonic() + seconds
    counts = [0] * THREADS
    barrier = threading.Barrier(THREADS)

    def run(i: int) -> None:
        barrier.wait()
        while time.monotonic() < stop:
            claim_once(store)
            counts[i] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - t0)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds")
    parser.add_argument("--claims", type=int, default=100, help="claims per backend per round")
    parser.add_argument("--seconds", type=float, default=5.0, help="throughput run per backend")
    args = parser.parse_args()
    why = pgcluster.missing()
    if why is not None:
        print(f"SKIPPED: {why}")
        return 0

    with (
        tempfile.TemporaryDirectory(prefix="fsnotes-bench-state-") as tmp,
        pgcluster.running(durable=True) as cluster,
    ):
        state_dir = Path(tmp)
        backends: dict[str, SharedState] = {
            "sqlite": SharedState.open(state_dir, None),
            "postgres tcp": SharedState.open(state_dir, cluster.new_database()),
            "postgres socket": SharedState.open(
                state_dir, cluster.socket_dsn(cluster.new_database().rsplit("/", 1)[1])
            ),
        }
        stores = {name: open_replay(b, clock=time.time) for name, b in backends.items()}
        names = list(stores)
        for store in stores.values():  # warm-up: connections made, statements prepared
            for _ in range(20):
                claim_once(store)
        samples: dict[str, list[float]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                samples[name] += [claim_once(stores[name]) for _ in range(args.claims)]
        rates = {name: throughput(stores[name], args.seconds) for name in names}
        for b in backends.values():
            b.close()

    base = statistics.median(samples["sqlite"])
    rows: list[dict[str, Any]] = []
    for name in names:
        p50 = statistics.median(samples[name])
        rows.append(
            {
                "backend": name,
                "claims": len(samples[name]),
                "p50_ms": p50 * 1e3,
                "p99_ms": pct(samples[name], 0.99) * 1e3,
                "ratio_p50_vs_sqlite": p50 / base,
                "claims_per_s_8_threads": rates[name],
            }
        )
    fmt: Callable[[float], str] = lambda v: f"{v:.3f}"  # noqa: E731
    print(f"{'backend':<16} {'p50 ms':>8} {'p99 ms':>8} {'vs sqlite':>10} {'claims/s, 8 thr':>16}")
    for row in rows:
        print(
            f"{row['backend']:<16} {fmt(row['p50_ms']):>8} {fmt(row['p99_ms']):>8} "
            f"{row['ratio_p50_vs_sqlite']:>9.2f}x {row['claims_per_s_8_threads']:>16.0f}"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "replay claim, PostgreSQL vs SQLite",
                "machine": {
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                    "cpus": __import__("os").cpu_count(),
                },
                "rounds": args.rounds,
                "claims_per_round": args.claims,
                "throughput_seconds": args.seconds,
                "results": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
