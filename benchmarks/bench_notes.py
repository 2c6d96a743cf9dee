"""The product end to end: `fsnotes serve` beside the reference node filesystem server.

Same run, same minimal client, same 4 KiB Markdown file:
  * cold start: spawn to the first ``initialize`` response (ours includes opening the
    workspace and state dir, the keyring, the replay database and applying Landlock);
  * ``notes_read`` of the file (ours: layers 1-3, etag, frontmatter/tags/links) against
    the node server's ``read_text_file`` of the same file; median and p99.
Reported as ratios ours/node. Not a timed test: the machine is shared and noisy.

Also ours with run-time setup enabled (``--setup-allow``: the HTTP stack is imported before
the jail, and every lookup checks the grant database's generation), reading the same note
in a folder granted at run time; reported as ratios setup/ours.

Usage: python benchmarks/bench_notes.py [--spawns N] [--calls N]
Writes benchmarks/results/notes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_protocol import (
    NODE_ENTRY,
    REPO,
    Session,
    cold_start,
    ensure_node_server,
    stats_ms,
    timed,
)

RESULTS = REPO / "benchmarks" / "results" / "notes.json"
NOTE = ("# Benchmark note\n\n" + "Some prose with a [[Link]] and a #tag.\n" * 120)[:4096]


def run(spawns: int, calls: int) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "notes",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        notes = root / "notes"
        notes.mkdir()
        (notes / "note.md").write_text(NOTE)
        uri = (notes / "note.md").as_uri()
        ours_cmd = [
            sys.executable,
            "-m",
            "fsnotes",
            "serve",
            "--workspace",
            str(notes),
            "--state-dir",
            str(root / "state"),
        ]
        warm = max(20, calls // 10)
        ours: dict[str, Any] = {"cold_start": cold_start(ours_cmd, spawns)}
        s = Session(ours_cmd)
        s.initialize()
        call = {"name": "notes_read", "arguments": {"uri": uri}}
        ours["read"] = stats_ms(timed(lambda: s.request("tools/call", call), calls, warm))
        s.close()
        report["ours"] = ours

        shared = root / "shared"
        (shared / "granted").mkdir(parents=True)
        (shared / "granted" / "note.md").write_text(NOTE)
        grant = [
            sys.executable,
            "-m",
            "fsnotes",
            "grant",
            "--state-dir",
            str(root / "state"),
            "--setup-allow",
            str(shared),
            "--workspace",
            str(shared / "granted"),
            "--access",
            "read",
        ]
        subprocess.run(grant, check=True, capture_output=True)
        setup_cmd = [*ours_cmd, "--setup-allow", str(shared)]
        with_setup: dict[str, Any] = {"cold_start": cold_start(setup_cmd, spawns)}
        s = Session(setup_cmd)
        s.initialize()
        call = {
            "name": "notes_read",
            "arguments": {"uri": (shared / "granted" / "note.md").as_uri()},
        }
        with_setup["read"] = stats_ms(timed(lambda: s.request("tools/call", call), calls, warm))
        s.close()
        report["ours_with_setup"] = with_setup
        report["ratios_setup_over_ours"] = {
            f"{part}.{stat}": round(with_setup[part][stat] / ours[part][stat], 3)
            for part in ("cold_start", "read")
            for stat in ("median_ms", "p99_ms")
        }

        why_not = ensure_node_server()
        if why_not is not None:
            report["node_reference"] = {"skipped": why_not}
            return report
        node_cmd = ["node", str(NODE_ENTRY), str(notes)]
        node: dict[str, Any] = {"cold_start": cold_start(node_cmd, spawns)}
        s = Session(node_cmd)
        s.initialize()
        call = {"name": "read_text_file", "arguments": {"path": str(notes / "note.md")}}
        node["read"] = stats_ms(timed(lambda: s.request("tools/call", call), calls, warm))
        s.close()
        report["node_reference"] = node
    report["ratios_ours_over_node"] = {
        f"{part}.{stat}": round(ours[part][stat] / node[part][stat], 3)
        for part in ("cold_start", "read")
        for stat in ("median_ms", "p99_ms")
    }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=10)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    report = run(args.spawns, args.calls)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'':<14}{'ours median':>12}{'p99':>9}{'node median':>13}{'p99':>9}{'ratio med':>11}")
    node = report.get("node_reference", {})
    for part in ("cold_start", "read"):
        o = report["ours"][part]
        n = node.get(part, {})
        ratio = report.get("ratios_ours_over_node", {}).get(f"{part}.median_ms", "-")
        print(
            f"{part:<14}{o['median_ms']:>10.3f}ms{o['p99_ms']:>7.2f}ms"
            f"{n.get('median_ms', float('nan')):>11.3f}ms{n.get('p99_ms', float('nan')):>7.2f}ms"
            f"{ratio:>11}"
        )
    with_setup = report["ours_with_setup"]
    for part in ("cold_start", "read"):
        w = with_setup[part]
        ratio = report["ratios_setup_over_ours"][f"{part}.median_ms"]
        print(
            f"{part + ' +setup':<14}{w['median_ms']:>10.3f}ms{w['p99_ms']:>7.2f}ms"
            f"{'(vs ours)':>20}{ratio:>11}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
