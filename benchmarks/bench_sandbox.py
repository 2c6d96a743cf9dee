"""Cost of a contained read: ``Root.read`` against a plain ``open()`` + ``read()`` by path.

Reads one 4 KiB file two directories below the workspace root, many times, with:

* ``plain open()``: ``with open(path, "rb") as f: f.read()``, the baseline (no containment);
* ``os.open+os.read``: the raw syscalls by path, for reference (no containment either);
* ``Root.read [openat2]`` and ``Root.read [walk]``: the contained read on each resolver.

Rounds are interleaved (every round times each method once, in rotating order) so that
machine noise hits all of them alike; the figure per method is the median over rounds of
the mean cost per read in that round. Prints a table and writes
``benchmarks/results/sandbox.json``. The goal (issue 2): openat2 within 1.5x of plain open.

Run: ``.venv/bin/python benchmarks/bench_sandbox.py [--rounds N] [--reads N]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.root import Root, openat2_available

FILE_SIZE = 4096
GOAL_RATIO = 1.5
RESULTS = Path(__file__).resolve().parent / "results" / "sandbox.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31, help="interleaved rounds (odd)")
    parser.add_argument("--reads", type=int, default=2000, help="reads per method per round")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="fsnotes-bench-") as tmp:
        ws = Path(tmp) / "ws"
        (ws / "notes" / "2026").mkdir(parents=True)
        target = ws / "notes" / "2026" / "n.md"
        target.write_bytes(os.urandom(FILE_SIZE))
        path = str(target)
        parts = ("notes", "2026", "n.md")

        def plain() -> bytes:
            with open(path, "rb") as f:
                return f.read()

        def raw() -> bytes:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                return os.read(fd, FILE_SIZE + 1)
            finally:
                os.close(fd)

        methods: dict[str, Callable[[], bytes]] = {"plain open()": plain, "os.open+os.read": raw}
        roots = []
        resolvers = ["openat2", "walk"] if openat2_available() else ["walk"]
        for resolver in resolvers:
            root = Root.open(ws, resolver=resolver)  # type: ignore[arg-type]
            roots.append(root)
            methods[f"Root.read [{resolver}]"] = (
                lambda r=root: r.read(parts, max_bytes=1 << 20).data  # type: ignore[misc]
            )
        expected = target.read_bytes()
        for name, fn in methods.items():
            assert fn() == expected, name

        samples: dict[str, list[float]] = {name: [] for name in methods}
        names = list(methods)
        for rnd in range(args.rounds):
            order = names[rnd % len(names) :] + names[: rnd % len(names)]
            for name in order:
                fn = methods[name]
                gc.disable()
                start = time.perf_counter_ns()
                for _ in range(args.reads):
                    fn()
                elapsed = time.perf_counter_ns() - start
                gc.enable()
                samples[name].append(elapsed / args.reads / 1000)  # microseconds per read
        for root in roots:
            root.close()

    base = statistics.median(samples["plain open()"])
    rows = []
    for name in names:
        med = statistics.median(samples[name])
        rows.append({"method": name, "median_us": round(med, 2), "ratio": round(med / base, 3)})

    print(f"contained read of a {FILE_SIZE} B file, {args.rounds} rounds x {args.reads} reads")
    print(f"{'method':<24}{'median us/read':>16}{'vs plain open()':>18}")
    for row in rows:
        print(f"{row['method']:<24}{row['median_us']:>16.2f}{row['ratio']:>17.2f}x")
    openat2_row = next((r for r in rows if r["method"] == "Root.read [openat2]"), None)
    verdict = None
    if openat2_row is not None:
        verdict = openat2_row["ratio"] <= GOAL_RATIO
        print(
            f"goal: openat2 within {GOAL_RATIO}x of plain open(): {'met' if verdict else 'MISSED'}"
        )
    else:
        print("openat2 is not usable here: only the walk was measured")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "sandbox contained read",
                "file_size": FILE_SIZE,
                "rounds": args.rounds,
                "reads_per_round": args.reads,
                "python": platform.python_version(),
                "kernel": platform.release(),
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "results": rows,
                "goal_ratio": GOAL_RATIO,
                "goal_met": verdict,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written: {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
