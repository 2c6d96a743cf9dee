"""How long each kind of call takes while PostgreSQL is down (the outage issue's figures).

Two real ``fsnotes serve`` processes (stdio) on one PostgreSQL 15 database started here for
the run (tests/pgcluster.py): one with run-time setup configured (``--setup-allow``, which
``fsnotes grant`` needs, so its grants come partly from the shared store) and its peer
without it. Both are warmed up (index built, pool connected, a delete asked), then the
cluster is stopped by process id and every call kind is timed on both, alternating:

* reads: ``workspaces_list``, ``notes_read``, ``notes_list``, ``notes_search``: they need
  nothing from the shared store and should answer at once;
* mutations: ``notes_create`` and the confirming retry of a ``notes_delete``: they need the
  audit log, so they refuse with the retryable error after the pool's connection wait
  (``POOL_WAIT_S``), once.

Prints a table (median and worst seconds per kind, the ratio setup/peer) and writes
``benchmarks/results/outage.json``.

Run: ``.venv/bin/python benchmarks/bench_outage.py [--reads N] [--mutations N]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
from e2e.wire import Wire  # noqa: E402
from setup.person import free_port  # noqa: E402

from fsnotes.state.postgres import POOL_WAIT_S  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "outage.json"
FORM = {"elicitation": {"form": {}}}
READS = ("workspaces_list", "notes_read", "notes_list", "notes_search")
MUTATIONS = ("notes_create", "notes_delete")


class Instance:
    """One server and the calls it is timed with."""

    def __init__(self, place: Path, setup: bool) -> None:
        notes = place / "notes"
        notes.mkdir(parents=True)
        (notes / "plan.md").write_text("# Plan\n\nthe garden plan\n")
        for i in range(200):
            (notes / f"n{i}.md").write_text(f"# Note {i}\n\ngarden row {i}\n")
        (notes / "doomed.md").write_text("# Doomed\n")
        extra: list[str] = []
        if setup:
            (place / "shared").mkdir()
            extra = ["--setup-allow", str(place / "shared"), "--setup-port", str(free_port())]
        self.notes = notes
        self.wire = Wire(notes, place / "state", *extra)
        ws = notes.as_uri()
        self.args: dict[str, dict[str, Any]] = {
            "workspaces_list": {},
            "notes_read": {"uri": (notes / "plan.md").as_uri()},
            "notes_list": {"workspaceUri": ws},
            "notes_search": {"workspaceUri": ws, "query": "garden"},
            "notes_create": {"workspaceUri": ws, "path": "new.md", "content": "x"},
            "notes_delete": {"uri": (notes / "doomed.md").as_uri()},
        }
        self.answer: dict[str, Any] = {}

    def warm(self) -> None:
        for name in READS:
            result = self.wire.tool(name, self.args[name], FORM)["result"]
            assert not result.get("isError"), result
        first = self.wire.tool("notes_delete", self.args["notes_delete"], FORM)["result"]
        ((key, _),) = first["inputRequests"].items()
        content = {"note_id": "doomed.md", "confirm": True}
        self.answer = {
            "inputResponses": {key: {"action": "accept", "content": content}},
            "requestState": first["requestState"],
        }

    def timed(self, name: str) -> float:
        params = self.answer if name == "notes_delete" else {}
        start = time.perf_counter()
        reply = self.wire.tool(name, self.args[name], FORM, timeout=60.0, **params)
        took = time.perf_counter() - start
        failed = bool(reply["result"].get("isError"))
        assert failed == (name in MUTATIONS), (name, reply)
        return took


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reads", type=int, default=10, help="timed calls per read kind")
    parser.add_argument("--mutations", type=int, default=2, help="timed calls per mutation")
    opts = parser.parse_args()
    why = pgcluster.missing()
    if why is not None:
        print(f"skipped: {why}")
        return 0
    with tempfile.TemporaryDirectory() as tmp, pgcluster.running() as cluster:
        os.environ["FSNOTES_DATABASE"] = cluster.new_database()
        instances = {
            "with [setup]": Instance(Path(tmp) / "setup", setup=True),
            "without (peer)": Instance(Path(tmp) / "peer", setup=False),
        }
        try:
            for instance in instances.values():
                instance.warm()
            cluster.stop()
            took: dict[str, dict[str, list[float]]] = {k: {} for k in instances}
            for name in (*READS, *MUTATIONS):
                rounds = opts.mutations if name in MUTATIONS else opts.reads
                for _ in range(rounds):
                    for label, instance in instances.items():  # alternating: noise alike
                        took[label].setdefault(name, []).append(instance.timed(name))
        finally:
            for instance in instances.values():
                instance.wire.close()
    print(f"PostgreSQL stopped; the pool waits {POOL_WAIT_S:g} s for a connection")
    print(f"{'call':18s} {'setup p50':>10s} {'setup max':>10s} {'peer p50':>10s} {'ratio':>7s}")
    rows = []
    for name in (*READS, *MUTATIONS):
        mine, peer = took["with [setup]"][name], took["without (peer)"][name]
        p50, p50_peer = statistics.median(mine), statistics.median(peer)
        ratio = p50 / p50_peer if p50_peer else float("nan")
        print(f"{name:18s} {p50:10.3f} {max(mine):10.3f} {p50_peer:10.3f} {ratio:7.2f}")
        rows.append(
            {
                "call": name,
                "setup_p50_s": p50,
                "setup_max_s": max(mine),
                "peer_p50_s": p50_peer,
                "peer_max_s": max(peer),
                "ratio": ratio,
            }
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"machine": platform.platform(), "pool_wait_s": POOL_WAIT_S, "calls": rows}, indent=2
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
