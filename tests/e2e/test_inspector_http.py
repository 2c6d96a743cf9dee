"""The MCP Inspector CLI (v2, from tests/peers) against `fsnotes serve --http`, in each era,
with the bearer token in `--header` (and refused without it)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.test_inspector import INSPECTOR, NODE_DIR
from tests.transport.http_support import HttpServer, add_token, make_workspace, start_fsnotes

pytestmark = [
    pytest.mark.skipif(
        not INSPECTOR.exists() or NODE_DIR is None,
        reason="the MCP Inspector (tests/peers, `make peers`) or node >= 22.19 is not installed",
    ),
    pytest.mark.timeout(180),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, str, Path]]:
    home = tmp_path_factory.mktemp("inspector-http")
    workspace, state = make_workspace(home), home / "state"
    token = add_token(state, "ada")
    with start_fsnotes(workspace, state) as server:
        server.home = str(home / "home")  # type: ignore[attr-defined]
        yield server, token, workspace


def inspect(
    server: HttpServer, era: str, *args: str, token: str | None
) -> subprocess.CompletedProcess[str]:
    # Its own HOME: the Inspector keeps OAuth state there, which must not be a person's.
    env = {**os.environ, "PATH": f"{NODE_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
           "HOME": str(server.home)}  # fmt: skip
    headers = ["--header", f"Authorization: Bearer {token}"] if token else []
    return subprocess.run(
        [str(INSPECTOR), "--cli", "--protocol-era", era, server.url, *headers, *args],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("era", ["legacy", "modern", "auto"])
def test_inspector_over_http_lists_strict_schemas_and_reads(
    served: tuple[HttpServer, str, Path], era: str
) -> None:
    server, token, workspace = served
    listed = inspect(server, era, "--method", "tools/list", "--strict", token=token)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "notes_delete" in [t["name"] for t in json.loads(listed.stdout)["tools"]]
    uri = (workspace / "plan.md").as_uri()
    read = inspect(server, era, "--method", "tools/call", "--tool-name", "notes_read",
                   "--tool-arg", f"uri={uri}", token=token)  # fmt: skip
    assert read.returncode == 0, read.stdout + read.stderr
    assert json.loads(read.stdout)["structuredContent"]["title"] == "Plan"


def test_inspector_without_the_token_is_refused(served: tuple[HttpServer, str, Path]) -> None:
    server, _token, _workspace = served
    refused = inspect(server, "auto", "--method", "tools/list", token=None)
    assert refused.returncode != 0
    assert "notes_delete" not in refused.stdout
