"""Parsing a note: fsnotes' ``analyse`` (frontmatter, title, tags, links, with code found by
fsnotes/notes/text/code.py) beside a CommonMark parser (markdown-it-py's token stream) on the
same notes, in the same run.

Two corpora from benchmarks/vault.py's seeded vault: ``prose`` as generated (paragraphs,
headings, tags, wikilinks; no code: the scanner's fast path), and ``technical``, the same
notes with code-heavy blocks added (nested lists indented four spaces, code spans, fenced
and indented code), where every line is read by the block scanner. Reported per note (best
of the rounds, and the median), with ``analyse`` and the code scan alone as ratios over the
CommonMark parse. Not a timed test: the machine is shared and noisy.

Usage: python benchmarks/bench_parse.py [--notes N] [--rounds N]
Writes benchmarks/results/parse.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vault

from fsnotes.notes.text.code import code_ranges
from fsnotes.notes.text.markdown import analyse

RESULTS = Path(__file__).resolve().parent / "results" / "parse.json"

# Blocks added to the technical corpus, after every 3rd, 4th and 5th paragraph.
LIST_BLOCK = "- item `code` one\n    - nested [[link]] two\n        - deeper ``x`y``\n- back"
FENCE_BLOCK = "```python\nx = [[1]]\nprint(x)\n```"
INDENTED_BLOCK = "    indented code [[not]]\n    more"


def technical(text: str) -> str:
    out = []
    for i, para in enumerate(text.split("\n\n")):
        out.append(para)
        if i % 3 == 1:
            out.append(LIST_BLOCK)
        if i % 4 == 2:
            out.append(FENCE_BLOCK)
        if i % 5 == 3:
            out.append(INDENTED_BLOCK)
    return "\n\n".join(out)


def per_note_us(work: Callable[[str], object], corpus: list[str], rounds: int) -> dict[str, float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for text in corpus:
            work(text)
        times.append((time.perf_counter() - start) * 1e6 / len(corpus))
    return {"best_us": round(min(times), 1), "median_us": round(statistics.median(times), 1)}


def run(notes: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fsnotes-bench-parse-") as tmp:
        root = Path(tmp)
        vault.generate(root, notes, 7)
        prose = [p.read_text() for p in sorted(root.rglob("*.md"))]
    corpora = {"prose": prose, "technical": [technical(t) for t in prose]}
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        peer: Callable[[str], object] | None = None
    else:
        peer = MarkdownIt("commonmark").parse
    report: dict[str, Any] = {"notes": notes, "rounds": rounds}
    for name, corpus in corpora.items():
        row: dict[str, Any] = {
            "kib_per_note": round(sum(len(t) for t in corpus) / len(corpus) / 1024, 2),
            "analyse": per_note_us(lambda t: analyse(t, "note"), corpus, rounds),
            "code_scan": per_note_us(code_ranges, corpus, rounds),
        }
        if peer is not None:
            row["commonmark_peer"] = per_note_us(peer, corpus, rounds)
            for part in ("analyse", "code_scan"):
                row[f"{part}_over_peer"] = round(
                    row[part]["best_us"] / row["commonmark_peer"]["best_us"], 3
                )
        report[name] = row
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    report = run(args.notes, args.rounds)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'corpus':<11}{'KiB':>6}{'analyse':>10}{'code scan':>11}{'CommonMark':>12}{'ratio':>8}")
    for name in ("prose", "technical"):
        row = report[name]
        peer = row.get("commonmark_peer", {}).get("best_us", float("nan"))
        print(
            f"{name:<11}{row['kib_per_note']:>6}{row['analyse']['best_us']:>8.1f}us"
            f"{row['code_scan']['best_us']:>9.1f}us{peer:>10.1f}us"
            f"{row.get('analyse_over_peer', '-'):>8}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
