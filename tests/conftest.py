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
# With tests/ on sys.path, tests/sandbox/ (the sandbox package's tests, no __init__.py) is a
# namespace-package candidate named "sandbox". An editable install finds the real package
# only through a finder consulted after sys.path, so without the checkout itself on sys.path
# (``.venv/bin/pytest``, or pytest started elsewhere) "sandbox" would be that test folder.
# A regular package anywhere on sys.path wins over a namespace candidate: the checkout's.
_CHECKOUT = str(Path(__file__).resolve().parent.parent)
if _CHECKOUT not in sys.path:
    sys.path.append(_CHECKOUT)


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every Root opened in (or spawned by) the test uses this resolution path."""
    monkeypatch.setenv("FSNOTES_RESOLVER", request.param)
    return str(request.param)
