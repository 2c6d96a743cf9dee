"""`fsnotes serve --http` under Landlock: the endpoint serves (its socket was bound before the
jail), while the served process can connect to no TCP port and bind no other (the setup page's
excepted). A probe tool inside the real server (tests/servers/http_probe.py) tries; the same
probe with --no-landlock succeeds, which is how the test knows it can fail."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.jail import landlock_abi
from tests.transport.http_support import REPO, HttpServer, Raw, add_token, make_workspace

ABI = landlock_abi()
pytestmark = [
    pytest.mark.skipif(ABI is None or ABI < 4, reason="TCP rules need Landlock ABI 4"),
    pytest.mark.timeout(90),
]
PROBE = REPO / "tests" / "servers" / "http_probe.py"


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


def _probe(tmp_path: Path, port: int, *extra: str, bind_port: int | None = None) -> Any:
    workspace, state = make_workspace(tmp_path), tmp_path / "state"
    token = add_token(state, "ada")
    argv = [
        sys.executable,
        str(PROBE),
        "serve",
        "--workspace",
        str(workspace),
        "--state-dir",
        str(state),
        "--principal",
        "ada",
        "--http",
        "127.0.0.1:0",
        *extra,
    ]
    with HttpServer(argv) as server:
        raw = Raw(server, token)
        try:
            args: dict[str, Any] = {"connectPort": port}
            if bind_port is not None:
                args["bindPort"] = bind_port
            answer = raw.call("tools/call", {"name": "net_probe", "arguments": args})
            read = raw.call("tools/call", {"name": "notes_read", "arguments": {
                "uri": (workspace / "plan.md").as_uri()}})  # fmt: skip
        finally:
            raw.close()
        log = server.stderr()
    assert read["result"]["structuredContent"]["title"] == "Plan"  # it serves notes all along
    return answer["result"]["structuredContent"], log  # fmt: skip


def test_jailed_http_server_can_neither_connect_nor_bind(tmp_path: Path, listener: int) -> None:
    probe, log = _probe(tmp_path, listener)
    assert "Landlock ABI" in log and "applied" in log
    assert probe == {"connect": "EACCES", "bind_any": "EACCES"}


def test_without_the_jail_the_same_probe_connects_and_binds(tmp_path: Path, listener: int) -> None:
    probe, _log = _probe(tmp_path, listener, "--no-landlock")
    assert probe == {"connect": "ok", "bind_any": "ok"}


def test_the_setup_pages_port_stays_bindable_and_no_other(tmp_path: Path, listener: int) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        page_port = s.getsockname()[1]
    allow = tmp_path / "shared"
    allow.mkdir()
    probe, log = _probe(
        tmp_path, listener, "--setup-allow", str(allow), "--setup-port", str(page_port)
    )
    assert f"setup page listening on http://127.0.0.1:{page_port}" in log
    assert probe["connect"] == "EACCES" and probe["bind_any"] == "EACCES"
