"""`fsnotes audit` as an operator runs it: the real command on both backends, its filters
(--since as a duration or a time, --principal) and its two outputs (a table, JSON lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from fsnotes.state.audit import Auditor, Entry, open_audit
from fsnotes.state.shared import SharedState

RLO = "\u202e"


def audit_cli(state_dir: Path, dsn: str | None, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSNOTES_")}
    if dsn is not None:
        env["FSNOTES_DATABASE"] = dsn
    return subprocess.run(
        [sys.executable, "-m", "fsnotes", "audit", "--state-dir", str(state_dir), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def seed(backend: SharedState, now: float) -> None:
    """Four rows: ada 3 h ago, bob 2 h ago, ada 30 min ago (a move), carol now (a failure)."""
    at = [now - 3 * 3600, now - 2 * 3600, now - 1800, now]
    clock_values = iter(v for t in at for v in (t, t + 0.5))  # intent, then outcome
    audit = Auditor(open_audit(backend, clock=lambda: next(clock_values)), instance="host:1")
    with audit.record(Entry("ada", "create", "notes_create", "notes", "a.md")) as t:
        t.done(etag_after="a" * 64)
    with audit.record(Entry("bob", "create", "notes_create", "notes", f"b{RLO}dm.txt")) as t:
        t.done(etag_after="b" * 64)
    with audit.record(
        Entry("ada", "move", "notes_move", "notes", "a.md", etag_before="a" * 64)
    ) as t:
        t.done(etag_after="a" * 64, path_after="archive/a.md")
    try:
        with audit.record(Entry("carol", "update", "notes_update", "notes", "c.md")):
            raise ValueError("etag conflict")
    except ValueError:
        pass


def test_audit_filters_by_time_and_principal_in_both_outputs(
    backend: SharedState, backend_dsn: str | None
) -> None:
    now = time.time()
    seed(backend, now)
    state = backend.state_dir

    def rows(*argv: str) -> list[tuple[str, str]]:
        out = audit_cli(state, backend_dsn, "--json", *argv)
        assert out.returncode == 0, out.stderr
        return [(r["principal"], r["action"]) for r in map(json.loads, out.stdout.splitlines())]

    everything = [("ada", "create"), ("bob", "create"), ("ada", "move"), ("carol", "update")]
    assert rows() == everything
    assert rows("--since", "1h") == [("ada", "move"), ("carol", "update")]
    assert rows("--since", "150m") == [("bob", "create"), ("ada", "move"), ("carol", "update")]
    assert rows("--principal", "ada") == [("ada", "create"), ("ada", "move")]
    assert rows("--principal", "ada", "--since", "1h") == [("ada", "move")]
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 2 * 3600 - 60))
    assert rows("--since", iso) == everything[1:]
    assert rows("--principal", "nobody") == []

    table = audit_cli(state, backend_dsn)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("time (UTC)") and len(lines) == 5
    assert "a.md -> archive/a.md" in lines[3] and "aaaaaaaaaaaa -> aaaaaaaaaaaa" in lines[3]
    assert "failed [ValueError: etag conflict]" in lines[4]
    # A name that draws as another cannot fool the investigator: it is shown escaped.
    assert RLO not in table.stdout and "b\\u202edm.txt" in table.stdout
    empty = audit_cli(state, backend_dsn, "--principal", "nobody")
    assert empty.stdout.strip() == "no audit rows in that range"


def test_audit_refuses_a_since_it_cannot_read_and_names_no_password(
    tmp_path: Path, backend_dsn: str | None
) -> None:
    out = audit_cli(tmp_path / "state", backend_dsn, "--since", "last tuesday")
    assert out.returncode == 2 and "--since 'last tuesday'" in out.stderr, out.stderr
    if backend_dsn is not None:
        from pgcluster import PASSWORD

        wrong = backend_dsn.rsplit("/", 1)[0] + "/no_such_db"
        out = audit_cli(tmp_path / "state", wrong)
        assert out.returncode == 2 and "cannot read the audit log" in out.stderr, out.stderr
        assert PASSWORD not in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_audit_is_read_only_it_creates_no_directory_file_or_table(
    tmp_path: Path, backend_dsn: str | None
) -> None:
    """A read-only command creates nothing: no default state directory when the log is in
    PostgreSQL, no state directory or audit file when the one named does not exist, and no
    table in a database that has none yet (there are no rows to show)."""
    xdg = tmp_path / "xdg"  # where the default state directory would be made
    env = {k: v for k, v in os.environ.items() if not k.startswith("FSNOTES_")}
    env["XDG_STATE_HOME"] = str(xdg)
    argv = [sys.executable, "-m", "fsnotes", "audit"]
    if backend_dsn is not None:
        env["FSNOTES_DATABASE"] = backend_dsn
    else:
        argv += ["--state-dir", str(tmp_path / "never-made")]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no audit rows"
    assert not xdg.exists() and not (tmp_path / "never-made").exists()
    if backend_dsn is not None:
        import psycopg

        with psycopg.connect(backend_dsn) as conn:
            found = conn.execute("SELECT to_regclass('fsnotes.audit')").fetchone()
        assert found == (None,), "a read created the audit table"
        # With rows there, they are read, and still no directory is made.
        shared = SharedState.open(tmp_path / "writer-state", backend_dsn)
        try:
            seed(shared, time.time())
        finally:
            shared.close()
        out = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == 4
        assert not xdg.exists()
