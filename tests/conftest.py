"""Shared test setup.

The tests directory is importable, so helper modules such as ``e2e.wire`` (a raw stdio
JSON-RPC client) serve every test package; ``resolver`` runs a test on both layer-2
resolution paths through the switch that forces the fallback (``FSNOTES_RESOLVER``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every Root opened in (or spawned by) the test uses this resolution path."""
    monkeypatch.setenv("FSNOTES_RESOLVER", request.param)
    return str(request.param)
