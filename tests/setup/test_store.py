"""The setup store: decisions are atomic, limited and shared by processes. The tests taking
``store`` run on both backends (the state directory's SQLite file and a real PostgreSQL);
those about SQLite's own locks and files use the file directly."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from fsnotes.security.grants import Access
from fsnotes.setup import store as st
from fsnotes.setup.store import SetupStatus, SetupStore, TooManyPending, Verdict
from fsnotes.state.shared import SharedState
from tests.e2e.state_helpers import corrupt, held, in_fresh_thread


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(backend: SharedState, clock: Clock) -> SetupStore:
    return st.open_setup_store(backend, clock=clock, audit=None)


def yes() -> bool:
    return True


def no() -> bool:
    return False


def submit(
    store: SetupStore,
    sid: str,
    token: str,
    *,
    code: bool = True,
    approve: bool = True,
    grantable: bool = True,
) -> st.SubmitResult:
    return store.submit(
        sid,
        token,
        approve=approve,
        code_ok=yes if code else no,
        grantable=lambda s: grantable,
    )


def test_database_is_private_and_a_retried_start_reuses_the_pending_setup(
    store: SetupStore, backend: SharedState
) -> None:
    if backend.postgres is None:
        assert stat.S_IMODE(os.stat(backend.state_dir / st.DB_NAME).st_mode) == 0o600
    a = store.start("ada", "/n/a", Access.WRITE, lifetime=60)
    again = store.start("ada", "/n/a", Access.WRITE, lifetime=60)
    other = store.start("ada", "/n/a", Access.READ, lifetime=60)
    assert again.id == a.id and other.id != a.id
    assert a.status is SetupStatus.PENDING and len(a.id) >= 24
    assert store.pending_count() == 2


def test_approval_stores_the_grant_and_bumps_the_generation_once(store: SetupStore) -> None:
    setup = store.start("ada", "/n/a", Access.WRITE, lifetime=60)
    token = store.issue_form_token(setup.id)
    assert token is not None
    gen = store.generation()
    result = submit(store, setup.id, token)
    assert result.verdict is Verdict.APPROVED and result.setup is not None
    assert result.setup.status is SetupStatus.APPROVED
    [grant] = store.grants("ada")
    assert (grant.path, grant.access, grant.source) == ("/n/a", Access.WRITE, "page")
    assert store.generation() == gen + 1
    # The form was used: the same token again changes nothing.
    assert submit(store, setup.id, token).verdict is Verdict.NOT_PENDING
    assert store.generation() == gen + 1


def test_a_form_token_works_once_and_only_for_its_setup(store: SetupStore) -> None:
    a = store.start("ada", "/n/a", Access.READ, lifetime=60)
    b = store.start("ada", "/n/b", Access.READ, lifetime=60)
    token = store.issue_form_token(a.id)
    assert token is not None
    assert submit(store, b.id, token).verdict is Verdict.BAD_FORM
    assert submit(store, a.id, "forged").verdict is Verdict.BAD_FORM
    assert submit(store, a.id, token, code=False).verdict is Verdict.WRONG_CODE
    assert submit(store, a.id, token).verdict is Verdict.BAD_FORM  # consumed by the wrong code
    assert store.grants() == []


def test_wrong_codes_lock_the_setup_after_the_limit(store: SetupStore) -> None:
    setup = store.start("ada", "/n/a", Access.READ, lifetime=60)
    for i in range(st.MAX_CODE_ATTEMPTS):
        token = store.issue_form_token(setup.id)
        assert token is not None
        result = submit(store, setup.id, token, code=False)
        expected = Verdict.LOCKED if i == st.MAX_CODE_ATTEMPTS - 1 else Verdict.WRONG_CODE
        assert result.verdict is expected
        assert result.setup is not None and result.setup.attempts == i + 1
    assert store.issue_form_token(setup.id) is None
    locked = store.get(setup.id)
    assert locked is not None and locked.status is SetupStatus.LOCKED and locked.attempts_left == 0
    assert store.grants() == []


def test_wrong_codes_are_limited_across_setups(
    store: SetupStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(st, "MAX_PENDING_PER_PRINCIPAL", 100)
    failures = 0
    n = 0
    while failures < st.GLOBAL_FAILURES_MAX:
        setup = store.start(f"p{n}", "/n/a", Access.READ, lifetime=600)
        n += 1
        for _ in range(st.MAX_CODE_ATTEMPTS - 1):
            if failures == st.GLOBAL_FAILURES_MAX:
                break
            token = store.issue_form_token(setup.id)
            assert token is not None
            assert submit(store, setup.id, token, code=False).verdict is Verdict.WRONG_CODE
            failures += 1
    fresh = store.start("late", "/n/a", Access.READ, lifetime=600)
    token = store.issue_form_token(fresh.id)
    assert token is not None
    # Even the right code is refused now: guessing across setups is capped.
    assert submit(store, fresh.id, token).verdict is Verdict.RATE_LIMITED
    assert store.grants() == []
    clock.now += st.GLOBAL_FAILURES_WINDOW_S + 1
    fresh = store.start("later", "/n/a", Access.READ, lifetime=60)
    token = store.issue_form_token(fresh.id)
    assert token is not None
    assert submit(store, fresh.id, token).verdict is Verdict.APPROVED


def test_deny_needs_no_code_and_stores_nothing(store: SetupStore) -> None:
    setup = store.start("ada", "/n/a", Access.READ, lifetime=60)
    token = store.issue_form_token(setup.id)
    assert token is not None
    result = store.submit(setup.id, token, approve=False, code_ok=no, grantable=lambda s: True)
    assert result.verdict is Verdict.DENIED
    assert result.setup is not None and result.setup.status is SetupStatus.DENIED
    assert store.grants() == [] and store.issue_form_token(setup.id) is None


def test_expiry_cancel_and_not_grantable_store_nothing(store: SetupStore, clock: Clock) -> None:
    a = store.start("ada", "/n/a", Access.READ, lifetime=60)
    token = store.issue_form_token(a.id)
    assert token is not None
    clock.now += 61
    assert submit(store, a.id, token).verdict is Verdict.NOT_PENDING
    got = store.get(a.id)
    assert got is not None and got.status is SetupStatus.EXPIRED
    b = store.start("ada", "/n/b", Access.READ, lifetime=60)
    assert store.cancel(b.id, "somebody-else") is not None
    assert store.get(b.id).status is SetupStatus.PENDING  # type: ignore[union-attr]
    cancelled = store.cancel(b.id, "ada")
    assert cancelled is not None and cancelled.status is SetupStatus.CANCELLED
    c = store.start("ada", "/n/c", Access.READ, lifetime=60)
    token = store.issue_form_token(c.id)
    assert token is not None
    assert submit(store, c.id, token, grantable=False).verdict is Verdict.NOT_GRANTABLE
    assert store.grants() == [] and store.get("no-such-id") is None


def test_pending_setups_per_principal_are_bounded(store: SetupStore) -> None:
    for i in range(st.MAX_PENDING_PER_PRINCIPAL):
        store.start("ada", f"/n/{i}", Access.READ, lifetime=60)
    with pytest.raises(TooManyPending):
        store.start("ada", "/n/more", Access.READ, lifetime=60)
    store.start("bob", "/n/more", Access.READ, lifetime=60)  # others are not affected


def test_cli_grant_sets_exactly_approves_what_it_satisfies_and_revokes(store: SetupStore) -> None:
    pending = store.start("ada", "/n/a", Access.WRITE, lifetime=60)
    store.grant("ada", "/n/a", Access.READ)
    assert store.get(pending.id).status is SetupStatus.PENDING  # type: ignore[union-attr]
    store.grant("ada", "/n/a", Access.DELETE)
    assert store.get(pending.id).status is SetupStatus.APPROVED  # type: ignore[union-attr]
    store.grant("ada", "/n/a", Access.READ)  # an operator may lower it
    assert [g.access for g in store.grants("ada")] == [Access.READ]
    gen = store.generation()
    assert store.revoke("ada", "/n/a") and not store.revoke("ada", "/n/a")
    assert store.grants() == [] and store.generation() == gen + 1


def _approve_in_child(
    state_dir: str, dsn: str | None, setup_id: str, token: str, out: multiprocessing.Queue[str]
) -> None:
    import time

    shared = SharedState.open(Path(state_dir), dsn)
    child = st.open_setup_store(shared, clock=time.time, audit=None)
    result = child.submit(setup_id, token, approve=True, code_ok=yes, grantable=lambda s: True)
    out.put(result.verdict.value)
    shared.close()


def test_two_processes_race_one_form_and_exactly_one_wins(
    backend: SharedState, backend_dsn: str | None
) -> None:
    import time

    store = st.open_setup_store(backend, clock=time.time, audit=None)
    setup = store.start("ada", "/n/a", Access.READ, lifetime=60)
    token = store.issue_form_token(setup.id)
    assert token is not None
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[str] = ctx.Queue()
    procs = [
        ctx.Process(
            target=_approve_in_child,
            args=(str(backend.state_dir), backend_dsn, setup.id, token, out),
        )
        for _ in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    verdicts = sorted(out.get(timeout=5) for _ in procs)
    assert verdicts.count("approved") == 1, verdicts
    assert len(store.grants()) == 1
    shared = SharedState.open(backend.state_dir, backend_dsn)
    try:
        other = st.open_setup_store(shared, clock=time.time, audit=None)
        assert other.generation() == store.generation() >= 1
    finally:
        shared.close()


def test_a_fresh_threads_first_write_is_busy_while_another_process_holds_the_write_lock(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(st, "LOCK_TIMEOUT_S", 0.2)
    store = SetupStore(tmp_path, clock=clock)
    with held(tmp_path / st.DB_NAME, "immediate"):
        for call in (
            lambda: store.start("ada", "/n/a", Access.READ, lifetime=60),
            lambda: store.grant("ada", "/n/a", Access.READ),
        ):
            exc = in_fresh_thread(call)
            assert isinstance(exc, st.SetupStoreBusy), exc
            assert "busy" in str(exc) and "try again" in str(exc)
        # WAL readers are not blocked by a writer.
        assert in_fresh_thread(store.grants) is None
    assert store.grants() == [] and store.pending_count() == 0


def test_a_fresh_threads_first_call_on_a_corrupted_database_is_a_store_error_not_sqlite(
    tmp_path: Path, clock: Clock
) -> None:
    store = SetupStore(tmp_path, clock=clock)
    corrupt(tmp_path / st.DB_NAME)
    for call in (
        lambda: store.start("ada", "/n/a", Access.READ, lifetime=60),
        lambda: store.get("some-id"),
        store.pending_count,
        store.grants,
        store.generation,
        lambda: store.revoke("ada", "/n/a"),
    ):
        exc = in_fresh_thread(call)
        assert isinstance(exc, st.SetupStoreBusy), exc
        assert "cannot be used" in str(exc)
