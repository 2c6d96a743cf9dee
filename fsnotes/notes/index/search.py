"""Ranked search over a workspace's index: which notes match, in what order, with excerpts.

A query is a ranked any-word search. Its terms are first weighed by the index's own
document frequencies (how many notes hold each, counted by FTS5, never from a list of
English words):

* at most :data:`~fsnotes.notes.text.query.MAX_QUERY_TERMS` terms are searched, the rarest
  ones (a term no note holds counts as the commonest: it can match nothing); the others are
  *dropped* (and named in the result);
* a term held by more than :data:`~fsnotes.notes.index.ranking.COMMON_SHARE` of the notes
  (in a vault of at least :data:`~fsnotes.notes.index.ranking.COMMON_MIN_NOTES`), or by more
  than :data:`~fsnotes.notes.index.ranking.COMMON_NOTES`, is *very common* (``the``,
  ``what``): it neither selects nor ranks notes (bm25 gives it next to no weight anyway,
  and reading its long list of notes is what would make a question slow), unless every
  term of the query is very common: they select then, and rank only in a window that
  holds all their notes (past it, the tiers first and then the newest, unscored);
* a note matches when it holds any of the remaining (*selecting*) terms. Matches are
  ordered by: whether they hold every selecting term, then how many of title and path hold
  every selecting term (:mod:`fsnotes.notes.index.ranking`), then the ranking score (for a
  question BM25F and RM3 feedback, :func:`scores_of`; for a keyword or two FTS5's bm25), a
  term typed several times counting that many times (up to
  :data:`~fsnotes.notes.text.query.MAX_TERM_REPEATS`).

The score reads every hit of every term, so it is computed over the rarest selecting terms whose
note counts add up to at most :data:`~fsnotes.notes.index.ranking.RANK_WINDOW` (at least
the rarest one; for that one alone, over its newest
:data:`~fsnotes.notes.index.ranking.RANK_NEWEST` notes): a query whose
terms all fit is ranked exactly, and the result says when it was not. A question's window is
then cut to bm25's best :data:`~fsnotes.notes.index.ranking.RESCORE_DEPTH`, which BM25F
re-scores over more terms than the window's: every word or prefix of the query that is not
very common (the other selecting terms, and the dropped ones: they still never make a note
match), rarest first, while their note counts add up to at most
:data:`~fsnotes.notes.index.ranking.RESCORE_NOTES` more. Every expression is bound as a
parameter, never spliced into the SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fsnotes.notes.index import ranking, termstats
from fsnotes.notes.index import texts as notetexts
from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.schema import ROW_COLUMNS, TIER_COLUMNS, Hit, row_of
from fsnotes.notes.index.texts import Reader
from fsnotes.notes.text.query import MAX_QUERY_TERMS, Term, to_match


@dataclass(frozen=True)
class Plan:
    """Which of a query's terms are searched, and how (see the module docstring)."""

    selecting: list[Term]  # a note holding any of these matches
    ranked: list[Term]  # the rarest selecting terms, which the ranking reads
    ranked_notes: list[int]  # how many notes hold each ranked term
    common: list[Term]  # very common: neither select nor rank
    dropped: list[Term]  # past MAX_QUERY_TERMS
    exact: bool  # every selecting term is ranked by bm25
    over: bool  # the one ranked term alone is in more than RANK_WINDOW notes
    # Every term is very common (they select, as nothing else could) and the ranked one is
    # over the window: no bm25 then (see search).
    unranked: bool
    # What a question's re-scoring reads (scores_of): the ranked terms, then further words
    # and prefixes that are not very common (selecting or dropped), and their note counts.
    scored: list[Term]
    scored_notes: list[int]


@dataclass(frozen=True)
class Result:
    hits: list[Hit]
    matched: int  # notes that match, counted up to ranking.COUNT_CAP
    ranked_all: bool  # every match was ranked by bm25
    plan: Plan


def _scoped(expr: str, scoped: Sequence[str]) -> str:
    return " AND ".join([f"({expr})", *scoped])


def _count(index: NoteIndex, match: str, cap: int) -> int:
    return index.count_matches(match, cap)


def plan(index: NoteIndex, terms: Sequence[Term]) -> Plan:
    """Weigh ``terms`` by how many notes of the whole index hold each (read up to the
    very-common bound, so a common word costs at most that many rowids)."""
    notes = index.count()
    common_at = ranking.common_bound(notes)
    cap = common_at + 1 if common_at is not None else ranking.COUNT_CAP
    freq = [(_count(index, term.fts(), cap), place, term) for place, term in enumerate(terms)]
    # Rarest first, but a term no note holds last: it can match nothing, so it must not
    # take the place of one that can.
    by_rarity = sorted(freq, key=lambda f: (f[0] == 0, f[0], f[1]))
    kept = by_rarity[:MAX_QUERY_TERMS]
    dropped = [t for _df, _p, t in sorted(by_rarity[MAX_QUERY_TERMS:], key=lambda f: f[1])]
    common = [t for df, _p, t in kept if common_at is not None and df > common_at]
    selecting = [(df, t) for df, _p, t in kept if t not in common] or [
        (df, t) for df, _p, t in kept
    ]
    every_common = bool(kept) and len(common) == len(kept)
    if len(selecting) == len(kept):
        common = []
    ranked: list[Term] = []
    ranked_notes: list[int] = []
    budget = 0
    for df, term in selecting:
        if ranked and budget + df > ranking.RANK_WINDOW:
            break
        ranked.append(term)
        ranked_notes.append(df)
        budget += df
    scored, scored_notes = list(ranked), list(ranked_notes)
    # The re-scoring's further terms, rarest first: those the window left out and those
    # past the term bound (read for the re-scored notes only; a phrase's reading costs its
    # words' occurrences, not its notes', so phrases are left to the window).
    spent = 0
    for df, _place, term in by_rarity:
        if term in ranked or term.phrase or not df or (common_at is not None and df > common_at):
            continue
        if spent + df > ranking.RESCORE_NOTES:
            break
        scored.append(term)
        scored_notes.append(df)
        spent += df
    return Plan(
        selecting=[t for _df, t in selecting],
        ranked=ranked,
        ranked_notes=ranked_notes,
        common=common,
        dropped=dropped,
        exact=len(ranked) == len(selecting) and budget <= ranking.RANK_WINDOW,
        over=budget > ranking.RANK_WINDOW,
        unranked=every_common and budget > ranking.RANK_WINDOW,
        scored=scored,
        scored_notes=scored_notes,
    )


def search(
    index: NoteIndex,
    terms: Sequence[Term],
    scoped: Sequence[str],
    limit: int,
    read: Reader,
) -> Result:
    """The ``limit`` best notes for ``terms`` within the scope expressions ``scoped`` (the
    folder, tag and frontmatter words, ANDed), and how many match (at most
    ``ranking.COUNT_CAP``: counting reads every match's rowid). ``read`` reads a note's
    text from its file, for the excerpts and a question's feedback (the index keeps
    none)."""
    p = plan(index, terms)
    window = ranking.RANK_NEWEST if p.over else ranking.RANK_WINDOW
    any_match = _scoped(to_match(p.selecting, op="OR"), scoped)
    matched = _count(index, any_match, ranking.COUNT_CAP)
    ranked_match = _scoped(to_match(p.ranked, op="OR", weighted=True), scoped)
    # Notes holding every selecting term, and the title and path tiers: each a bounded list
    # of the newest such notes (an AND is answered by FTS5 without reading every match).
    every: set[int] = set()
    if len(p.selecting) > 1:
        every = _ids(index, "fts", _scoped(to_match(p.selecting), scoped), window + limit)
    tiers: dict[int, int] = {}
    for column in TIER_COLUMNS:
        expr = _scoped(to_match(p.selecting, (column,)), scoped)
        for note_id in _ids(index, "tfts", expr, window + limit):
            tiers[note_id] = tiers.get(note_id, 0) + 1
    # FTS5's bm25, in C, over the window: the ranking of a keyword or two (the title and path
    # tiers order them first), of one term alone in more notes than the window (over its
    # newest notes), and a question's first cut.
    rank = f"bm25(fts, {', '.join(str(float(w)) for w in ranking.WEIGHTS)})"
    scored: Mapping[int, float | None]
    if p.unranked:
        # Only very common words, in more notes than the window: bm25 would first count the
        # notes holding each over the whole index (8 ms for a word in all of 100k notes),
        # to give it an idf FTS5 floors to next to nothing from half the notes on. As in
        # any query, such words do not rank: the tiers first, then the newest.
        scored = dict.fromkeys(_ids(index, "fts", ranked_match, window), None)
    elif not p.over and len(p.selecting) >= ranking.QUESTION_TERMS:
        scored = _rescored(index, p, ranked_match, rank, every | set(tiers), limit, read)
    else:
        scored = {
            int(r[0]): float(r[1])
            for r in index.query(
                f"SELECT rowid, {rank} FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?",
                (ranked_match, window),
            )
        }
    candidates = set(scored) | every | set(tiers)
    single = len(p.selecting) == 1

    def order(note_id: int) -> tuple[bool, int, bool, float, int]:
        score = scored.get(note_id)
        held = single or note_id in every
        return (not held, -tiers.get(note_id, 0), score is None, score or 0.0, -note_id)

    best = sorted(candidates, key=order)[:limit]
    rows = [
        (note_id, tiers.get(note_id, 0), scored.get(note_id), single or note_id in every)
        for note_id in best
    ]
    ranked_all = p.exact and matched <= window
    marked = to_match(p.selecting, op="OR")  # the words an excerpt marks
    return Result(
        hits=_hits(index, rows, marked, read), matched=matched, ranked_all=ranked_all, plan=p
    )


def _rescored(
    index: NoteIndex,
    p: Plan,
    match: str,
    rank: str,
    tiered: set[int],
    limit: int,
    read: Reader,
) -> dict[int, float]:
    """A question's scores (SQLite's sign: lower is better): bm25's best
    :data:`~fsnotes.notes.index.ranking.RESCORE_DEPTH` (at least ``limit``) of the window
    (``match``, which the whole window fits: the plan is not ``over``), chosen by SQLite's
    sorter so that only they leave C, re-scored by :func:`scores_of`. The notes of the
    tiers (``tiered``: they hold every selecting term, so every ranked one too, and are in
    the window) below the cut score 0, after every re-scored note (the tiers order them
    first, then the newest)."""
    top = [
        int(r[0])
        for r in index.query(
            f"SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY {rank}, rowid DESC LIMIT ?",
            (match, max(ranking.RESCORE_DEPTH, limit)),
        )
    ]
    relevance = scores_of(index, p, set(top), read)
    out = {n: -relevance.get(n, 0.0) for n in top}
    for n in tiered:
        out.setdefault(n, 0.0)
    return out


def scores_of(index: NoteIndex, p: Plan, within: set[int], read: Reader) -> dict[int, float]:
    """The ranking score (higher is better) of the notes ``within`` (each holds a ranked
    term): BM25F over the plan's scored terms (the ranked ones and the further ones of
    :func:`plan`), then, for a question of several terms, RM3 feedback re-weighting
    (fsnotes/notes/index/ranking.py). The statistics come from
    fsnotes/notes/index/termstats.py; the work is bounded by the scored terms' notes (at
    most RANK_WINDOW + RESCORE_NOTES) plus at most FEEDBACK_CANDIDATES bounded reads."""
    if not within:
        return {}
    total, averages = termstats.averages(index)
    lengths = termstats.lengths(index, within)
    stems: dict[str, ranking.TermStats] = {}
    stats: list[ranking.TermStats] = []
    tokens = [termstats.tokens(term.text) for term in p.scored]
    # The plain words' rows in one statement (a statement per word cost more than its rows
    # on a long question: 31 ms against 10 for 124 words on CISI).
    plain = termstats.word_frequencies(
        index,
        [words[0] for term, words in zip(p.scored, tokens, strict=True) if _plain(term, words)],
        within,
    )
    for term, notes, words in zip(p.scored, p.scored_notes, tokens, strict=True):
        if _plain(term, words):
            freqs = plain.get(words[0], [])
        else:
            freqs = termstats.frequencies(index, term.fts(), words, term.prefix, within)
        one = ranking.TermStats(notes, float(term.repeats), freqs)
        stats.append(one)
        if _plain(term, words):
            stems[words[0]] = one
    first = ranking.bm25f(stats, total, lengths, averages)
    # Feedback needs FEEDBACK_NOTES notes to learn from (two notes' shared words are noise).
    if len(first) < ranking.FEEDBACK_NOTES:
        return first
    order = sorted(first, key=lambda n: (-first[n], -n))
    rerank = order[: ranking.FEEDBACK_RERANK]
    best = order[: ranking.FEEDBACK_NOTES]
    words_of = termstats.texts(index, best, read)
    model = ranking.feedback([(first[n], words_of.get(n, Counter())) for n in best])
    bound = ranking.FEEDBACK_MAX_NOTES
    common_at = ranking.common_bound(total)
    if common_at is not None:
        bound = min(bound, common_at)
    picked: list[tuple[str, float, ranking.TermStats | int]] = []  # stats, or notes holding it
    for word, weight in model[: ranking.FEEDBACK_CANDIDATES]:
        if len(picked) == ranking.FEEDBACK_TERMS:
            break
        known = stems.get(word)
        found = known if known is not None else termstats.held(index, word, bound)
        if found is not None:
            picked.append((word, weight, found))
    # The new words' rows in the re-ranked notes, in one statement (as the typed words').
    lent_rows = termstats.word_frequencies(
        index, [w for w, _weight, f in picked if isinstance(f, int)], set(rerank)
    )
    chosen = [
        (weight, ranking.TermStats(f, 1.0, lent_rows.get(w, [])) if isinstance(f, int) else f)
        for w, weight, f in picked
    ]
    if not chosen:
        return first
    # RM3's mixed query, (1 - share) of the typed terms' weight and share of the words
    # lent: its BM25F is that mix of the two scores (BM25F is linear in the query). Only
    # the first ranking's best FEEDBACK_RERANK are re-scored: the words lent only add, so
    # no other note can rise above them.
    asked = sum(t.weight for t in stats if t.freqs)  # a term no candidate holds adds nothing
    lent = sum(w for w, _ in chosen)
    share = ranking.FEEDBACK_SHARE
    kept = set(rerank)
    extra = ranking.bm25f(
        [
            ranking.TermStats(t.notes, share * w / lent, [r for r in t.freqs if r[0] in kept])
            for w, t in chosen
        ],
        total,
        lengths,
        averages,
    )
    return {n: (1.0 - share) * s / asked + extra.get(n, 0.0) for n, s in first.items()}


def _plain(term: Term, words: Sequence[str]) -> bool:
    """Whether ``term`` is one word (one token, not a prefix)."""
    return len(words) == 1 and not term.prefix


def _ids(index: NoteIndex, table: str, match: str, limit: int) -> set[int]:
    return {
        int(r[0])
        for r in index.query(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid DESC LIMIT ?",
            (match, limit),
        )
    }


def _hits(
    index: NoteIndex, best: list[tuple[int, int, float | None, bool]], marked: str, read: Reader
) -> list[Hit]:
    """The rows of the best notes with their excerpts: each note's body read from its file
    and excerpted by FTS5's snippet() over the words ``marked`` (fsnotes/notes/index/texts.py)."""
    if not best:
        return []
    ids = [note_id for note_id, _tier, _score, _all in best]
    placeholders = ", ".join("?" * len(ids))
    rows = {
        int(r[-1]): r
        for r in index.query(
            f"SELECT {ROW_COLUMNS}, body_start, id FROM notes WHERE id IN ({placeholders})",
            ids,
        )
    }
    texts: dict[int, notetexts.NoteText] = {}
    for note_id, record in rows.items():
        text = read(row_of(record[:8]).parts)
        if text is not None:
            texts[note_id] = notetexts.of(text)
    bodies = {note_id: t.body for note_id, t in texts.items()}
    excerpts = notetexts.snippets(bodies, marked, ranking.INTERNAL_MARKS, ranking.SNIPPET_TOKENS)
    hits: list[Hit] = []
    for note_id, tier, score, every in best:
        record = rows.get(note_id)
        if record is None:
            continue  # removed since (another connection's commit)
        known = texts.get(note_id)
        hits.append(
            Hit(
                row=row_of(record[:8]),
                score=score,
                tier=tier,
                snippet=excerpts.get(note_id, ""),
                body=known.body if known else "",
                body_start=known.body_start if known else int(record[8]),
                all_terms=every,
            )
        )
    return hits
