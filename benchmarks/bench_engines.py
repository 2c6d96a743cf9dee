"""Full-text engines compared on the same generated vault (issue 22: a smaller, faster index).

Every engine indexes the same notes, parsed once by fsnotes' own Markdown reader into the
columns the index searches (path, title, headings, tags, frontmatter values, body, and the
scope words of folders and tags), in transactions of 1,000 notes, each engine in a process
of its own (so peak RSS is its own). Then the same queries, each ``--runs`` times:

* ``word``: a word in about 0.1% of the notes; ``midword``: one in a few percent;
* ``phrase``: a two-word phrase in about 1%;
* ``prefix``: a three-letter prefix;
* ``question``: the 10-word natural-language question of :func:`vault.question`, any word
  matching, ranked by BM25 (what a host's model sends).

Each answer is the 10 best notes by BM25 plus the number of matches (up to 10,000, as
fsnotes counts). Engines:

* ``fts5-today``: fsnotes' schema today (FTS5 with its own copy of the text, positions
  ``detail=full``, a three-letter prefix index, and the small title/path table);
* ``fts5-column``: contentless FTS5 tables with ``detail=column`` (no positions) and the
  text zlib-compressed in a table of its own (for excerpts, for FTS5's ``delete`` of a
  contentless row, and for phrases: FTS5 answers the words ANDed and each candidate's text
  is checked for the phrase);
* ``fts5-column-noprefix``: the same without the prefix index (a prefix expands to its words);
* ``tantivy``: the tantivy library from PyPI (BM25, block-max WAND when the count is not
  asked: ``question-topk``), the same fields, English stemming.

The question over FTS5 leaves out the words held by more than half of the notes (as
fsnotes does: their BM25 weight is nil and their lists are the longest), with document
frequencies read from the ``fts5vocab`` table; tantivy gets every word.

Usage: python benchmarks/bench_engines.py [--count 100000] [--vault DIR] [--engines a,b]
Results: a table, and JSON in benchmarks/results/engines.json. Sizes are the index files
(with their WAL) after the build; ``x vault`` divides by the notes' Markdown bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import vault  # noqa: E402

from fsnotes.notes.index.schema import TOKENIZER, front_text, path_text, scope_text  # noqa: E402
from fsnotes.notes.store import stem_of  # noqa: E402
from fsnotes.notes.text import where as whererules  # noqa: E402
from fsnotes.notes.text.markdown import analyse  # noqa: E402

ENGINES = ("fts5-today", "fts5-column", "fts5-column-noprefix", "tantivy")
COLUMNS = ("path", "title", "headings", "tags", "front", "body", "scope")
BATCH = 1000
TOP = 10
COUNT_CAP = 10_000
RESULTS = HERE / "results" / "engines.json"
Doc = tuple[int, tuple[str, ...]]


def documents(root: Path) -> Iterator[Doc]:
    """(id, column texts) of every note below ``root``, in path order."""
    paths = sorted(p for p in root.rglob("*.md"))
    for note_id, path in enumerate(paths, 1):
        parts = path.relative_to(root).parts
        meta = analyse(path.read_text(encoding="utf-8"), stem_of(parts[-1]))
        front = list(whererules.pairs(meta.frontmatter))
        yield (
            note_id,
            (
                path_text(parts),
                meta.title,
                "\n".join(meta.all_headings),
                " ".join(meta.tags),
                front_text(meta.frontmatter),
                meta.body,
                scope_text(parts, meta.tags, front),
            ),
        )


def queries() -> dict[str, str]:
    words = vault._vocabulary(__import__("random").Random(7))
    return {
        "word": vault.RARE_WORD,
        "midword": words[300],
        "phrase": f'"{vault.PHRASE}"',
        "prefix": words[40][:3] + "*",
        "question": vault.question(),
    }


# --- FTS5 ------------------------------------------------------------------------------------


class Fts5:
    def __init__(self, path: Path, variant: str) -> None:
        self.path = path
        self.variant = variant
        self.contentless = variant != "fts5-today"
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA cache_size=-32768")
        prefix = "" if variant == "fts5-column-noprefix" else ", prefix='3'"
        cols = ", ".join(COLUMNS)
        if self.contentless:
            opts = f"content='', detail=column, tokenize='{TOKENIZER}'"
            self.db.execute(f"CREATE VIRTUAL TABLE fts USING fts5({cols}, {opts}{prefix})")
            self.db.execute(f"CREATE VIRTUAL TABLE tfts USING fts5(title, path, scope, {opts})")
            self.db.execute("CREATE TABLE texts(id INTEGER PRIMARY KEY, z BLOB NOT NULL)")
        else:
            opts = f"tokenize='{TOKENIZER}'"
            self.db.execute(f"CREATE VIRTUAL TABLE fts USING fts5({cols}, {opts}{prefix})")
            self.db.execute(f"CREATE VIRTUAL TABLE tfts USING fts5(title, path, scope, {opts})")
        self.db.execute("CREATE VIRTUAL TABLE vocab USING fts5vocab(fts, row)")
        for table in ("fts", "tfts"):
            self.db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 0)")
            self.db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('crisismerge', 256)")
            self.db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', 8388608)")
        self.notes = 0

    def add(self, batch: list[Doc]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany(
            f"INSERT INTO fts(rowid, {', '.join(COLUMNS)}) VALUES (?,?,?,?,?,?,?,?)",
            [(i, *c) for i, c in batch],
        )
        self.db.executemany(
            "INSERT INTO tfts(rowid, title, path, scope) VALUES (?,?,?,?)",
            [(i, c[1], c[0], c[6]) for i, c in batch],
        )
        if self.contentless:
            self.db.executemany(
                "INSERT INTO texts(id, z) VALUES (?, ?)",
                [(i, zlib.compress("\x00".join(c).encode(), 6)) for i, c in batch],
            )
        self.db.execute("COMMIT")
        self.notes += len(batch)

    def finish(self) -> None:
        for table in ("fts", "tfts"):
            self.db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.db.close()

    def _top(self, match: str) -> tuple[list[int], int]:
        ids = [
            r[0]
            for r in self.db.execute(
                "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (match, TOP)
            )
        ]
        count = self.db.execute(
            "SELECT count(*) FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?)",
            (match, COUNT_CAP),
        ).fetchone()[0]
        return ids, int(count)

    def query(self, kind: str, text: str) -> tuple[list[int], int]:
        if kind == "phrase" and self.contentless:
            return self._phrase(text.strip('"').split())
        if kind == "question":
            return self._question(text.split())
        return self._top(text)

    def _phrase(self, words: list[str]) -> tuple[list[int], int]:
        """detail=column has no positions: the words ANDed, each candidate's text checked."""
        pattern = re.compile(r"\b" + r"\W+".join(map(re.escape, words)) + r"\b", re.IGNORECASE)
        found: list[tuple[float, int]] = []
        for rowid, score, z in self.db.execute(
            "SELECT fts.rowid, bm25(fts), texts.z FROM fts JOIN texts ON texts.id = fts.rowid "
            "WHERE fts MATCH ?",
            (" AND ".join(words),),
        ):
            if any(pattern.search(t) for t in zlib.decompress(z).decode().split("\x00")[:6]):
                found.append((score, rowid))
                if len(found) >= COUNT_CAP:
                    break
        return [r for _s, r in sorted(found)[:TOP]], len(found)

    def _question(self, words: list[str]) -> tuple[list[int], int]:
        common = self.notes // 2
        keep = []
        for word in words:
            token = self._token(word)
            row = self.db.execute("SELECT doc FROM vocab WHERE term=?", (token,)).fetchone()
            if row is not None and row[0] <= common:
                keep.append(word)
        return self._top(" OR ".join(keep or words))

    def _token(self, word: str) -> str:
        scratch = getattr(self, "_scratch", None)
        if scratch is None:
            scratch = self._scratch = sqlite3.connect(":memory:")
            scratch.execute(f"CREATE VIRTUAL TABLE t USING fts5(c, tokenize='{TOKENIZER}')")
            scratch.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        scratch.execute("DELETE FROM t")
        scratch.execute("INSERT INTO t(c) VALUES (?)", (word,))
        row = scratch.execute("SELECT term FROM v").fetchone()
        return str(row[0]) if row else word

    def files(self) -> list[Path]:
        return [Path(f"{self.path}{s}") for s in ("", "-wal", "-shm")]


# --- tantivy ---------------------------------------------------------------------------------


class Tantivy:
    HEAP = 64 * 1024 * 1024  # the writer's memory budget (its segments are flushed past it)

    def __init__(self, path: Path, variant: str) -> None:
        import tantivy

        self.t = tantivy
        path.mkdir()
        self.path = path
        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("id", stored=True, indexed=True, fast=True)
        for name in COLUMNS[:-1]:
            sb.add_text_field(name, stored=False, tokenizer_name="en_stem")
        sb.add_text_field("scope", stored=False, tokenizer_name="raw", index_option="basic")
        self.schema = sb.build()
        self.index = tantivy.Index(self.schema, path=str(path))
        self.writer = self.index.writer(self.HEAP, 2)
        self.searcher: Any = None

    def add(self, batch: list[Doc]) -> None:
        for note_id, cols in batch:
            fields: dict[str, Any] = {"id": note_id}
            fields.update({name: cols[i] for i, name in enumerate(COLUMNS[:-1])})
            fields["scope"] = cols[6].split()
            self.writer.add_document(self.t.Document(**fields))
        self.writer.commit()

    def finish(self) -> None:
        self.writer.commit()
        self.writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def close(self) -> None:
        pass

    def query(self, kind: str, text: str) -> tuple[list[int], int]:
        q = self.index.parse_query(text, list(COLUMNS[:-1]))
        count = kind != "question-topk"
        result = self.searcher.search(q, TOP, count=count)
        ids = [self.searcher.doc(addr)["id"][0] for _score, addr in result.hits]
        return ids, result.count if count else -1

    def files(self) -> list[Path]:
        return list(self.path.iterdir())


# --- one engine (a child process) ------------------------------------------------------------


def measure(fn: Callable[[], object], runs: int) -> dict[str, float]:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
    }


def child(engine: str, root: Path, work: Path, runs: int) -> dict[str, Any]:
    make: Any = Tantivy if engine == "tantivy" else Fts5
    target = work / engine
    idx = make(target if engine == "tantivy" else target.with_suffix(".sqlite3"), engine)
    start, cpu0 = time.monotonic(), time.process_time()
    parse_s = 0.0
    batch: list[Doc] = []
    docs = documents(root)
    while True:
        t0 = time.monotonic()
        doc = next(docs, None)
        parse_s += time.monotonic() - t0
        if doc is not None:
            batch.append(doc)
        if batch and (doc is None or len(batch) >= BATCH):
            idx.add(batch)
            batch = []
        if doc is None:
            break
    idx.finish()
    build = {
        "build_s": round(time.monotonic() - start, 1),
        "parse_s": round(parse_s, 1),
        "cpu_s": round(time.process_time() - cpu0, 1),
    }
    size = sum(p.stat().st_size for p in idx.files() if p.exists())
    out: dict[str, Any] = {"engine": engine, **build, "bytes": size}
    kinds = queries()
    if engine == "tantivy":
        kinds["question-topk"] = kinds["question"]
    for kind, text in kinds.items():
        _ids, count = idx.query(kind, text)
        out[kind] = {"matches": count, **measure(lambda k=kind, t=text: idx.query(k, t), runs)}
    idx.close()
    out["rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=100_000)
    p.add_argument("--vault", type=Path, help="where the vault is (generated if missing)")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--json", type=Path, default=RESULTS)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    root = args.vault or HERE / ".cache" / f"vault-{args.count}"
    if args.child:
        print(json.dumps(child(args.child, root, args.work, args.runs)))
        return 0
    facts = vault.generate(root, args.count)
    rows = []
    for engine in args.engines.split(","):
        work = Path(tempfile.mkdtemp(prefix="fsnotes-engines-"))
        try:
            cmd = [sys.executable, __file__, "--child", engine, "--vault", str(root)]
            cmd += ["--work", str(work), "--runs", str(args.runs)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{engine}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["x_vault"] = round(row["bytes"] / int(str(facts["bytes"])), 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    kinds = ["word", "midword", "phrase", "prefix", "question", "question-topk"]
    head = "| engine | build s | RSS MiB | size MiB | x vault | "
    head += " | ".join(f"{k} p50/p99 ms" for k in kinds) + " |"
    print(f"\n{args.count:,} notes, {int(str(facts['bytes'])) / 2**20:.0f} MiB of Markdown\n")
    print(head)
    print("|" + "---|" * (5 + len(kinds)))
    for r in rows:
        cells = [f"{r[k]['p50_ms']}/{r[k]['p99_ms']}" if k in r else "-" for k in kinds]
        print(
            f"| {r['engine']} | {r['build_s']} | {r['rss_mib']} | {r['bytes'] / 2**20:.0f} | "
            f"{r['x_vault']} | " + " | ".join(cells) + " |"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(args.json.read_text()) if args.json.exists() else {}
    old[str(args.count)] = {"vault": facts, "engines": rows, "cpus": os.cpu_count()}
    args.json.write_text(json.dumps(old, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
