"""The ranking's steps, one at a time, offline (for benchmarks/bench_quality.py).

A pure-Python harness over the same notes and tokens as the baselines (FTS5's tokenizer,
read back from ``fts5vocab``), with the fields laid out as the server indexes a note
``# title`` + abstract: title, headings (the title again) and body (the title line and the
abstract). Each row adds one step to the one before, so the printed table shows what each
step is worth on this collection; the server's own row (``notes_search``) is the last step
with everything the server adds (the tiers, the path field, scope). The formulas are the
ones in fsnotes/notes/index/ranking.py; the settings are its constants.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from fsnotes.notes.index import ranking
from fsnotes.notes.text.query import MAX_QUERY_TERMS, MAX_TERM_REPEATS

Weights = dict[str, float]


class Steps:
    def __init__(self, db: sqlite3.Connection, table_vocab: str) -> None:
        # (title, body) occurrences -> the server's three fields: title, headings, body.
        title: dict[int, Counter[str]] = defaultdict(Counter)
        body: dict[int, Counter[str]] = defaultdict(Counter)
        for term, doc, col in db.execute(f"SELECT term, doc, col FROM {table_vocab}"):
            (title if col == "title" else body)[doc][term] += 1
        docs = set(title) | set(body)
        self.tf = {n: (title[n], title[n], title[n] + body[n]) for n in docs}
        self.n = len(docs)
        self.length = {n: tuple(sum(c.values()) for c in f) for n, f in self.tf.items()}
        self.avg = tuple(sum(v[i] for v in self.length.values()) / self.n for i in range(3))
        self.post: dict[str, list[tuple[int, tuple[int, int, int]]]] = defaultdict(list)
        for n, (t, h, b) in self.tf.items():
            for term in set(t) | set(b):
                self.post[term].append((n, (t[term], h[term], b[term])))
        self.df = {t: len(p) for t, p in self.post.items()}

    def bm25f(self, q: Weights, k1: float, w: tuple[float, float, float]) -> Weights:
        out: Weights = defaultdict(float)
        b = ranking.BM25F_B
        for term, weight in q.items():
            if term not in self.post:
                continue
            idf = ranking.idf(self.df[term], self.n) * weight
            for n, f in self.post[term]:
                size = self.length[n]
                x = sum(w[i] * f[i] / (1 - b + b * size[i] / self.avg[i]) for i in range(3) if f[i])
                out[n] += idf * x * (k1 + 1) / (x + k1)
        return out

    def feedback(self, q: Weights, first: Weights, k1: float, rerank: int | None) -> Weights:
        order = sorted(first, key=lambda n: (-first[n], n))
        best = order[: ranking.FEEDBACK_NOTES]
        if len(best) < ranking.FEEDBACK_NOTES:
            return first
        model = ranking.feedback(
            [(first[n], self.tf[n][0] + self.tf[n][2]) for n in best]  # title + body
        )
        bound = min(ranking.FEEDBACK_MAX_NOTES, self.n // 2)
        chosen = [(t, v) for t, v in model if self.df.get(t, 0) <= bound]
        chosen = chosen[: ranking.FEEDBACK_TERMS]
        if not chosen:
            return first
        share, asked = ranking.FEEDBACK_SHARE, sum(v for t, v in q.items() if t in self.post)
        lent = sum(v for _t, v in chosen)
        extra = self.bm25f({t: share * v / lent for t, v in chosen}, k1, self.weights)
        kept = set(order[:rerank]) if rerank else set(first)
        return {
            n: (1 - share) * s / asked + (extra.get(n, 0.0) if n in kept else 0.0)
            for n, s in first.items()
        }

    weights = (
        ranking.FIELD_WEIGHTS["title"],
        ranking.FIELD_WEIGHTS["headings"],
        ranking.FIELD_WEIGHTS["body"],
    )

    def query(self, tokens: list[str], bounded: bool, common_out: bool) -> Weights:
        counts = Counter(tokens)
        if bounded:  # the server's: the 32 rarest, repeats up to 4, the 4,000-note window
            rare = sorted(counts, key=lambda t: (self.df.get(t, 0) == 0, self.df.get(t, 0)))
            counts = Counter({t: min(counts[t], MAX_TERM_REPEATS) for t in rare[:MAX_QUERY_TERMS]})
        if common_out:
            kept = Counter({t: v for t, v in counts.items() if self.df.get(t, 0) <= self.n // 2})
            counts = kept or counts
        if bounded:
            ranked, budget = Counter(), 0
            for t in sorted(counts, key=lambda t: self.df.get(t, 0)):
                if ranked and budget + self.df.get(t, 0) > ranking.RANK_WINDOW:
                    break
                ranked[t], budget = counts[t], budget + self.df.get(t, 0)
            counts = ranked
        return {t: float(v) for t, v in counts.items()}

    def rows(self) -> list[tuple[str, Callable[[list[str], int], list[int]]]]:
        k1 = ranking.BM25F_K1

        def ranked(scores: Weights, k: int) -> list[int]:
            return [n for n, _s in sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]]

        def one_field(k1_: float) -> Callable[[list[str], int], list[int]]:
            def run(tokens: list[str], k: int) -> list[int]:
                q = self.query(tokens, False, False)
                # One field: title and abstract as written (the baselines' layout).
                out: Weights = defaultdict(float)
                for term, weight in q.items():
                    for n, f in self.post.get(term, []):
                        tf, size = f[0] + f[2] - f[1], self.length[n][2]
                        norm = k1_ * (1 - 0.75 + 0.75 * size / self.avg[2])
                        idf = ranking.idf(self.df[term], self.n)
                        out[n] += weight * idf * tf * (k1_ + 1) / (tf + norm)
                return ranked(out, k)

            return run

        def fielded(common_out: bool, fb: bool, bounded: bool) -> Callable[..., list[int]]:
            def run(tokens: list[str], k: int) -> list[int]:
                q = self.query(tokens, bounded, common_out)
                first = self.bm25f(q, k1, self.weights)
                if fb:
                    first = self.feedback(
                        q, first, k1, ranking.FEEDBACK_RERANK if bounded else None
                    )
                return ranked(first, k)

            return run

        return [
            ("offline: BM25, one field, k1 1.2", one_field(1.2)),
            (f"offline: BM25, one field, k1 {k1}", one_field(k1)),
            ("offline: + BM25F (title, headings, body fields)", fielded(False, False, False)),
            ("offline: + very common words out", fielded(True, False, False)),
            ("offline: + RM3 feedback", fielded(True, True, False)),
            ("offline: + the server's bounds (32 terms, window)", fielded(True, True, True)),
        ]


def step_rows(
    db: sqlite3.Connection,
    vocab: str,
    tokens: Callable[[str], list[str]],
    questions: dict[int, str],
    k: int,
) -> dict[str, dict[int, list[int]]]:
    steps = Steps(db, vocab)
    out: dict[str, dict[int, list[int]]] = {}
    for name, run in steps.rows():
        out[name] = {q: run(tokens(text), k) for q, text in questions.items()}
    return out


__all__: list[Any] = ["step_rows"]
