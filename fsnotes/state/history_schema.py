"""The history store's tables, in the state directory's SQLite file or in PostgreSQL.

The same three tables either way: ``blob`` (each distinct content once, by its SHA-256),
``version`` (one row per kept version: the note, when, who, which tool, pending or settled)
and ``usage`` (one row: the bytes counted against the size bound, kept by triggers in the
same transactions as the rows they count). In PostgreSQL they are ``history_blob``,
``history_version`` and ``history_usage`` in the schema ``fsnotes``, beside the other shared
stores' tables, so that the names say whose they are.

A version has two numbers: ``id``, the order rows were added in (an AUTOINCREMENT or identity
column, never reused: newest first and oldest pruned first follow it), and ``ref``, the
number a person or a model is shown and passes to ``notes_restore``: the time and chance
(see :func:`new_ref`), so that it names one version anywhere, not the n-th of whichever
store answers, and still grows with time.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from fsnotes.state.database import SQL, Dialect

# 2: version.ref (version 1 had only the counter, which was also the public number).
SCHEMA_VERSION = 2
# What one version row costs beyond its blob, counted against the size bound so that a
# flood of tiny versions is bounded too. SQLite, measured: the file grows by 334 bytes per
# version beyond the kept bytes (10,000 versions of 115-byte notes: rows, indexes, page
# slack), rounded up. PostgreSQL: see POSTGRES_ROW_OVERHEAD_BYTES.
ROW_OVERHEAD_BYTES = 384
# PostgreSQL's rows are wider (a 24-byte tuple header, 8-byte alignment, five btree
# indexes, one of them on the 64-character etag of a new blob). Measured with
# benchmarks/bench_history.py: pg_total_relation_size grows by 621 bytes per version
# beyond the kept bytes (10,000 versions of 115-byte notes), rounded up. (Larger notes take
# less than they count there: TOAST compresses them.)
POSTGRES_ROW_OVERHEAD_BYTES = 640
# A version's public number: the second it was kept (its Unix time, 32 bits: until 2106)
# above 21 random bits, and always above the store's last number (one more, if the clock
# says otherwise). So numbers grow with time in every store, as a person reading a list
# expects, and stay below 2**53, the largest integer a JSON number holds exactly in every
# client (a JavaScript one rounds anything above). Across stores (another deployment, or
# instances wrongly left without a shared database) a number repeats only when both kept a
# version in the same second and drew the same 21 bits, one chance in 2,097,152, and even
# then names nothing unless it is a version of the same note: a number from elsewhere is
# "no such version", never a stranger's version. Within a store the unique index makes it
# certain.
REF_RANDOM_BITS = 21
REF_LIMIT = 1 << 53


def new_ref(now: float, last: int) -> int:
    """A fresh number for a version kept at ``now``, in a store whose highest is ``last``."""
    ref = max((max(int(now), 0) << REF_RANDOM_BITS) | secrets.randbits(REF_RANDOM_BITS), last + 1)
    if ref >= REF_LIMIT:
        raise OverflowError("version numbers past 2**53 (the clock is past the year 2106)")
    return ref


@dataclass(frozen=True)
class Tables:
    blob: str
    version: str
    usage: str


SQLITE_TABLES = Tables("blob", "version", "usage")
POSTGRES_TABLES = Tables("history_blob", "history_version", "history_usage")


def tables(dialect: Dialect) -> Tables:
    return SQLITE_TABLES if dialect == "sqlite" else POSTGRES_TABLES


def row_overhead(dialect: Dialect) -> int:
    return ROW_OVERHEAD_BYTES if dialect == "sqlite" else POSTGRES_ROW_OVERHEAD_BYTES


SQLITE_SCHEMA = (
    f"PRAGMA user_version = {SCHEMA_VERSION}",
    "CREATE TABLE IF NOT EXISTS blob ("
    " id INTEGER PRIMARY KEY, etag TEXT NOT NULL UNIQUE, size INTEGER NOT NULL,"
    " data BLOB NOT NULL)",
    # AUTOINCREMENT: an id is never reused, so the order of versions survives any prune.
    "CREATE TABLE IF NOT EXISTS version ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, workspace TEXT NOT NULL, path TEXT NOT NULL,"
    " at REAL NOT NULL, blob INTEGER NOT NULL REFERENCES blob(id), principal TEXT NOT NULL,"
    " tool TEXT NOT NULL, moved_to TEXT, pending INTEGER NOT NULL, ref INTEGER)",
    "CREATE INDEX IF NOT EXISTS version_note ON version(workspace, path, pending, id)",
    "CREATE INDEX IF NOT EXISTS version_at ON version(at)",
    "CREATE INDEX IF NOT EXISTS version_blob ON version(blob)",
    "CREATE TABLE IF NOT EXISTS usage (one INTEGER PRIMARY KEY CHECK (one = 1),"
    " bytes INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO usage(one, bytes) VALUES (1, 0)",
    "CREATE TRIGGER IF NOT EXISTS blob_in AFTER INSERT ON blob"
    " BEGIN UPDATE usage SET bytes = bytes + NEW.size; END",
    "CREATE TRIGGER IF NOT EXISTS blob_out AFTER DELETE ON blob"
    " BEGIN UPDATE usage SET bytes = bytes - OLD.size; END",
    "CREATE TRIGGER IF NOT EXISTS version_in AFTER INSERT ON version"
    f" BEGIN UPDATE usage SET bytes = bytes + {ROW_OVERHEAD_BYTES}; END",
    "CREATE TRIGGER IF NOT EXISTS version_out AFTER DELETE ON version"
    f" BEGIN UPDATE usage SET bytes = bytes - {ROW_OVERHEAD_BYTES}; END",
)


def migrate_sqlite(db: SQL) -> None:
    """A file made by schema version 1 gets ``ref``: its versions keep the numbers people
    were shown (their counter), new ones get new ones. Inside one write transaction."""
    columns = {str(row[1]) for row in db.execute("PRAGMA table_info(version)").fetchall()}
    if "ref" not in columns:
        db.execute("ALTER TABLE version ADD COLUMN ref INTEGER")
    # (Also rows an older fsnotes added to a migrated file: it writes no ref.)
    db.execute("UPDATE version SET ref = id WHERE ref IS NULL")
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS version_ref ON version(ref)")


# Counted per statement, not per row (PostgreSQL triggers call a function; its transition
# tables hold the rows one statement added or removed): a prune of 100,000 expired versions
# is then two updates of the counter, not 200,000.
_COUNT_ADDED = f"""
CREATE OR REPLACE FUNCTION fsnotes.history_count_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'history_blob' THEN
    UPDATE fsnotes.history_usage SET bytes = bytes + (SELECT COALESCE(SUM(size), 0) FROM added);
  ELSE
    UPDATE fsnotes.history_usage
      SET bytes = bytes + {POSTGRES_ROW_OVERHEAD_BYTES} * (SELECT COUNT(*) FROM added);
  END IF;
  RETURN NULL;
END
$$"""
_COUNT_GONE = f"""
CREATE OR REPLACE FUNCTION fsnotes.history_count_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'history_blob' THEN
    UPDATE fsnotes.history_usage SET bytes = bytes - (SELECT COALESCE(SUM(size), 0) FROM gone);
  ELSE
    UPDATE fsnotes.history_usage
      SET bytes = bytes - {POSTGRES_ROW_OVERHEAD_BYTES} * (SELECT COUNT(*) FROM gone);
  END IF;
  RETURN NULL;
END
$$"""


def _counted(table: str) -> tuple[str, str]:
    return (
        f"CREATE OR REPLACE TRIGGER {table}_added AFTER INSERT ON {table}"
        " REFERENCING NEW TABLE AS added FOR EACH STATEMENT"
        " EXECUTE FUNCTION fsnotes.history_count_added()",
        f"CREATE OR REPLACE TRIGGER {table}_gone AFTER DELETE ON {table}"
        " REFERENCING OLD TABLE AS gone FOR EACH STATEMENT"
        " EXECUTE FUNCTION fsnotes.history_count_gone()",
    )


# The copies compressed with lz4 where the server has it (Debian's and most builds do):
# pglz, the default, took most of a 4 MiB version's time (measured in
# benchmarks/bench_history.py). Changed only when it is not set yet (the change locks the
# table), and left as it is on a server built without lz4.
_LZ4 = """
DO $$
BEGIN
  IF (SELECT attcompression FROM pg_attribute
      WHERE attrelid = 'fsnotes.history_blob'::regclass AND attname = 'data') <> 'l' THEN
    ALTER TABLE fsnotes.history_blob ALTER COLUMN data SET COMPRESSION lz4;
  END IF;
EXCEPTION WHEN feature_not_supported THEN NULL;
END
$$"""

POSTGRES_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS history_blob ("
    " id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, etag TEXT NOT NULL UNIQUE,"
    " size BIGINT NOT NULL, data BYTEA NOT NULL)",
    "CREATE TABLE IF NOT EXISTS history_version ("
    " id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ref BIGINT NOT NULL UNIQUE,"
    " workspace TEXT NOT NULL, path TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,"
    " blob BIGINT NOT NULL REFERENCES history_blob(id), principal TEXT NOT NULL,"
    " tool TEXT NOT NULL, moved_to TEXT, pending SMALLINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS history_version_note"
    " ON history_version(workspace, path, pending, id)",
    "CREATE INDEX IF NOT EXISTS history_version_at ON history_version(at)",
    "CREATE INDEX IF NOT EXISTS history_version_blob ON history_version(blob)",
    "CREATE TABLE IF NOT EXISTS history_usage ("
    " one SMALLINT PRIMARY KEY CHECK (one = 1), bytes BIGINT NOT NULL)",
    "INSERT INTO history_usage(one, bytes) VALUES (1, 0) ON CONFLICT (one) DO NOTHING",
    _LZ4,
    _COUNT_ADDED,
    _COUNT_GONE,
    *_counted("history_blob"),
    *_counted("history_version"),
)
