"""The real demo server driven by the TypeScript SDK v2 client (@modelcontextprotocol/client 2.4.0)
in versionNegotiation legacy, auto and pin modes, through tests/peers/ts_client_driver.mjs."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from tests.interop.interop_support import REPO, server_command

PEERS = REPO / "tests" / "peers"
DRIVER = PEERS / "ts_client_driver.mjs"
CLIENT_PACKAGE = PEERS / "node_modules" / "@modelcontextprotocol" / "client" / "package.json"

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

NODE = shutil.which("node")
if NODE is None:
    pytest.skip(
        "node is not installed: TypeScript SDK interop tests skipped", allow_module_level=True
    )
if not CLIENT_PACKAGE.exists():
    pytest.skip(
        "@modelcontextprotocol/client is not installed: run `make peers`",
        allow_module_level=True,
    )


def drive(mode: str) -> list[dict[str, Any]]:
    assert NODE is not None
    proc = subprocess.run(
        [NODE, str(DRIVER), mode, *server_command()],
        cwd=PEERS,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def calls(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        if "call" in e:
            key = e["call"] if e["call"] not in out else e["call"] + "#2"
            out[key] = e
    return out


@pytest.mark.parametrize(
    ("mode", "era", "version", "url_id"),
    [
        ("legacy", "legacy", "2025-11-25", "demo-1"),
        ("auto", "modern", "2026-07-28", None),
        ("pin", "modern", "2026-07-28", None),
    ],
)
def test_typescript_client_negotiates_and_round_trips_elicitation(
    mode: str, era: str, version: str, url_id: str | None
) -> None:
    events = drive(mode)
    assert events[0]["era"] == era and events[0]["version"] == version
    assert events[0]["server"]["name"] == "fsnotes-demo"
    assert events[1]["tools"][:3] == ["echo", "add", "confirm"]
    by = calls(events)
    assert by["echo"]["structured"] == {"text": "ts"} and by["echo"]["isError"] is False
    assert by["confirm"]["structured"] == {"deleted": True}
    assert by["visit"]["text"] == "url accept"
    assert by["add"]["structured"] == {"sum": 3}
    assert by["add#2"]["isError"] is True and "- a:" in by["add#2"]["text"]
    elicits = [e["elicit"] for e in events if "elicit" in e]
    assert [e["mode"] for e in elicits] == ["form", "url"]
    assert elicits[1]["elicitationId"] == url_id
    assert events[-1] == {"done": True}
