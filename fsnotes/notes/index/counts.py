"""How many notes match an FTS5 expression, remembered until the full-text index changes.

Every search first counts the notes holding each of its terms (up to a bound, see
:func:`fsnotes.notes.index.search.plan`), and a question's common words (``the``, ``of``)
cost the most to count (their bound's worth of rowids read, milliseconds each) and recur in
nearly every question. A count is remembered with the FTS5 table's *structure record*, the
small row FTS5 rewrites on every change of the index (a note written or removed, a
merge, in this process or any other): while that record is unchanged, so is every count.
The record and the count are read in one statement (one snapshot), so a count is never
remembered with the record of another state of the index.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

# Counts remembered (expression and bound, a few dozen bytes each); past this they are all
# forgotten at once (a cache, not a record: the next searches count again).
MAX_COUNTS = 4096
# FTS5's structure record is the row of this id in the table's ``_data`` shadow table.
STRUCTURE_ID = 10

Query = Callable[[str, Sequence[Any]], list[Any]]


class MatchCounts:
    """Counts of ``fts MATCH expr`` up to a bound, remembered per state of the index."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version: bytes | None = None
        self._counts: dict[tuple[str, int], int] = {}

    def forget(self) -> None:
        """The index file was replaced: nothing remembered holds for the new one."""
        with self._lock:
            self._version = None
            self._counts = {}

    def count(self, query: Query, match: str, cap: int) -> int:
        """Notes matching ``match``, counted up to ``cap`` (as the SQL would count them)."""
        version = query(f"SELECT block FROM fts_data WHERE id = {STRUCTURE_ID}", ())
        now = bytes(version[0][0]) if version else b""
        with self._lock:
            if now == self._version and (match, cap) in self._counts:
                return self._counts[(match, cap)]
        row = query(
            f"SELECT (SELECT block FROM fts_data WHERE id = {STRUCTURE_ID}), "
            "(SELECT count(*) FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?))",
            (match, cap),
        )[0]
        seen = bytes(row[0]) if row[0] is not None else b""
        counted = int(row[1])
        with self._lock:
            if seen != self._version or len(self._counts) >= MAX_COUNTS:
                self._version, self._counts = seen, {}
            self._counts[(match, cap)] = counted
        return counted
