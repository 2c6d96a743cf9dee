"""A move that rewrites the links in 1,000 notes of a large vault (issue 15), on the wire.

On a copy of a seeded vault (``vault.py``; by default the cached ``benchmarks/.cache/
vault-N``, generated when missing), this script:

* plants links to one note (``TARGET``) in ``--linkers`` other notes, in three forms in
  turn: ``[[note-...]]`` (the vault's own form), ``[[note-...|alias]]`` and a relative
  Markdown link ``[see](../.../note-....md)``, on top of the vault's own random links;
* builds the index with the real server (``python -m fsnotes serve``, jailed, background
  build and watcher as shipped) and waits until a query says ``index.complete``;
* times, over stdio (2025-11-25 handshake): ``notes_links`` of the target (its backlinks),
  then ``notes_move`` of the target to a new folder and name with ``updateLinks`` (the
  default) and back again, ``--rounds`` times each way (every move rewrites every linking
  note: new name, new folder); and, as the floor, moves of a note nothing links to, with
  ``updateLinks`` true (the plan alone) and false;
* checks the files: after each move every planted link names the note at its new path
  (and the old name is gone from those notes).

Prints a table and writes ``benchmarks/results/links.json``. Not a timed test: the
machine is shared.

Usage: python benchmarks/bench_links.py [--notes 100000] [--linkers 1000] [--rounds 2]
       [--source DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vault
from bench_protocol import CACHE, REPO
from bench_vault import Server, fsnotes_cmd, fsnotes_env, machine

RESULTS = REPO / "benchmarks" / "results" / "links.json"
BUILD_TIMEOUT_S = 1800.0
FLOOR_RUNS = 5


def note_paths(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if p.is_file())


def plant(root: Path, target: Path, count: int, seed: int) -> list[Path]:
    """Append a link to ``target`` to ``count`` other notes (three forms in turn)."""
    rng = random.Random(seed)
    others = [p for p in note_paths(root) if p != target]
    chosen = sorted(rng.sample(others, count))
    stem = target.stem
    for i, path in enumerate(chosen):
        form = i % 3
        if form == 0:
            link = f"[[{stem}]]"
        elif form == 1:
            link = f"[[{stem}|the planted link]]"
        else:
            link = f"[see]({os.path.relpath(target, path.parent)})"
        with path.open("a") as f:
            f.write(f"\nPlanted for the move benchmark: {link}\n")
    return chosen


def wait_built(s: Server, ws: str) -> float:
    while time.perf_counter() - s.started < BUILD_TIMEOUT_S:
        found = s.call("notes_list", {"workspaceUri": ws, "limit": 1})
        if found["index"]["complete"]:
            return time.perf_counter() - s.started
        time.sleep(1.0)
    raise RuntimeError("the index build did not finish")


def check_links(root: Path, linkers: list[Path], old: Path, new: Path) -> int:
    """How many of the planted notes name ``new`` and no longer name ``old`` by its stem."""
    good = 0
    for path in linkers:
        text = path.read_text()
        planted = text.rsplit("Planted for the move benchmark: ", 1)[1]
        named = new.stem in planted or os.path.relpath(new, path.parent) in planted
        if named and old.stem not in planted:
            good += 1
    return good


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.source:  # someone else's copy: read its facts, never (re)generate into it
        source = Path(args.source)
        facts = json.loads((source / vault.MARKER).read_text())
        args.notes = int(facts["count"])
    else:
        source = CACHE / f"vault-{args.notes}"
        facts = vault.generate(source, args.notes)
    print(f"vault: {source} ({args.notes:,} notes)", flush=True)
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "vault": {k: v for k, v in facts.items() if k != "params"},
        "linkers_planted": args.linkers,
    }
    with tempfile.TemporaryDirectory(prefix="fsnotes-bench-links-") as tmp:
        root = Path(tmp) / "vault"
        t0 = time.perf_counter()
        shutil.copytree(source, root)
        print(f"  copied in {time.perf_counter() - t0:.1f} s", flush=True)
        paths = note_paths(root)
        target = paths[len(paths) // 3]
        linkers = plant(root, target, args.linkers, args.seed)
        state = Path(tmp) / "state"
        log = Path(tmp) / "fsnotes.log"
        s = Server(fsnotes_cmd(root, state), fsnotes_env(state), log)
        try:
            s.initialize()
            ws = s.call("workspaces_list", {})["workspaces"][0]["uri"]
            built = wait_built(s, ws)
            result["index_build_s"] = round(built, 1)
            print(f"  index built in {built:.1f} s", flush=True)
            time.sleep(5.0)  # let the start-up work settle (watches, the rescan's last batch)

            target_uri = target.as_uri()
            samples = []
            for _ in range(FLOOR_RUNS):
                t0 = time.perf_counter()
                links = s.call("notes_links", {"uri": target_uri})
                samples.append(time.perf_counter() - t0)
            result["notes_links_ms"] = round(statistics.median(samples) * 1000, 1)
            result["backlinks"] = links["backlinksTotal"]
            print(
                f"  notes_links: {links['backlinksTotal']} backlinks, "
                f"{result['notes_links_ms']} ms",
                flush=True,
            )

            moves: list[dict[str, Any]] = []
            here, there = target, root / "moved-by-bench" / "renamed-target.md"
            for _ in range(args.rounds):
                for src, dst in ((here, there), (there, here)):
                    rel = dst.relative_to(root).as_posix()
                    t0 = time.perf_counter()
                    moved = s.call("notes_move", {"uri": src.as_uri(), "newPath": rel})
                    elapsed = time.perf_counter() - t0
                    good = check_links(root, linkers, src, dst)
                    moves.append(
                        {
                            "s": round(elapsed, 3),
                            "notes_rewritten": len(moved["linksUpdated"]),
                            "links_rewritten": sum(u["links"] for u in moved["linksUpdated"]),
                            "not_rewritten": len(moved["linksNotUpdated"]),
                            "planted_links_correct": good,
                        }
                    )
                    print(f"  move with updateLinks: {moves[-1]}", flush=True)
            result["moves"] = moves

            floor: dict[str, list[float]] = {"updateLinks true": [], "updateLinks false": []}
            lonely = s.call(
                "notes_create",
                {"workspaceUri": ws, "path": "bench-lonely/a.md", "content": "# Nobody links\n"},
            )["uri"]
            for i in range(FLOOR_RUNS):
                for label, flag in (("updateLinks true", True), ("updateLinks false", False)):
                    t0 = time.perf_counter()
                    lonely = s.call(
                        "notes_move",
                        {
                            "uri": lonely,
                            "newPath": f"bench-lonely/{flag}-{i}.md",
                            "updateLinks": flag,
                        },
                    )["uri"]
                    floor[label].append(time.perf_counter() - t0)
            result["move_nothing_links_ms"] = {
                k: round(statistics.median(v) * 1000, 1) for k, v in floor.items()
            }
        finally:
            s.close()
            result["log_tail"] = log.read_text().splitlines()[-10:] if log.exists() else []
    return result


def print_table(result: dict[str, Any]) -> None:
    moves = result["moves"]
    times = [m["s"] for m in moves]
    print()
    print(f"| what ({result['vault']['count']:,} notes) | fsnotes |")
    print("|---|---|")
    print(
        f"| index build (with {result['linkers_planted']:,} planted links) | "
        f"{result['index_build_s']} s |"
    )
    print(
        f"| notes_links of the target ({result['backlinks']:,} backlinks), median | "
        f"{result['notes_links_ms']} ms |"
    )
    print(
        f"| notes_move rewriting {moves[0]['notes_rewritten']:,} notes "
        f"({moves[0]['links_rewritten']:,} links), median of {len(times)} | "
        f"{statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}) |"
    )
    per = statistics.median(times) / max(1, moves[0]["notes_rewritten"]) * 1000
    print(f"| same, per rewritten note | {per:.2f} ms |")
    floor = result["move_nothing_links_ms"]
    print(
        f"| notes_move of a note nothing links to, updateLinks true / false, median | "
        f"{floor['updateLinks true']} / {floor['updateLinks false']} ms |"
    )
    ok = all(
        m["planted_links_correct"] == result["linkers_planted"] and m["not_rewritten"] == 0
        for m in moves
    )
    print(f"| every planted link names the moved note after every move | {ok} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--linkers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--source", help="a vault generated by vault.py (copied, never changed)")
    args = parser.parse_args()
    result = run(args)
    print_table(result)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(f"\nwritten to {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
