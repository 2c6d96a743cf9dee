"""PostgreSQL down or restarting under the shared stores: clear retryable errors, nothing done
twice, and service resuming by itself. A cluster of its own (tests/pgcluster.py), stopped
and started again by process id while the stores are in use."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fsnotes.app.config import load
from fsnotes.security.grants import Access
from fsnotes.setup.store import SetupStoreBusy, open_setup_store
from fsnotes.state.audit import Auditor, AuditUnavailable, Entry, open_audit
from fsnotes.state.replay import ClaimNotRecorded, StoreBusy, open_replay
from fsnotes.state.shared import SharedState

# The pool waits POOL_WAIT_S for a connection; a failure must come within about that.
FAIL_WITHIN_S = 12.0
# After a restart, the pool's reconnection round (backing off 1, 2, 4 s) finds the server.
RESUME_WITHIN_S = 30.0


@pytest.fixture
def cluster(pg_cluster: Any) -> Iterator[Any]:
    """A cluster this test may stop and start (not the session's shared one)."""
    import pgcluster

    with pgcluster.running() as own:
        yield own


@pytest.fixture
def shared(cluster: Any, tmp_path: Path) -> Iterator[SharedState]:
    state = SharedState.open(tmp_path, cluster.new_database())
    yield state
    state.close()


def _eventually(call: Any) -> float:
    """Retry ``call`` until it stops raising a retryable store error; seconds it took."""
    start = time.monotonic()
    while True:
        try:
            call()
            return time.monotonic() - start
        except (StoreBusy, AuditUnavailable, SetupStoreBusy) as exc:
            assert "try again" in str(exc), exc
            if time.monotonic() - start > RESUME_WITHIN_S:
                raise
            time.sleep(0.2)


def test_a_stopped_server_is_a_retryable_error_and_a_restart_resumes(
    cluster: Any, shared: SharedState
) -> None:
    from pgcluster import PASSWORD

    replay = open_replay(shared, clock=time.time)
    audit = Auditor(open_audit(shared, clock=time.time), instance="i")
    setup = open_setup_store(shared, clock=time.time, audit=audit)
    with replay.claim("before", time.time() + 60):
        pass
    cluster.stop()

    ran = []
    started = time.monotonic()
    with pytest.raises(StoreBusy) as busy, replay.claim("during", time.time() + 60):
        ran.append(True)
    assert time.monotonic() - started < FAIL_WITHIN_S
    assert ran == []  # the guarded action never ran
    with pytest.raises(AuditUnavailable) as no_audit:
        audit.begin(Entry("ada", "create", "notes_create", "notes", "a.md"))
    with pytest.raises(SetupStoreBusy) as no_setup:
        setup.start("ada", "/n/a", Access.READ, lifetime=60)
    for exc in (busy.value, no_audit.value, no_setup.value):
        text = str(exc)
        assert "unreachable" in text and "try again" in text, text
        assert PASSWORD not in text and "postgresql://" not in text

    cluster.start()

    def claim_during() -> None:
        with replay.claim("during", time.time() + 60):
            pass

    waited = _eventually(claim_during)
    assert waited < RESUME_WITHIN_S
    assert replay.is_used("during") and replay.is_used("before")
    _eventually(lambda: setup.start("ada", "/n/a", Access.READ, lifetime=60))
    with audit.record(Entry("ada", "create", "notes_create", "notes", "b.md")):
        pass
    assert [r.path for r in audit.log.read()] == ["b.md"]


def test_a_server_stopped_inside_the_critical_section_is_not_reported_as_nothing_done(
    cluster: Any, shared: SharedState
) -> None:
    replay = open_replay(shared, clock=time.time)
    with pytest.raises(ClaimNotRecorded), replay.claim("mid", time.time() + 60):
        cluster.stop()  # the action "ran"; the commit cannot reach the server
    cluster.start()
    # The claim was never committed (its transaction died with the server): the flow's
    # identity check is what keeps a replay from doing anything (tests/notes).
    _eventually(lambda: replay.is_used("mid"))
    assert not replay.is_used("mid")


def test_a_bad_or_unreachable_database_stops_start_up_with_one_line_and_no_password(
    tmp_path: Path, cluster: Any
) -> None:
    from pgcluster import PASSWORD

    from fsnotes.app.config import ConfigError
    from fsnotes.app.server import build

    (tmp_path / "notes").mkdir()
    for dsn in (
        f"postgresql://postgres:{PASSWORD}@127.0.0.1:{cluster.port}/no_such_database",
        f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/postgres",
        f"postgresql://postgres:{PASSWORD}@127.0.0.1:{cluster.port}/postgres?sslmode=bogus",
    ):
        cfg = load(
            workspaces=[str(tmp_path / "notes")],
            state_dir=str(tmp_path / "state"),
            env={"FSNOTES_DATABASE": dsn},
        )
        assert PASSWORD not in repr(cfg)
        with pytest.raises(ConfigError) as err:
            build(cfg)
        text = str(err.value)
        assert "cannot open the replay database" in text, text
        assert PASSWORD not in text and dsn not in text, text
        assert f"postgresql://postgres@127.0.0.1:{cluster.port}" in text or ":1/" in text
