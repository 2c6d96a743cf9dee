"""Shared helpers for interop tests: how to spawn the test server as a real process."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO_SERVER = REPO / "tests" / "servers" / "demo_server.py"


def server_command() -> list[str]:
    """The demo server run by path with this interpreter (the package is installed in it)."""
    return [sys.executable, str(DEMO_SERVER)]
