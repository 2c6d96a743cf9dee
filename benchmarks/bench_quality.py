"""Search quality on a public test collection (issue 22): ``notes_search`` beside plain BM25.

The CISI collection (1,460 library-science abstracts, 112 natural-language questions, 76 of
them with relevance judgements; SMART format: ``CISI.ALL``, ``CISI.QRY``, ``CISI.REL``) is
read from a path argument, never shipped with the repository. Each abstract becomes one note
(``# title``, a blank line, the abstract) in a scratch vault; the real ``fsnotes serve``
(stdio) indexes it from an empty state directory, and every question is sent to
``notes_search`` exactly as written (its whitespace collapsed, as a person pasting it would
see it).

In the same run, over the same title and abstract text, the baselines:

* ``fts5-or``: SQLite FTS5 ``bm25()`` over (title, body) with the question's words ORed as
  written (a word written twice is ORed twice, which bm25 adds up), the tokenizer the index
  uses (porter over unicode61, diacritics removed); ``fts5-or distinct``: each word once;
* ``bm25s``: the ``bm25s`` package from PyPI (``pip install 'fsnotes[quality]'``; a
  benchmark-only dependency; its defaults: k1 = 1.5, b = 0.75, Lucene's BM25) over the same
  tokens, the question's words as written or each once; and over its own tokenizer (words of
  two letters or more, lower-cased, its English stopword list, no stemming);
* ``tantivy``: the tantivy search library from PyPI (also ``fsnotes[quality]``), title and
  body with its English analyzer and its BM25 as it comes, the question's words ORed, as
  written or each once (the engine measured beside FTS5 in docs/search.md);
* ``bm25-py``: a textbook BM25 (k1 = 1.2, b = 0.75, Lucene's IDF, summed over the query's
  words as written) in pure Python over the same tokens (read back from FTS5's
  ``fts5vocab``), title and body as one field; ``bm25-py distinct``: each word once.

The best of these is the baseline ``notes_search`` is compared with. Then the ranking's
steps one at a time, offline (benchmarks/quality_steps.py), and the server's row.

Printed: nDCG@10 (binary gains: CISI's judgements are all "relevant"), P@10, MRR@10,
recall@50 (``notes_search`` returns at most 50 results, so recall is taken at 50 for every
system alike) over the judged questions, and how many of all 112 questions got no result
(or an error). The table and JSON go to ``benchmarks/results/quality.{md,json}``.
Not a test: nothing asserts a score.

Usage: python benchmarks/bench_quality.py [CISI_DIR] [--label NAME]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_protocol import REPO
from bench_vault import Server, fsnotes_cmd, fsnotes_env
from quality_steps import step_rows

from fsnotes.notes.index.schema import TOKENIZER

DEFAULT_DIR = REPO.parent / "shared" / "data" / "cisi"
RESULTS = REPO / "benchmarks" / "results"
CUTOFF = 10  # nDCG@10, P@10, MRR@10
RECALL_AT = 50  # notes_search's largest limit
BUILD_TIMEOUT_S = 300.0
BM25_K1, BM25_B = 1.2, 0.75


def smart(path: Path) -> dict[int, dict[str, str]]:
    """The records of a SMART file: ``.I n`` then fields ``.T``, ``.A``, ``.W``, ``.X`` ..."""
    records: dict[int, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    field = ""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(".I "):
            current = {}
            records[int(line.split()[1])] = current
            field = ""
            continue
        marker = re.fullmatch(r"\.([A-Z])\s*", line)
        if marker and current is not None:
            field = marker.group(1)
            current.setdefault(field, [])
            continue
        if current is not None and field:
            current[field].append(line)
    return {
        n: {f: "\n".join(lines).strip() for f, lines in rec.items()} for n, rec in records.items()
    }


def judgements(path: Path) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2:
            out.setdefault(int(fields[0]), set()).add(int(fields[1]))
    return out


def metrics(ranked: list[int], relevant: set[int]) -> dict[str, float]:
    top = ranked[:CUTOFF]
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(top) if d in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(CUTOFF, len(relevant))))
    first = next((i for i, d in enumerate(top) if d in relevant), None)
    return {
        "ndcg": dcg / ideal if ideal else 0.0,
        "p": sum(d in relevant for d in top) / CUTOFF,
        "mrr": 0.0 if first is None else 1.0 / (first + 1),
        "recall": len(set(ranked[:RECALL_AT]) & relevant) / len(relevant),
    }


def summary(
    runs: dict[int, list[int]], qrels: dict[int, set[int]], questions: int, errors: int = 0
) -> dict[str, Any]:
    judged = [metrics(runs.get(q, []), rel) for q, rel in sorted(qrels.items())]
    empty = sum(1 for q in range(1, questions + 1) if not runs.get(q))
    return {
        **{k: round(sum(m[k] for m in judged) / len(judged), 4) for k in judged[0]},
        "judged": len(judged),
        "no_result": empty,
        "questions": questions,
        "errors": errors,
        # Each judged question's nDCG@10 (the JSON only), for split-half and sign checks.
        "ndcg_by_question": {
            q: round(m["ndcg"], 4) for q, m in zip(sorted(qrels), judged, strict=True)
        },
    }


class Baselines:
    """FTS5 bm25() with the words ORed, and a pure-Python BM25 over the same tokens."""

    def __init__(self, docs: dict[int, tuple[str, str]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE d USING fts5(title, body, tokenize='{TOKENIZER}')")
        self.db.executemany(
            "INSERT INTO d(rowid, title, body) VALUES (?, ?, ?)",
            [(n, t, b) for n, (t, b) in docs.items()],
        )
        self.db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(d, 'instance')")
        self.tf: dict[int, Counter[str]] = {n: Counter() for n in docs}
        for term, doc in self.db.execute("SELECT term, doc FROM v"):
            self.tf[doc][term] += 1
        self.length = {n: sum(c.values()) for n, c in self.tf.items()}
        self.avg = sum(self.length.values()) / len(self.length)
        self.df: Counter[str] = Counter()
        for counts in self.tf.values():
            self.df.update(counts.keys())
        self.db.execute(f"CREATE VIRTUAL TABLE q USING fts5(t, tokenize='{TOKENIZER}')")
        self.db.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(q, 'instance')")

    def tokens(self, text: str) -> list[str]:
        self.db.execute("DELETE FROM q")
        self.db.execute("INSERT INTO q(rowid, t) VALUES (1, ?)", (text,))
        return [t for (t,) in self.db.execute("SELECT term FROM qv ORDER BY offset")]

    def fts5_or(self, query: str, k: int, distinct: bool = False) -> list[int]:
        words = sorted(set(self.tokens(query))) if distinct else self.tokens(query)
        if not words:
            return []
        # The stems are quoted as FTS5 strings: porter maps a stem to itself for these.
        expr = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.db.execute(
            "SELECT rowid FROM d WHERE d MATCH ? ORDER BY bm25(d) LIMIT ?", (expr, k)
        )
        return [r[0] for r in rows]

    def bm25s_ranker(self, docs: dict[int, tuple[str, str]], own: bool) -> Any:
        """A ranking function over a ``bm25s`` index of the same notes (None: the package
        is not installed); ``own``: its own tokenizer instead of the index's tokens."""
        try:
            import bm25s  # a benchmark-only dependency, optional
        except ImportError:
            return None
        ids = sorted(docs)
        engine = bm25s.BM25()
        if own:
            texts = [f"{docs[n][0]}\n{docs[n][1]}" for n in ids]
            engine.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
        else:
            corpus = [[t for t, c in self.tf[n].items() for _ in range(c)] for n in ids]
            engine.index(corpus, show_progress=False)

        def rank(query: str, k: int, distinct: bool = False) -> list[int]:
            if own:
                words = bm25s.tokenize(query, return_ids=False, show_progress=False)[0]
            else:
                words = [t for t in self.tokens(query) if self.df.get(t)]
            if distinct:
                words = sorted(set(words))
            if not words:
                return []
            found, scores = engine.retrieve([words], k=k, show_progress=False)
            return [ids[int(i)] for i, s in zip(found[0], scores[0], strict=True) if s > 0]

        return rank

    @staticmethod
    def tantivy_ranker(docs: dict[int, tuple[str, str]]) -> Any:
        """A ranking function over a ``tantivy`` index of the same notes (None: the package
        is not installed): title and body fields with tantivy's English analyzer (its
        ``en_stem``: simple tokenizer, long words out, lower case, Snowball English), BM25 as
        it comes; a question is its analyzed words as written, each a term query on both
        fields, ORed (a word written twice counts twice, as in FTS5's OR)."""
        try:
            import tantivy  # a benchmark-only dependency, optional
        except ImportError:
            return None
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("id", stored=True, indexed=True)
        for name in ("title", "body"):
            builder.add_text_field(name, tokenizer_name="en_stem")
        schema = builder.build()
        index = tantivy.Index(schema)
        writer = index.writer(heap_size=50_000_000, num_threads=1)
        for n, (title, body) in docs.items():
            writer.add_document(tantivy.Document(id=n, title=title, body=body))
        writer.commit()
        index.reload()
        analyzer = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(40))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stemmer("english"))
            .build()
        )
        searcher = index.searcher()

        def rank(query: str, k: int, distinct: bool = False) -> list[int]:
            words = analyzer.analyze(query)
            if distinct:
                words = sorted(set(words))
            clauses = [
                (tantivy.Occur.Should, tantivy.Query.term_query(schema, field, word))
                for word in words
                for field in ("title", "body")
            ]
            if not clauses:
                return []
            hits = searcher.search(tantivy.Query.boolean_query(clauses), k).hits
            return [int(searcher.doc(address)["id"][0]) for _score, address in hits]

        return rank

    def bm25_py(self, query: str, k: int, distinct: bool = False) -> list[int]:
        n = len(self.tf)
        scores: dict[int, float] = {}
        tokens = self.tokens(query)
        for term in set(tokens) if distinct else tokens:
            df = self.df.get(term, 0)
            if not df:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for doc, counts in self.tf.items():
                tf = counts.get(term, 0)
                if tf:
                    norm = BM25_K1 * (1 - BM25_B + BM25_B * self.length[doc] / self.avg)
                    scores[doc] = scores.get(doc, 0.0) + idf * tf * (BM25_K1 + 1) / (tf + norm)
        return [d for d, _s in sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]]


def write_vault(root: Path, docs: dict[int, tuple[str, str]]) -> None:
    root.mkdir(parents=True)
    for n, (title, body) in docs.items():
        (root / f"doc-{n:04d}.md").write_text(f"# {title}\n\n{body}\n", encoding="utf-8")


def run_fsnotes(
    root: Path, state: Path, questions: dict[int, str]
) -> tuple[dict[int, list[int]], int, dict[str, Any]]:
    log = state.parent / "server.log"
    s = Server(fsnotes_cmd(root, state), fsnotes_env(state), log)
    try:
        s.initialize()
        ws = s.call("workspaces_list", {})["workspaces"][0]["uri"]
        deadline = time.monotonic() + BUILD_TIMEOUT_S
        while not s.call("notes_search", {"workspaceUri": ws, "query": "library"})["index"][
            "complete"
        ]:
            if time.monotonic() > deadline:
                raise RuntimeError("the index build did not finish")
            time.sleep(0.1)
        runs: dict[int, list[int]] = {}
        errors = 0
        extra: dict[str, Any] = {"dropped_terms": 0, "all_terms_hits": 0, "times_ms": []}
        for q, text in questions.items():
            t0 = time.perf_counter()
            try:
                found = s.call(
                    "notes_search", {"workspaceUri": ws, "query": text, "limit": RECALL_AT}
                )
            except RuntimeError as exc:
                errors += 1
                print(f"  question {q}: {str(exc)[:120]}", file=sys.stderr)
                continue
            extra["times_ms"].append((time.perf_counter() - t0) * 1000)
            runs[q] = [int(r["path"][4:8]) for r in found["results"]]
            extra["dropped_terms"] += len(found.get("dropped") or [])
            extra["all_terms_hits"] += sum(1 for r in found["results"] if r.get("allTerms"))
        return runs, errors, extra
    finally:
        s.close()


def table(rows: dict[str, dict[str, Any]], best: str) -> str:
    lines = [
        "| system | nDCG@10 | vs best BM25 | P@10 | MRR@10 | recall@50 | no result (of all) |",
        "|---|---|---|---|---|---|---|",
    ]
    base = rows[best]["ndcg"]
    for name, r in rows.items():
        empty = f"{r['no_result']} of {r['questions']}"
        if r["errors"]:
            empty += f" ({r['errors']} errors)"
        lines.append(
            f"| {name} | {r['ndcg']:.4f} | {r['ndcg'] / base:.2f}x | {r['p']:.4f} | "
            f"{r['mrr']:.4f} | {r['recall']:.4f} | {empty} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("collection", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--label", default="notes_search", help="name of this run's row")
    args = parser.parse_args()
    coll: Path = args.collection
    docs = {
        n: (" ".join(r.get("T", "").split()), r.get("W", ""))
        for n, r in smart(coll / "CISI.ALL").items()
    }
    questions = {n: " ".join(r.get("W", "").split()) for n, r in smart(coll / "CISI.QRY").items()}
    qrels = judgements(coll / "CISI.REL")
    print(f"{len(docs)} abstracts, {len(questions)} questions, {len(qrels)} judged")

    base = Baselines(docs)
    rows: dict[str, dict[str, Any]] = {}
    for name, rank, distinct in (
        ("fts5-or (FTS5 bm25, words ORed)", base.fts5_or, False),
        ("fts5-or distinct", base.fts5_or, True),
        ("bm25-py (k1 1.2, b 0.75)", base.bm25_py, False),
        ("bm25-py distinct", base.bm25_py, True),
    ):
        ranked = {q: rank(t, RECALL_AT, distinct) for q, t in questions.items()}
        rows[name] = summary(ranked, qrels, len(questions))
    for own in (False, True):
        ranker = base.bm25s_ranker(docs, own)
        if ranker is None:
            print("bm25s is not installed (pip install 'fsnotes[quality]'): its rows left out")
            break
        label = "bm25s (k1 1.5, b 0.75)" + (", its own tokenizer" if own else "")
        for distinct in (False, True):
            ranked = {q: ranker(t, RECALL_AT, distinct) for q, t in questions.items()}
            rows[label + (" distinct" if distinct else "")] = summary(ranked, qrels, len(questions))
    tantivy_rank = base.tantivy_ranker(docs)
    if tantivy_rank is None:
        print("tantivy is not installed (pip install 'fsnotes[quality]'): its rows left out")
    else:
        for distinct in (False, True):
            ranked = {q: tantivy_rank(t, RECALL_AT, distinct) for q, t in questions.items()}
            label = "tantivy (BM25, its English analyzer)" + (" distinct" if distinct else "")
            rows[label] = summary(ranked, qrels, len(questions))
    baselines = list(rows)
    # The ranking's steps, offline over the same tokens (benchmarks/quality_steps.py).
    for name, ranked in step_rows(base.db, "v", base.tokens, questions, RECALL_AT).items():
        rows[name] = summary(ranked, qrels, len(questions))
    scratch = Path(tempfile.mkdtemp(prefix="fsnotes-quality-"))
    try:
        write_vault(scratch / "vault", docs)
        runs, errors, extra = run_fsnotes(scratch / "vault", scratch / "state", questions)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rows[f"notes_search ({args.label})"] = summary(runs, qrels, len(questions), errors)
    best = max(baselines, key=lambda name: rows[name]["ndcg"])
    text = table(rows, best)
    times = sorted(extra.pop("times_ms"))
    if times:
        extra["question_p50_ms"] = round(times[len(times) // 2], 2)
        extra["question_p99_ms"] = round(times[min(len(times) - 1, round(0.99 * len(times)))], 2)
    print(text)
    print(f"notes_search: {extra}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "quality.md").write_text(text + "\n")
    out = RESULTS / "quality.json"
    saved: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    saved[args.label] = {"rows": rows, "best_baseline": best, "notes_search": extra}
    out.write_text(json.dumps(saved, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
