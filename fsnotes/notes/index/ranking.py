"""How search hits are ranked and excerpted.

A query is an any-word search (fsnotes/notes/index/search.py); notes holding every term it
selects by come first. A note *about* a thing usually names it in its title and its file
name, so next notes are ranked by how many of those two hold every such term (2, 1 or 0).
Within each tier a question (QUESTION_TERMS or more selecting terms) is ranked by BM25F
over the fields (:func:`bm25f`, from the statistics fsnotes/notes/index/termstats.py reads),
then re-ordered by RM3 pseudo-relevance feedback (:func:`feedback`); a keyword or two by
FTS5's ``bm25()`` with the column weights below. (FTS5's bm25 adds the weighted hits of all
columns before its term-frequency saturation and normalises by the whole note's length, so
column weights alone cannot lift a short title over a long body: hence the tiers, and BM25F
for questions.) Excerpts come from FTS5's ``snippet()`` over the body, with the matched
words marked, and are placed on the line of the note they start on.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from fsnotes.notes.index.schema import FTS_COLUMNS, TEXT_COLUMNS

# bm25 weight per FTS column (fsnotes/notes/index/noteindex.py FTS_COLUMNS order).
COLUMN_WEIGHTS: dict[str, float] = {
    "path": 2.0,
    "title": 3.0,
    "headings": 2.0,
    "tags": 2.0,
    "front": 1.5,
    "body": 1.0,
    "scope": 0.0,  # made-up folder and tag tokens: a filter, never relevance
}
# bm25 reads every hit of every term in every matching note: 2 µs per note for a word seen
# once or twice, 11 µs for "the" (dozens of hits a note), on the 2-core machine. Ranking
# every match of a word found in all of 100k notes would take a second. So bm25 reads the
# rarest terms whose note counts add up to at most this many (or, for a rarer term than
# that alone, its newest this many notes), plus the newest notes holding every term and
# the title and path matches beyond them; a query whose terms fit is ranked exactly, and
# the result says when it was not.
RANK_WINDOW = 4000
# A term alone in more notes than RANK_WINDOW is ranked over its newest this many (reading
# a very common word's hits costs about 11 µs a note).
RANK_NEWEST = 1000
# Very common terms (see fsnotes/notes/index/search.py): held by more than this share of
# the notes (bm25's idf is zero or below from half the notes on: FTS5 floors it to 1e-6)...
COMMON_SHARE = 0.5
# ... in a vault of at least this many notes (in a handful of notes every word is in half
# of them, and none is noise) ...
COMMON_MIN_NOTES = 20
# ... or held by more than this many notes whatever the vault's size: counting a term's
# notes reads them (0.25 µs each), and bm25 would read all its hits.
COMMON_NOTES = 10_000
# Matches are counted up to this many (reading rowids, about 0.25 µs each): past it a
# result says "at least" (totalExact false) instead of reading a million rowids to count.
COUNT_CAP = 10_000
WEIGHTS: tuple[float, ...] = tuple(COLUMN_WEIGHTS[c] for c in FTS_COLUMNS)

# The ranking score: BM25F (Robertson and Zaragoza, "The probabilistic relevance framework",
# 2009): a term's frequency in each field is divided by that field's length normalisation,
# weighted by the field, summed, and only then saturated (k1), so a word in a short title
# counts like several in a long body. Chosen on the CISI collection
# (benchmarks/bench_quality.py; the steps and their effect are in docs/search.md): k1 2.0
# instead of the textbook 1.2 (a term repeated in an abstract keeps adding), the title
# twice the body.
BM25F_K1 = 2.0
# BM25F and feedback rank a question: a query of at least this many selecting terms. A
# keyword or two is ranked by FTS5's bm25() in C (its title and path tiers come first, and
# it costs a third of reading the statistics out: 2 ms instead of 6 at 20k notes).
QUESTION_TERMS = 3
# A question's notes are first cut by FTS5's bm25 (in C) to its best this many, which BM25F
# and the feedback then re-score: reading a column length and scoring a note in Python costs
# about 30 µs, too much for the 4,000 notes of the window (95 ms at 100k notes, against 33
# for bm25 alone); the notes bm25 puts below this many rarely reach the first page.
RESCORE_DEPTH = 200
# The re-scoring reads, beyond the window's terms, the query's other words and prefixes that
# are not very common (selecting terms the window left out, and terms past the term bound),
# rarest first, while their note counts add up to at most this many: a term's occurrences
# are read from its whole doclist (about 0.5 µs a note on the 2-core machine), so this bounds
# the extra reads to about 6 ms whatever the vault's size, the cost of the window's bm25 (on
# CISI's long questions the terms the window and the bound left out were worth 3%:
# docs/search.md).
RESCORE_NOTES = 10_000
BM25F_B = 0.75
FIELD_WEIGHTS: dict[str, float] = {
    "path": 1.0,
    "title": 1.5,
    "headings": 1.0,  # a note's first heading is its title too: counted there already
    "tags": 2.0,
    "front": 1.0,
    "body": 1.0,
}
TEXT_WEIGHTS: tuple[float, ...] = tuple(FIELD_WEIGHTS[c] for c in TEXT_COLUMNS)
# Pseudo-relevance feedback (RM3, Lavrenko and Croft 2001; Abdul-Jaleel et al. 2004): the
# FEEDBACK_NOTES best notes of the first ranking lend their FEEDBACK_TERMS most likely words
# (by their share of each note's words, weighted by the note's score), which then carry
# FEEDBACK_SHARE of the query's weight. It only re-orders the notes that match: a word it
# adds never makes a note match.
FEEDBACK_NOTES = 5
FEEDBACK_TERMS = 10
FEEDBACK_SHARE = 0.5
# Feedback re-orders the first ranking's best this many notes (the others cannot rise above
# them: feedback only adds), so reading a feedback word costs at most this many notes' rows.
FEEDBACK_RERANK = 100
# A word lent must be in at least this many of the FEEDBACK_NOTES (a word of one note only
# is that note's topic, not the question's).
FEEDBACK_MIN_NOTES = 2
# Candidate words looked at (by their feedback weight) to find FEEDBACK_TERMS that are not
# very common: counting a candidate's notes reads up to FEEDBACK_MAX_NOTES rowids.
FEEDBACK_CANDIDATES = 20
# A feedback word in more notes than this (or than the very-common bound) is skipped: it
# says little, and reading its occurrences would cost as much as a common word's.
FEEDBACK_MAX_NOTES = 1000


@dataclass(frozen=True)
class TermStats:
    """One term as the ranking sees it: in how many notes of the index it is, its weight
    in the query (the times it was typed, or its feedback weight), and its occurrences in
    the candidate notes as (note id, text column index in TEXT_COLUMNS, count) rows."""

    notes: int
    weight: float
    freqs: list[tuple[int, int, int]]


def idf(notes: int, total: int) -> float:
    """Lucene's BM25 idf: never negative, so a word in most notes still counts a little."""
    return math.log(1.0 + (total - notes + 0.5) / (notes + 0.5))


def bm25f(
    terms: Sequence[TermStats],
    total: int,
    lengths: dict[int, tuple[int, ...]],
    averages: tuple[float, ...],
) -> dict[int, float]:
    """BM25F score (higher is better) of every note some term occurs in. ``total``: notes
    in the index; ``lengths``: each note's tokens per text column (a note missing from it
    counts as of average length); ``averages``: the index's average per column. Linear in
    the terms' rows."""
    out: dict[int, float] = {}
    norms: dict[int, tuple[float, ...]] = {}
    k1 = BM25F_K1
    for term in terms:
        weight = term.weight * idf(term.notes, max(total, term.notes)) * (k1 + 1.0)
        acc: dict[int, float] = {}
        for note, column, count in term.freqs:
            norm = norms.get(note)
            if norm is None:
                size: Sequence[float] = lengths.get(note) or averages
                norm = norms[note] = tuple(
                    w / (1.0 - BM25F_B + BM25F_B * (s / a if a else 1.0))
                    for w, s, a in zip(TEXT_WEIGHTS, size, averages, strict=True)
                )
            acc[note] = acc.get(note, 0.0) + count * norm[column]
        for note, x in acc.items():
            if x > 0:
                out[note] = out.get(note, 0.0) + weight * x / (x + k1)
    return out


def feedback(top: Sequence[tuple[float, Counter[str]]]) -> list[tuple[str, float]]:
    """RM3's expansion words for the best notes as (score, their tokens): each word found
    in at least FEEDBACK_MIN_NOTES of them with its relevance-model weight, best first (the
    caller keeps those it can afford)."""
    total = sum(score for score, _ in top if score > 0)
    weights: dict[str, float] = {}
    seen: Counter[str] = Counter()
    for score, words in top:
        size = sum(words.values())
        if score <= 0 or not size:
            continue
        seen.update(words.keys())
        for word, count in words.items():
            weights[word] = weights.get(word, 0.0) + (score / total) * count / size
    shared = [(w, v) for w, v in weights.items() if seen[w] >= FEEDBACK_MIN_NOTES]
    return sorted(shared, key=lambda w: (-w[1], w[0]))


# Matched words are wrapped in these marks: Markdown bold, which every model reads as
# emphasis (a note's own '**' can look the same; the excerpt is a pointer, not the text).
MARK_OPEN = "**"
MARK_CLOSE = "**"
ELLIPSIS = "…"
# Words per excerpt: about two lines of prose, enough to tell notes apart.
SNIPPET_TOKENS = 24
# Internal marks used while locating the excerpt in the body (never in a note: C0 controls
# cannot be indexed as words, and are replaced by the public marks before returning).
_OPEN, _CLOSE = "\x02", "\x03"
INTERNAL_MARKS = (_OPEN, _CLOSE, ELLIPSIS)


@dataclass(frozen=True)
class Excerpt:
    line: int  # 1-based line of the note where the excerpt starts
    text: str


def common_bound(notes: int) -> int | None:
    """Past how many holding notes a term is very common in an index of ``notes`` notes
    (None: no term is, the vault being too small to tell)."""
    if notes < COMMON_MIN_NOTES:
        return None
    return min(int(notes * COMMON_SHARE), COMMON_NOTES)


# Added to the shown score of a note holding every selected term (of several): more than
# the tiers and the bm25 fraction together, as it ranks before them.
ALL_TERMS_SCORE = 3


def scores(hits: list[tuple[float | None, int, bool]], several: bool) -> list[float]:
    """Scores shown to the caller for (bm25, tier, all terms) in rank order: relative
    relevance, higher is better. The best bm25 counts 1 (others their fraction of it; a
    note ranked by tier alone, beyond the ranking window, 0), each tier adds 1: every term
    in the title +1, in the path too +2, and holding every term (when the query selected
    by ``several``) :data:`ALL_TERMS_SCORE`. (bm25's absolute values mean nothing across
    queries, and FTS5 floors the weight of a word found in most notes to 1e-6, so raw
    values can all round to 0.)"""
    ranked = [b for b, _, _ in hits if b is not None]
    best = min(ranked, default=0.0)
    out = []
    for bm25, tier, every in hits:
        relative = 0.0 if bm25 is None else (bm25 / best if best < 0 else 1.0)
        bonus = ALL_TERMS_SCORE if every and several else 0
        out.append(round(relative + tier + bonus, 3))
    return out


def excerpt(raw: str, body: str | None, body_start: int) -> Excerpt | None:
    """Turn a ``snippet()`` made with :data:`INTERNAL_MARKS` into a one-line excerpt placed
    on the line of its first matched word.

    ``body`` (the indexed text after the frontmatter) locates that line; where the excerpt
    cannot be found in it, the excerpt is placed on the body's first line.
    """
    if not raw.strip():
        return None
    plain = raw.replace(_OPEN, "").replace(_CLOSE, "")
    core = plain.lstrip(ELLIPSIS).lstrip()
    cut = len(plain) - len(core)  # what the left strip removed
    core = core.rstrip(ELLIPSIS).rstrip()
    first = raw.find(_OPEN)
    lead = len(raw[:first].replace(_CLOSE, "")) - cut if first >= 0 else 0
    line = body_start
    if body is not None and core:
        at = body.find(core)
        if at >= 0:
            line = body_start + body.count("\n", 0, at + max(lead, 0))
    text = raw.replace(_OPEN, MARK_OPEN).replace(_CLOSE, MARK_CLOSE)
    return Excerpt(line=line, text=" ".join(text.split()))
