"""The reads of an index file that listing, completion and attachments make: counts, the
scanner's manifests, a note's row, pages of rows in path order (by folder, tag or
frontmatter value), titles and paths by prefix. :class:`~fsnotes.notes.index.noteindex.NoteIndex`
is the file (opening, replacing, writing); ranked search is
:mod:`fsnotes.notes.index.search`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from fsnotes.notes.index.attachments import AttachmentRow
from fsnotes.notes.index.newnotes import prefixed
from fsnotes.notes.index.schema import (
    ROW_COLUMNS,
    Row,
    key_of,
    parts_of,
    row_of,
    subtree_range,
    uint64,
)
from sandbox.uri import Components

# A tag on at most this many notes is listed by gathering its notes and sorting them (cheap
# when few carry it); one on more is listed by walking every note in path order and keeping
# the tagged ones (cheap when many do). Both cost about the same at this count.
RARE_TAG_NOTES = 2_000


class IndexReads(abc.ABC):
    """Reads over one index file, each one statement (or a few) through :meth:`query`."""

    @abc.abstractmethod
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read statement, on this thread's connection."""

    def count(self, folder: Components = ()) -> int:
        bounds = subtree_range(folder)
        if bounds is None:
            # Kept in the same transactions as the rows (see Tx): count(*) would read the
            # whole table (milliseconds at 100k notes) on every query.
            return int(self.query("SELECT value FROM meta WHERE key = 'notes'")[0][0])
        return int(
            self.query("SELECT count(*) FROM notes WHERE key >= ? AND key < ?", bounds)[0][0]
        )

    def manifest(self, folder: Components) -> dict[str, tuple[int, int, int, int]]:
        """name -> (dev, ino, mtime_ns, size) of what was seen directly in ``folder``: the
        indexed notes and the files rejected as notes (not UTF-8, too large, unreadable),
        so that an unchanged rejected file is not read again on every rescan."""
        rows = self.query(
            "SELECT name, dev, ino, mtime_ns, size FROM notes WHERE folder=? UNION ALL "
            "SELECT name, dev, ino, mtime_ns, size FROM rejects WHERE folder=?",
            (key_of(folder), key_of(folder)),
        )
        return {r[0]: (uint64(r[1]), uint64(r[2]), r[3], r[4]) for r in rows}

    def folders(self) -> set[Components]:
        """Every folder that directly holds an indexed note, a remembered reject or an
        attachment."""
        rows = self.query(
            "SELECT folder FROM notes UNION SELECT folder FROM rejects "
            "UNION SELECT folder FROM attachments"
        )
        return {parts_of(r[0]) for r in rows}

    def note_folders(self) -> set[Components]:
        """Every folder that directly holds an indexed note (not one holding only
        attachments or files rejected as notes: there is nothing there to read)."""
        return {parts_of(r[0]) for r in self.query("SELECT DISTINCT folder FROM notes")}

    def get(self, parts: Components) -> Row | None:
        found = self.query(f"SELECT {ROW_COLUMNS} FROM notes WHERE key=?", (key_of(parts),))
        return row_of(found[0]) if found else None

    def page(
        self,
        folder: Components,
        after: Components | None,
        limit: int,
        tag: str | None,
        front: Sequence[tuple[str, str]] = (),
    ) -> list[Row]:
        """Up to ``limit`` notes below ``folder`` in path order after ``after`` (with ``tag``
        and every frontmatter pair of ``front``, see fsnotes.notes.text.where)."""
        common = tag is not None and not self._rare(tag)
        where, params = self._scope(folder, None if common else tag)
        for key, value in front:
            # As for tags: a pair few notes carry is gathered first; one many carry is
            # checked note by note along the path order (a seek in the pair's b-tree each).
            if self._rare_pair(key, value):
                where.append("n.id IN (SELECT note FROM front WHERE key = ? AND value = ?)")
            else:
                where.append(
                    "EXISTS (SELECT 1 FROM front f WHERE f.key = ? AND f.value = ? "
                    "AND f.note = n.id)"
                )
            params.extend([key, value])
        if tag is not None and common:
            # A tag many notes carry: walk the notes in path order and keep the tagged ones,
            # which stops after a page; gathering and sorting every tagged note first would
            # cost milliseconds per ten thousand of them, on every page.
            where.append(
                "EXISTS (SELECT 1 FROM tags t WHERE t.note = n.id AND "
                "(t.tag = ? OR (t.tag >= ? AND t.tag < ?)))"
            )
            params.extend([tag, tag + "/", tag + "0"])
        if after is not None:
            where.append("n.key > ?")
            params.append(key_of(after))
        sql = f"SELECT {prefixed('n')} FROM notes n"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY n.key LIMIT ?"
        return [row_of(r) for r in self.query(sql, [*params, limit])]

    def _rare(self, tag: str) -> bool:
        """Whether few enough notes carry ``tag`` (or a tag below it) to gather them all."""
        found = self.query(
            "SELECT count(*) FROM (SELECT 1 FROM tags WHERE tag = ? OR (tag >= ? AND tag < ?) "
            "LIMIT ?)",
            (tag, tag + "/", tag + "0", RARE_TAG_NOTES + 1),
        )
        return int(found[0][0]) <= RARE_TAG_NOTES

    def _rare_pair(self, key: str, value: str) -> bool:
        found = self.query(
            "SELECT count(*) FROM (SELECT 1 FROM front WHERE key = ? AND value = ? LIMIT ?)",
            (key, value, RARE_TAG_NOTES + 1),
        )
        return int(found[0][0]) <= RARE_TAG_NOTES

    @staticmethod
    def _scope(folder: Components, tag: str | None) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        bounds = subtree_range(folder)
        if bounds is not None:
            where.append("n.key >= ? AND n.key < ?")
            params.extend(bounds)
        if tag is not None:
            # A tag matches itself and its nested tags ('a' matches 'a/b'): '0' follows '/'.
            where.append("n.id IN (SELECT note FROM tags WHERE tag = ? OR (tag >= ? AND tag < ?))")
            params.extend([tag, tag + "/", tag + "0"])
        return where, params

    def titled(self, folded: str, limit: int) -> list[Row]:
        """Notes whose casefolded title contains ``folded``, in path order, at most ``limit``."""
        return [
            row_of(r)
            for r in self.query(
                f"SELECT {ROW_COLUMNS} FROM notes WHERE instr(title_fold, ?) > 0 "
                "ORDER BY key LIMIT ?",
                (folded, limit),
            )
        ]

    def paths_with_prefix(self, folded: str, limit: int) -> tuple[list[Components], int]:
        """Notes whose casefolded '/'-path starts with ``folded`` (path order), and how many."""
        if folded:
            bounds: tuple[str, ...] = (folded, folded + "\U0010ffff")
            where = " WHERE path_fold >= ? AND path_fold < ?"
        else:
            bounds, where = (), ""
        total = int(self.query(f"SELECT count(*) FROM notes{where}", bounds)[0][0])
        rows = self.query(f"SELECT key FROM notes{where} ORDER BY key LIMIT ?", (*bounds, limit))
        return [parts_of(r[0]) for r in rows], total

    def attachment_manifest(self, folder: Components) -> dict[str, tuple[int, int, int, int]]:
        """name -> (dev, ino, mtime_ns, size) of the attachments recorded in ``folder``."""
        rows = self.query(
            "SELECT name, dev, ino, mtime_ns, size FROM attachments WHERE folder=?",
            (key_of(folder),),
        )
        return {r[0]: (uint64(r[1]), uint64(r[2]), r[3], r[4]) for r in rows}

    def attachments_page(self, after: Components | None, limit: int) -> list[AttachmentRow]:
        """Up to ``limit`` attachments in path order after ``after``."""
        rows = self.query(
            "SELECT key, dev, ino, mtime_ns, size FROM attachments WHERE key > ? "
            "ORDER BY key LIMIT ?",
            (key_of(after) if after else "", limit),
        )
        return [AttachmentRow(parts_of(r[0]), uint64(r[1]), uint64(r[2]), r[3], r[4]) for r in rows]
