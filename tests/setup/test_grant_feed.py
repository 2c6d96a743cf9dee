"""Run-time grants on PostgreSQL, kept fresh by the store's change feed (LISTEN/NOTIFY):
another instance's grant or revocation is seen here within moments, a request's scope
queries nothing, and while PostgreSQL is down the last good grants stand and answer at once.
A cluster of its own (tests/pgcluster.py), stopped and started again by process id."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fsnotes.notes.store import WorkspaceStores
from fsnotes.security.grants import Access, Grants, Workspace
from fsnotes.setup.policy import SetupPolicy
from fsnotes.setup.runtime import RuntimeScope
from fsnotes.setup.store import SetupStore, open_setup_store
from fsnotes.state.postgres import FEED_POLL_S, RECONNECT_S
from fsnotes.state.shared import SharedState
from sandbox import uri as lexical
from sandbox.root import Root

# A notification reaches the feed within milliseconds; its reload is two small queries.
SEEN_WITHIN_S = 5.0
# After a restart the feed reconnects (backing off up to RECONNECT_S) and reloads.
RESUMED_WITHIN_S = 2 * RECONNECT_S + 10 * FEED_POLL_S
# A scope made while the store is down reads the last good layer: no wait at all.
AT_ONCE_S = 0.2


@pytest.fixture
def cluster(pg_cluster: Any) -> Iterator[Any]:
    import pgcluster

    with pgcluster.running() as own:
        yield own


def _until(check: Callable[[], bool], within: float) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < within, "not seen in time"
        time.sleep(0.05)
    return time.monotonic() - start


def test_the_feed_keeps_grants_fresh_without_a_query_per_request_and_the_last_good_stands(
    cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b", "conf"):
        (tmp_path / "shared" / name).mkdir(parents=True)
    dsn = cluster.new_database()
    here, there = SharedState.open(tmp_path, dsn), SharedState.open(tmp_path, dsn)
    store = open_setup_store(here, clock=time.time, audit=None)
    other = open_setup_store(there, clock=time.time, audit=None)  # another instance's
    parent = Root.open(str(tmp_path / "shared"))
    conf = Workspace("conf", lexical.path_components(str(tmp_path / "shared" / "conf")))
    scope = RuntimeScope(
        store=store,
        policy=SetupPolicy(allow=(str(tmp_path / "shared"),)),
        parents=[parent],
        configured=[conf],
        stores=WorkspaceStores(),
        extensions=(".md",),
    )
    grants = Grants([conf], [], source=scope)

    asked_here: list[str] = []  # store queries made by the thread that makes the scopes
    me = threading.current_thread()
    for name in ("generation", "grants"):
        real = getattr(SetupStore, name)

        def spy(self: SetupStore, *args: Any, _real: Any = real, _name: str = name) -> Any:
            if threading.current_thread() is me and self is store:
                asked_here.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(SetupStore, name, spy)

    def names() -> set[str]:
        return {ws.name for ws, _ in grants.scope("ada", ceiling=Access.DELETE).granted}

    try:
        scope.sync()
        scope.start_watching()
        asked_here.clear()
        other.grant("ada", str(tmp_path / "shared" / "a"), Access.WRITE)
        _until(lambda: names() == {"a"}, SEEN_WITHIN_S)
        other.revoke("ada", str(tmp_path / "shared" / "a"))
        _until(lambda: names() == set(), SEEN_WITHIN_S)
        other.grant("ada", str(tmp_path / "shared" / "b"), Access.READ)
        _until(lambda: names() == {"b"}, SEEN_WITHIN_S)
        assert asked_here == []  # every scope above was made from the feed's layer

        cluster.stop()
        start = time.monotonic()
        for _ in range(20):
            assert names() == {"b"}  # the last good grants
        assert time.monotonic() - start < AT_ONCE_S
        assert asked_here == []

        cluster.start()

        def granted_after_restart() -> bool:
            try:
                other.grant("ada", str(tmp_path / "shared" / "a"), Access.READ)
            except Exception as exc:  # the other instance's pool is reconnecting too
                assert "try again" in str(exc), exc
                return False
            return True

        _until(granted_after_restart, RESUMED_WITHIN_S)
        _until(lambda: names() == {"a", "b"}, RESUMED_WITHIN_S)
        assert asked_here == []
    finally:
        scope.close()
        parent.close()
        here.close()
        there.close()


def test_a_feed_cannot_start_before_the_jail(cluster: Any, tmp_path: Path) -> None:
    # Unpooled (a server before its jail): the feed is a thread, so it is refused.
    state = SharedState.open(tmp_path, cluster.new_database(), pooled=False)
    try:
        store = SetupStore(
            state.database("setup", timeout=5.0, error=RuntimeError), clock=time.time
        )
        with pytest.raises(RuntimeError, match="once the jail is up"):
            store.watch(lambda: True)
    finally:
        state.close()
