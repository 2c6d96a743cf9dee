"""Shared test setup.

The tests directory is importable, so helper modules such as ``e2e.wire`` (a raw stdio
JSON-RPC client) serve every test package; ``resolver`` runs a test on both layer-2
resolution paths through the switch that forces the fallback (``FSNOTES_RESOLVER``).
``pg_cluster``, ``pg_dsn`` and ``backend`` give the shared-state tests a real PostgreSQL (or
the SQLite default).
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
# With tests/ on sys.path, tests/sandbox/ (the sandbox package's tests, no __init__.py) is a
# namespace-package candidate named "sandbox". An editable install finds the real package
# only through a finder consulted after sys.path, so without the checkout itself on sys.path
# (``.venv/bin/pytest``, or pytest started elsewhere) "sandbox" would be that test folder.
# A regular package anywhere on sys.path wins over a namespace candidate: the checkout's.
_CHECKOUT = str(Path(__file__).resolve().parent.parent)
if _CHECKOUT not in sys.path:
    sys.path.append(_CHECKOUT)

# Test modules that start a service from outside Python's dev install, and which one (the
# `service` marker: `make check` deselects them, `make test` runs them). Tests that take a
# PostgreSQL fixture are marked by the fixture instead (see pytest_collection_modifyitems).
SERVICE_MODULES = {
    "test_balanced_wire": "HAProxy and PostgreSQL",
    "test_conformance": "node peers (the conformance suite)",
    "test_host_oauth_sdk": "node peers (oidc-provider)",
    "test_http_oauth": "node peers (oidc-provider)",
    "test_inspector": "node peers (the Inspector)",
    "test_interop_http_typescript": "node peers (the TypeScript SDK)",
    "test_interop_typescript": "node peers (the TypeScript SDK)",
    "test_mcpb_bundle": "node peers (the mcpb CLI and library)",
    "test_page_screenshot": "chromium",
}
_PG_FIXTURES = {"pg_cluster", "pg_dsn"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "service: needs a service beyond the Python dev install (PostgreSQL, HAProxy, node "
        "peers, chromium); `make check` deselects these, `make test` runs them",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        params = getattr(getattr(item, "callspec", None), "params", {})
        needs_pg = bool(_PG_FIXTURES & set(getattr(item, "fixturenames", ())))
        if module in SERVICE_MODULES or needs_pg or params.get("backend_dsn") == "postgres":
            item.add_marker(pytest.mark.service)


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every Root opened in (or spawned by) the test uses this resolution path."""
    monkeypatch.setenv("FSNOTES_RESOLVER", request.param)
    return str(request.param)


# --- PostgreSQL (the shared store of several instances) ------------------------------------


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """A real PostgreSQL 15 from Debian for the whole session, on a free loopback port
    (tests/pgcluster.py), stopped by process id at the end. Skipped loudly, with the reason
    and the fix, where PostgreSQL or the driver is missing."""
    import pgcluster

    why = pgcluster.missing()
    if why is not None:
        pytest.skip(f"SKIPPED: {why}")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        pytest.skip(
            f"SKIPPED: the PostgreSQL driver is missing ({exc.name}); pip install -e '.[dev]'"
        )
    with pgcluster.running() as cluster:
        yield cluster


@pytest.fixture
def pg_dsn(pg_cluster: Any) -> Iterator[str]:
    """The DSN of a fresh, empty database in the session's cluster (dropped afterwards,
    whoever is still connected to it)."""
    dsn = str(pg_cluster.new_database())
    yield dsn
    pg_cluster.drop_database(dsn)


@pytest.fixture(params=["sqlite", "postgres"])
def backend_dsn(request: pytest.FixtureRequest) -> str | None:
    """The shared-state backend under test, as configured: None (the state directory's
    SQLite files) or the DSN of a fresh PostgreSQL database."""
    return str(request.getfixturevalue("pg_dsn")) if request.param == "postgres" else None


@pytest.fixture
def backend(backend_dsn: str | None, tmp_path: Path) -> Iterator[Any]:
    """That backend opened (fsnotes.state.shared.SharedState). Contract tests take this
    and must pass on both."""
    from fsnotes.state.shared import SharedState

    state_dir = tmp_path / "state-dir"
    state_dir.mkdir(mode=0o700)
    shared = SharedState.open(state_dir, backend_dsn)
    yield shared
    shared.close()


# --- many open descriptors ----------------------------------------------------------------

# Descriptors held open so the connection's socket gets a number past select()'s FD_SETSIZE.
FILLER = 1100


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    """This process holds FILLER more descriptors while the test runs, so the next it opens
    are numbered past 1023 (select()'s limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = FILLER + 256
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"SKIPPED: RLIMIT_NOFILE hard limit {hard} is below {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(FILLER)]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
