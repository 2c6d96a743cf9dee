"""How search hits are ranked and excerpted.

A query is an any-word search (fsnotes/notes/index/search.py); notes holding every term it
selects by come first. A note *about* a thing usually names it in its title and its file
name, so next notes are ranked by how many of those two hold every such term (2, 1 or 0);
within each tier
FTS5's ``bm25()`` ranks, with a match in a heading, a tag or the title counting more than
one in running text.
(FTS5's bm25 adds the weighted hits of all columns before its term-frequency saturation, so
column weights alone cannot lift a short title over a long body: hence the tiers.) Excerpts
come from FTS5's ``snippet()`` over the body, with the matched
words marked, and are placed on the line of the note they start on.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsnotes.notes.index.schema import FTS_COLUMNS

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
