"""What a workspace's index holds: the schema, the row keys, the rows and the words.

The index file itself (connections, creation, writes, reads) is
:mod:`fsnotes.notes.index.noteindex`; this module is what it stores, so that the reader of
one does not need the other.

Rows are keyed by the note's components joined with U+0001, a character layer 1 never
admits in a name (:func:`sandbox.uri.check_name` refuses C0 controls) and that sorts below
every character that it does admit: SQLite's binary order of these keys is the order of the
component tuples, which is the order of a depth-first walk with sorted names, so a listing
pages by path with a plain ``key > ?`` keyset.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fsnotes.notes.text.markdown import NoteMeta
from sandbox.root import FileIdentity, FileInfo
from sandbox.uri import Components

# Bump when the schema or what is indexed changes: an index of another version is rebuilt.
# 7: indented code and code spans of any length are code (no links)
# 8: the text kept once, compressed, in ``texts`` (external-content FTS tables); incremental
#    auto-vacuum
# 9: no text kept (contentless FTS tables, SQLite 3.43+); no prefix index
# 10: the headings column leaves out the heading that is the title
SCHEMA_VERSION = 10

SEP = "\x01"  # joins components in row keys (see the module docstring)

# Porter stemming over unicode61: case, diacritics and English word endings are ignored
# ("plan" finds "planned"); documented with the query syntax in fsnotes/notes/text/query.py.
TOKENIZER = "porter unicode61 remove_diacritics 2"
# FTS5 prefix indexes of the main table (none): ``abc*`` is answered by merging the lists of
# every word that starts with ``abc``. A three-letter prefix index made that one length
# faster (a very common three-letter prefix at 100k notes: 9 ms with it, 44 without) but
# took 42% of the full-text index (8.6 of 20.2 MiB at 10k notes) and a quarter of its build
# time (1.1 of 4.1 s), which an index at most the vault's size cannot spare; the timings
# are in docs/search.md.
PREFIX_INDEXES = ""
PREFIX_OPTION = f",\n    prefix = '{PREFIX_INDEXES}'" if PREFIX_INDEXES else ""
# Column order of the FTS table; ``bm25`` weights follow it (see fsnotes/notes/index/ranking.py).
# The text a query searches; then ``scope``, which holds one made-up token per folder above
# the note, per tag (and parent tag) it carries and per frontmatter (key, value) pair, so
# that a folder, tag or where filter is one more term of the same MATCH instead of a join
# (see scope_token).
# The body is FTS5's column 0: a word's places in column 0 are written without a column
# marker, in any other column each note's list of them starts with one (two bytes, for
# nearly every word of nearly every note when the body came sixth: 6 of 18 MiB of the
# full-text index at 10k notes).
TEXT_COLUMNS = ("body", "path", "title", "headings", "tags", "front")
FTS_COLUMNS = (*TEXT_COLUMNS, "scope")
# The second, small FTS table: title and path only, for the ranking tiers (a title match
# found there without walking the body's long lists of a common word).
TIER_COLUMNS = ("title", "path")


def int64(value: int) -> int:
    """st_dev/st_ino are unsigned 64-bit (overlayfs sets high inode bits); SQLite integers
    are signed: store the same 64 bits as a signed value."""
    return value - (1 << 64) if value >= 1 << 63 else value


def uint64(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


def key_of(parts: Components) -> str:
    return SEP.join(parts)


def parts_of(key: str) -> Components:
    return tuple(key.split(SEP)) if key else ()


def subtree_range(folder: Components) -> tuple[str, str] | None:
    """The half-open key range ``[lo, hi)`` of every note below ``folder`` (None: all)."""
    if not folder:
        return None
    base = key_of(folder)
    return base + SEP, base + chr(ord(SEP) + 1)


@dataclass(frozen=True, slots=True)
class Row:
    """What the index knows about one note (no text)."""

    parts: Components
    dev: int
    ino: int
    mtime_ns: int
    size: int
    etag: str
    title: str
    tags: tuple[str, ...]

    @property
    def identity(self) -> FileIdentity:
        return FileIdentity(self.dev, self.ino)

    def matches(self, info: FileInfo) -> bool:
        """Whether ``info`` (a fresh stat) is the file this row was indexed from."""
        return (
            info.kind == "file"
            and info.identity.dev == self.dev
            and info.identity.ino == self.ino
            and info.mtime_ns == self.mtime_ns
            and info.size == self.size
        )


@dataclass(frozen=True, slots=True)
class Hit:
    row: Row
    score: float | None  # bm25: lower is better (SQLite's sign); None: not ranked by it
    tier: int  # how many of the tier expressions it matched (see search)
    snippet: str  # with the caller's marks around matched tokens
    body: str  # the indexed body (text after the frontmatter), to place the snippet
    body_start: int
    all_terms: bool = True  # holds every term the search selected by (see search.Plan)


@dataclass(frozen=True)
class Document:
    """One note's content, ready to be written to the index."""

    parts: Components
    info: FileInfo
    etag: str
    meta: NoteMeta


ROW_COLUMNS = "key, dev, ino, mtime_ns, size, etag, title, tags"


def row_of(record: Sequence[Any]) -> Row:
    return Row(
        parts=parts_of(record[0]),
        dev=uint64(record[1]),
        ino=uint64(record[2]),
        mtime_ns=record[3],
        size=record[4],
        etag=record[5],
        title=record[6],
        tags=tuple(json.loads(record[7])),
    )


# The index keeps no copy of a note's text: both FTS5 tables are contentless (only the words,
# their places and each column's length), with ``contentless_delete`` so that a changed or
# deleted note's words are taken out by its rowid (SQLite 3.43+, see
# fsnotes/notes/index/db.py). Excerpts and the ranking's feedback read the note's file
# instead (fsnotes/notes/index/texts.py), after the hit has been checked against it. At 100k
# notes the copy was 187 MiB of a 584 MiB index.
FTS_OPTIONS = "content = '', contentless_delete = 1"


# Indexes a build makes once, at its end, instead of keeping them up to date batch by batch
# (NoteIndex.bulk): their keys, a note's stem and a link's target stem, come in no order, so
# each batch of a thousand notes dirtied pages all over them, which every commit wrote to
# the WAL and every checkpoint again (at 100k notes: 515 MiB of the build's 2.2 GiB of
# writes for links_leaf, 115 MiB for notes_stem). Made at the end, each is one sort.
DEFERRED_INDEXES = {
    "notes_stem": "CREATE INDEX IF NOT EXISTS notes_stem ON notes(stem_fold)",
    "links_leaf": "CREATE INDEX IF NOT EXISTS links_leaf ON links(leaf) WHERE leaf IS NOT NULL",
}

SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE notes(
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    folder TEXT NOT NULL,
    name TEXT NOT NULL,
    path_fold TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    etag TEXT NOT NULL,
    title TEXT NOT NULL,
    title_fold TEXT NOT NULL,
    tags TEXT NOT NULL,
    body_start INTEGER NOT NULL,
    stem_fold TEXT NOT NULL
);
CREATE INDEX notes_folder ON notes(folder, name);
CREATE INDEX notes_path_fold ON notes(path_fold);
{DEFERRED_INDEXES["notes_stem"]};
CREATE TABLE tags(tag TEXT NOT NULL, note INTEGER NOT NULL, PRIMARY KEY(tag, note)) WITHOUT ROWID;
CREATE INDEX tags_note ON tags(note);
CREATE TABLE links(
    note INTEGER NOT NULL,
    kind TEXT NOT NULL,
    embed INTEGER NOT NULL,
    target TEXT NOT NULL,
    mode TEXT NOT NULL,
    want TEXT NOT NULL,
    leaf TEXT
);
CREATE INDEX links_note ON links(note);
{DEFERRED_INDEXES["links_leaf"]};
CREATE TABLE front(
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    note INTEGER NOT NULL,
    PRIMARY KEY(key, value, note)
) WITHOUT ROWID;
CREATE INDEX front_note ON front(note);
CREATE TABLE rejects(
    key TEXT PRIMARY KEY,
    folder TEXT NOT NULL,
    name TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX rejects_folder ON rejects(folder, name);
CREATE TABLE attachments(
    key TEXT PRIMARY KEY,
    folder TEXT NOT NULL,
    name TEXT NOT NULL,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX attachments_folder ON attachments(folder, name);
CREATE VIRTUAL TABLE fts USING fts5(
    {", ".join(FTS_COLUMNS)},
    {FTS_OPTIONS},
    tokenize = '{TOKENIZER}'{PREFIX_OPTION}
);
CREATE VIRTUAL TABLE tfts USING fts5(
    {", ".join(TIER_COLUMNS)}, scope,
    {FTS_OPTIONS},
    tokenize = '{TOKENIZER}'
);
"""


SCOPE_MARK = "\ue000"  # a private-use character: a word character to FTS5, never in a query
# Scope words remembered: folders, tags and frontmatter pairs recur on note after note of a
# build (each is a SHA-256 to compute); a few thousand short strings.
SCOPE_TOKEN_CACHE = 8192


@functools.lru_cache(maxsize=SCOPE_TOKEN_CACHE)
def scope_token(kind: str, value: str) -> str:
    """The made-up word that stands for "below folder ``value``" (kind ``f``), "tagged
    ``value`` or a tag below it" (kind ``t``) or "frontmatter pair ``value``" (kind ``k``,
    see :func:`where_token`) in the scope column. It starts with
    :data:`SCOPE_MARK`, which the query parser removes from what a caller types, so no
    query term can ever match a scope word; the rest is ASCII letters and digits, which no
    tokenizer or stemmer changes."""
    digest = hashlib.sha256(f"{kind}\x00{value}".encode()).digest()
    return f"{SCOPE_MARK}{kind}{int.from_bytes(digest[:8], 'big')}"


def where_token(key: str, value: str) -> str:
    """The scope word of one frontmatter (key, value) pair (see fsnotes.notes.text.where)."""
    return scope_token("k", f"{key}\x00{value}")


def scope_text(
    parts: Components, tags: Sequence[str], front: Sequence[tuple[str, str]] = ()
) -> str:
    words = [scope_token("f", key_of(parts[:depth])) for depth in range(1, len(parts))]
    words.extend(where_token(key, value) for key, value in front)
    seen: set[str] = set()
    for tag in tags:
        pieces = tag.casefold().split("/")
        for depth in range(1, len(pieces) + 1):
            name = "/".join(pieces[:depth])
            if name and name not in seen:
                seen.add(name)
                words.append(scope_token("t", name))
    return " ".join(words)


def front_text(frontmatter: dict[str, Any]) -> str:
    """Frontmatter values as searchable text (title and tags have their own columns)."""
    out: list[str] = []
    for key, value in frontmatter.items():
        if key in ("title", "tags"):
            continue
        values = value if isinstance(value, list) else [value]
        out.extend(str(v) for v in values if v is not None and not isinstance(v, bool))
    return "\n".join(out)


def path_text(parts: Components) -> str:
    stem = parts[-1].rsplit(".", 1)[0] if "." in parts[-1][1:] else parts[-1]
    return " / ".join((*parts[:-1], stem))
