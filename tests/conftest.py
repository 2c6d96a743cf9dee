"""Shared test setup: the tests directory is importable, so helper modules such as
``e2e.wire`` (a raw stdio JSON-RPC client) serve every test package."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
