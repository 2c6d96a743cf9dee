"""Ranked search over a workspace's index: which notes match, in what order, with excerpts.

Everything here is one read of the index (:class:`~fsnotes.notes.index.noteindex.NoteIndex`); what
the order means (tiers, bm25 weights, the ranking window) is :mod:`fsnotes.notes.index.ranking`'s
to decide, and the caller passes it in. Every expression is bound as a parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

from fsnotes.notes.index.noteindex import NoteIndex
from fsnotes.notes.index.schema import BODY_COLUMN, ROW_COLUMNS, Hit, row_of


def search(
    index: NoteIndex,
    match: str,
    tier_matches: Sequence[str],
    limit: int,
    window: int,
    weights: Sequence[float],
    marks: tuple[str, str, str],
    snippet_tokens: int,
    count_cap: int,
) -> tuple[list[Hit], int]:
    """The ``limit`` best notes for the FTS5 expression ``match``, and how many match (at
    most ``count_cap``: counting reads every match's rowid, so a word found in a million
    notes is counted up to the cap). Every expression is bound, never spliced into the SQL.

    Order: how many of ``tier_matches`` (the same terms within one column of the small
    ``tfts`` table: title, path) a note matches, then bm25. bm25 reads every hit of every
    term, so it is computed for at most ``window`` matching notes, the most recently
    indexed ones (FTS5 reads rowids newest first and stops there); tier matches beyond
    them are still ranked in their tier, after the ones in the window, by recency. A
    query with at most ``window`` matches is ranked exactly.
    """
    matched = int(
        index.query(
            "SELECT count(*) FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?)",
            (match, max(window, count_cap)),
        )[0][0]
    )
    overflow = matched > window
    rank = f"bm25(fts, {', '.join(str(float(w)) for w in weights)})"
    tiers = " + ".join(
        ["(rowid IN (SELECT rowid FROM tfts WHERE tfts MATCH ?))"] * len(tier_matches)
    )
    best: list[tuple[int, int, float | None]] = [
        (int(r[0]), int(r[2]), float(r[1]))
        for r in index.query(
            f"SELECT id, score, tier FROM (SELECT rowid AS id, {rank} AS score, "
            f"{tiers or '0'} AS tier FROM fts WHERE fts MATCH ? ORDER BY rowid DESC "
            "LIMIT ?) ORDER BY tier DESC, score LIMIT ?",
            [*tier_matches, match, window, limit],
        )
    ]
    if overflow and tier_matches:
        best = _with_older_tiers(index, best, tier_matches, window, limit)
    return _hits(index, best, match, marks, snippet_tokens), matched


def _with_older_tiers(
    index: NoteIndex,
    best: list[tuple[int, int, float | None]],
    tier_matches: Sequence[str],
    window: int,
    limit: int,
) -> list[tuple[int, int, float | None]]:
    """Add the newest title/path matches older than the window (no bm25: reading their
    hits is what the window avoids), ranked after the window's rows of their tier."""
    seen = {note_id for note_id, _tier, _score in best}
    tiers: dict[int, int] = {}
    for tier_match in tier_matches:
        for (note_id,) in index.query(
            "SELECT rowid FROM tfts WHERE tfts MATCH ? ORDER BY rowid DESC LIMIT ?",
            (tier_match, window + limit),
        ):
            tiers[note_id] = tiers.get(note_id, 0) + 1
    older = sorted(
        ((n, t, None) for n, t in tiers.items() if n not in seen),
        key=lambda row: (-row[1], -row[0]),
    )
    merged = best + older[:limit]
    merged.sort(key=lambda row: (-row[1], row[2] is None, row[2] or 0.0))
    return merged[:limit]


def _excerpts(
    index: NoteIndex, ids: list[int], match: str, marks: tuple[str, str, str], snippet_tokens: int
) -> dict[int, tuple[str, str]]:
    """(snippet, body) of these notes, in one pass over the rowid range they span: FTS5
    seeks to the range and reads it in order, and snippet() runs for the listed rows
    only. (``rowid IN (...)`` in the WHERE would make SQLite run the whole MATCH once
    per listed row, which for a prefix that expands to many words costs milliseconds
    each.)"""
    if not ids:
        return {}
    wanted = set(ids)
    placeholders = ", ".join("?" * len(ids))
    rows = index.query(
        f"SELECT rowid, CASE WHEN rowid IN ({placeholders}) THEN "
        f"snippet(fts, {BODY_COLUMN}, ?, ?, ?, ?) END, "
        f"CASE WHEN rowid IN ({placeholders}) THEN body END "
        "FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ?",
        [*ids, *marks, snippet_tokens, *ids, match, min(ids), max(ids)],
    )
    return {int(r[0]): (str(r[1]), str(r[2])) for r in rows if int(r[0]) in wanted}


def _hits(
    index: NoteIndex,
    best: list[tuple[int, int, float | None]],
    match: str,
    marks: tuple[str, str, str],
    snippet_tokens: int,
) -> list[Hit]:
    if not best:
        return []
    ids = [note_id for note_id, _tier, _score in best]
    placeholders = ", ".join("?" * len(ids))
    excerpts = _excerpts(
        index, [i for i, _tier, score in best if score is not None], match, marks, snippet_tokens
    )
    for note_id in ids:
        if note_id not in excerpts:  # ranked by tier alone, outside the window: a seek
            excerpts.update(_excerpts(index, [note_id], match, marks, snippet_tokens))
    rows = {
        int(r[-1]): r
        for r in index.query(
            f"SELECT {ROW_COLUMNS}, body_start, id FROM notes WHERE id IN ({placeholders})",
            ids,
        )
    }
    hits: list[Hit] = []
    for note_id, tier, score in best:
        record = rows.get(note_id)
        if record is None:
            continue  # removed since (another connection's commit)
        snippet, body = excerpts.get(note_id, ("", ""))
        hits.append(
            Hit(
                row=row_of(record[:8]),
                score=score,
                tier=tier,
                snippet=snippet,
                body=body,
                body_start=int(record[8]),
            )
        )
    return hits
