"""The audit log's hash chain as an investigator checks it: rows written by the real stores,
tampered with by hand in the real database (the SQLite file, or PostgreSQL), then the real
``fsnotes audit --verify`` (and ``--checkpoint`` / ``--against``), on both backends.

Each kind of tampering is found and named by the first row that does not match: an edit (of
an intent, of an outcome), a deletion, a reordering, a tail cut off; and a chain rewritten
consistently by someone holding the database passes ``--verify`` alone (the documented
limit) but not ``--against`` a checkpoint printed before."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fsnotes.state.audit import DB_NAME, Auditor, Entry, open_audit
from fsnotes.state.audit_chain import intent_fields, link, outcome_fields
from fsnotes.state.shared import SharedState
from tests.e2e.test_cli_audit import audit_cli

# Five rows, nine chain positions: rows 1-4 have an intent and an outcome (positions 1-8),
# row 5 is still pending (position 9).
ROWS = 5
POSITIONS = 9


class Log:
    """The backend under test with its rows, and raw SQL on it (as an intruder has it)."""

    def __init__(self, backend: SharedState, dsn: str | None) -> None:
        self.backend = backend
        self.dsn = dsn

    def sql(self, statement: str, *args: Any) -> list[Any]:
        if self.dsn is None:
            # In a process of its own, as an intruder's would be (a second connection in this
            # process, beside the stores', met SQLite "disk I/O error"s now and then).
            script = (
                "import json, sqlite3, sys\n"
                "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                "print(json.dumps(db.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall()))"
            )
            out = subprocess.run(
                [sys.executable, "-c", script, str(self.backend.state_dir / DB_NAME),
                 statement, json.dumps(list(args))],
                capture_output=True, text=True, timeout=60, check=True,
            )  # fmt: skip
            return [tuple(r) for r in json.loads(out.stdout)]
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SET search_path = fsnotes")
            cur = conn.execute(statement.replace("?", "%s"), args)
            return cur.fetchall() if cur.description else []

    def verify(self, *extra: str) -> tuple[int, str]:
        out = audit_cli(self.backend.state_dir, self.dsn, "--verify", *extra)
        assert out.returncode in (0, 1), out.stderr
        return out.returncode, out.stdout.strip()

    def checkpoint(self) -> str:
        out = audit_cli(self.backend.state_dir, self.dsn, "--checkpoint")
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()


@pytest.fixture
def log(backend: SharedState, backend_dsn: str | None) -> Iterator[Log]:
    a = Auditor(open_audit(backend, clock=time.time), instance="host-a:1")
    b = Auditor(open_audit(backend, clock=time.time), instance="host-b:2")
    with a.record(Entry("ada", "create", "notes_create", "notes", "a.md")) as t:
        t.done(etag_after="a" * 64)
    with b.record(Entry("bob", "update", "notes_update", "notes", "b.md", "b" * 64)) as t:
        t.etag_before = "c" * 64  # learnt during the mutation: the outcome's own column
        t.done(etag_after="d" * 64)
    with a.record(Entry("ada", "move", "notes_move", "notes", "a.md")) as t:
        t.done(etag_after="a" * 64, path_after="old/a.md")
    with pytest.raises(ValueError), b.record(Entry("eve", "delete", "notes_delete", "n", "x")):
        raise ValueError("refused")
    a.begin(Entry("ada", "grant", "fsnotes grant", "/srv/team", detail="write"))
    yield Log(backend, backend_dsn)


def test_an_untouched_log_verifies_and_its_checkpoint_matches(log: Log) -> None:
    mark = log.checkpoint()
    assert mark.startswith("fsnotes-audit-checkpoint/1 position=9 hash=")
    intact = f"audit chain intact: {ROWS} row(s), {POSITIONS} chain position(s)"
    assert log.verify() == (0, intact)
    status, said = log.verify("--against", mark)
    assert status == 0 and said.endswith("checkpoint at position 9 matches")
    # The table shows the outcome's etag before (learnt during the mutation).
    rows = audit_cli(log.backend.state_dir, log.dsn, "--json").stdout.splitlines()
    assert '"etag_before": "' + "c" * 64 in rows[1]


def test_an_edited_intent_is_named_by_its_row(log: Log) -> None:
    log.sql("UPDATE audit SET principal = 'mallory' WHERE id = 2")
    broken = (
        "audit chain BROKEN: row 2 (intent, chain position 3) does not match its hash: "
        "edited, or moved from another place in the log"
    )
    assert log.verify() == (1, broken)


def test_an_edited_outcome_is_named_by_its_row(log: Log) -> None:
    log.sql("UPDATE audit SET outcome = 'done', out_detail = NULL WHERE id = 4")
    status, said = log.verify()
    assert status == 1 and "row 4 (outcome, chain position 8) does not match" in said


def test_an_outcome_forged_on_a_pending_row_is_found(log: Log) -> None:
    log.sql("UPDATE audit SET outcome = 'done' WHERE id = 5")
    status, said = log.verify()
    assert status == 1 and "row 5: its outcome 'done' has no chain position" in said


def test_a_deleted_row_is_found_where_it_was(log: Log) -> None:
    log.sql("DELETE FROM audit WHERE id = 2")
    status, said = log.verify()
    assert status == 1 and "chain position 3 is missing (found 5, the intent of row 3)" in said


def test_two_rows_that_exchanged_places_are_found(log: Log) -> None:
    # Rows 2 and 3 swap their chain positions (and hashes), as if 3 had come first.
    (s2, h2, o2, p2), (s3, h3, o3, p3) = log.sql(
        "SELECT seq, hash, out_seq, out_hash FROM audit WHERE id IN (2, 3) ORDER BY id"
    )
    log.sql("UPDATE audit SET seq = ?, hash = ?, out_seq = ?, out_hash = ? WHERE id = 2",
            s3, h3, o3, p3)  # fmt: skip
    log.sql("UPDATE audit SET seq = ?, hash = ?, out_seq = ?, out_hash = ? WHERE id = 3",
            s2, h2, o2, p2)  # fmt: skip
    status, said = log.verify()
    assert status == 1 and "row 3 (intent, chain position 3) does not match" in said


def test_a_cut_tail_is_found_and_with_the_head_rewritten_only_against_a_checkpoint(
    log: Log,
) -> None:
    mark = log.checkpoint()
    log.sql("DELETE FROM audit WHERE id >= 4")
    status, said = log.verify()
    assert status == 1 and "ends at chain position 6 but its head is at 9" in said
    # An intruder who also rewrites the head: consistent again, only the checkpoint tells.
    (last,) = log.sql("SELECT out_hash FROM audit WHERE id = 3")
    log.sql("UPDATE audit_head SET seq = 6, hash = ?", last[0])
    assert log.verify()[0] == 0
    status, said = log.verify("--against", mark)
    assert status == 1 and "the checkpoint names chain position 9, the log ends at 6" in said


def test_a_chain_rewritten_whole_passes_alone_and_fails_against_a_checkpoint(log: Log) -> None:
    mark = log.checkpoint()
    # Who holds the database can recompute every hash after an edit (no secret is needed).
    log.sql("UPDATE audit SET principal = 'mallory' WHERE id = 2")
    rows = open_audit(log.backend, clock=time.time, create=False).chain_rows()
    events = sorted(
        [(r.seq, "intent", r) for r in rows]
        + [(r.out_seq, "outcome", r) for r in rows if r.out_seq],
        key=lambda e: e[0] or 0,
    )  # fmt: skip
    previous = "0" * 64
    for position, kind, r in events:
        assert position is not None
        fields = intent_fields(r) if kind == "intent" else outcome_fields(r)
        previous = link(previous, position, fields)
        column = "hash" if kind == "intent" else "out_hash"
        log.sql(f"UPDATE audit SET {column} = ? WHERE id = ?", previous, r.id)
    log.sql("UPDATE audit_head SET hash = ?", previous)
    assert log.verify()[0] == 0  # the limit: a consistent rewrite is a valid chain
    status, said = log.verify("--against", mark)
    assert status == 1 and "chain position 9 (row 5, intent) differs from the checkpoint" in said


def test_bad_checkpoints_are_refused_with_the_reason(log: Log) -> None:
    out = audit_cli(log.backend.state_dir, log.dsn, "--verify", "--against", "position=9")
    assert out.returncode == 2 and "--against: not a checkpoint" in out.stderr
    out = audit_cli(log.backend.state_dir, log.dsn, "--against", log.checkpoint())
    assert out.returncode == 2 and "--against goes with --verify" in out.stderr


def test_instances_appending_at_once_make_one_unbroken_chain(
    log: Log, backend_dsn: str | None
) -> None:
    """Four writers, each with its own store connection (as separate instances have),
    appending at the same moment: no position is lost or taken twice."""
    writers, each = 4, 15
    barrier = threading.Barrier(writers)
    failures: list[BaseException] = []

    def write(i: int) -> None:
        shared = SharedState.open(log.backend.state_dir, backend_dsn)
        try:
            auditor = Auditor(open_audit(shared, clock=time.time), instance=f"w{i}")
            barrier.wait()
            for n in range(each):
                with auditor.record(Entry(f"p{i}", "create", "notes_create", "w", f"{n}.md")):
                    pass
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            shared.close()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert failures == []
    total = ROWS + writers * each
    positions = POSITIONS + 2 * writers * each
    assert log.verify() == (0, f"audit chain intact: {total} row(s), {positions} chain position(s)")
