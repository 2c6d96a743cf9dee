"""`sandbox/fsnotes-bwrap.sh`: the command runs with only the runtime and its workspaces;
host files are invisible, the workspace is writable, the network is down, stdio works."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

LAUNCHER = Path(__file__).resolve().parents[2] / "sandbox" / "fsnotes-bwrap.sh"
RUN_TIMEOUT_S = 60  # starting Python in a sandbox takes well under a second
UNPRIVILEGED_UID = 10001
SYSTEM_PYTHON = "/usr/bin/python3"

# Runs inside the sandbox: reports what it can see and do as JSON on stdout.
INSIDE = r"""
import errno, json, os, socket, sys
ws, outside, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
def attempt(fn):
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"
def write():
    with open(os.path.join(ws, "written-inside.md"), "x") as f:
        f.write("inside")
def connect():
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
print(json.dumps({
    "uid": os.getuid(),
    "pid": os.getpid(),
    "cap_eff": int(status["CapEff"].strip(), 16),
    "etc_passwd": attempt(lambda: open("/etc/passwd").read()),
    "outside_file": attempt(lambda: open(os.path.join(outside, "secret.txt")).read()),
    "write_workspace": attempt(write),
    "connect_host_loopback": attempt(connect),
    "interfaces": [name for _, name in socket.if_nameindex()],
    "stdin": sys.stdin.read(),
}))
"""


def _bwrap_problem() -> str | None:
    """Why bwrap cannot run here, or None if it can."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (.ci/docker.sh up installs it)"
    probe = subprocess.run(
        ["bwrap", "--unshare-user", "--ro-bind", "/", "/", "true"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    if probe.returncode != 0:
        return f"bwrap cannot create namespaces here: {probe.stderr.strip()}"
    return None


BWRAP_PROBLEM = _bwrap_problem()
pytestmark = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=BWRAP_PROBLEM or "")


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def layout(base: Path) -> tuple[Path, Path, Path]:
    workspace, state, outside = base / "notes", base / "state", base / "outside"
    for d in (workspace, state, outside):
        d.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    return workspace, state, outside


def launch(
    workspace: Path,
    state: Path,
    outside: Path,
    port: int,
    *,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    prefix: list[str] | None = None,
    launcher: Path = LAUNCHER,
) -> dict[str, Any]:
    cmd = [
        *(prefix or []),
        str(launcher),
        "--workspace",
        str(workspace),
        "--state-dir",
        str(state),
        "--",
        python,
        "-c",
        INSIDE,
        str(workspace),
        str(outside),
        str(port),
    ]
    proc = subprocess.run(
        cmd,
        input="hello over stdin",
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_host_files_are_invisible_and_the_workspace_is_writable(
    tmp_path: Path, listener: int
) -> None:
    workspace, state, outside = layout(tmp_path)
    inside = launch(workspace, state, outside, listener)
    assert inside["etc_passwd"] == "ENOENT"
    assert inside["outside_file"] == "ENOENT"
    assert inside["write_workspace"] == "ok"
    assert (workspace / "written-inside.md").read_text() == "inside"
    assert inside["cap_eff"] == 0
    assert inside["pid"] <= 2  # a fresh pid namespace: bwrap is pid 1


def test_network_is_down_unless_asked_for(tmp_path: Path, listener: int) -> None:
    workspace, state, outside = layout(tmp_path)
    isolated = launch(workspace, state, outside, listener)
    assert isolated["interfaces"] == ["lo"]
    assert isolated["connect_host_loopback"] in {"ECONNREFUSED", "ENETUNREACH"}

    (workspace / "written-inside.md").unlink()
    shared = launch(workspace, state, outside, listener, env={"FSNOTES_BWRAP_NET": "1"})
    assert shared["connect_host_loopback"] == "ok"


def test_stdin_and_stdout_pass_through_for_stdio(tmp_path: Path, listener: int) -> None:
    workspace, state, outside = layout(tmp_path)
    assert launch(workspace, state, outside, listener)["stdin"] == "hello over stdin"


def test_usage_errors_are_reported_not_run(tmp_path: Path) -> None:
    no_workspace = subprocess.run(
        [str(LAUNCHER), "--", sys.executable, "-c", "print('ran')"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert no_workspace.returncode == 125
    assert "ran" not in no_workspace.stdout
    missing = subprocess.run(
        [str(LAUNCHER), "--workspace", str(tmp_path / "nope"), "--", sys.executable],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert missing.returncode == 125
    assert "not a directory" in missing.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason=f"{SYSTEM_PYTHON} missing")
def test_works_for_an_unprivileged_user(listener: int) -> None:
    # The real deployment: a normal user, unprivileged user namespaces, the system Python.
    base = Path(tempfile.mkdtemp(prefix="fsnotes-bwrap-"))
    try:
        base.chmod(0o755)
        workspace, state, outside = layout(base)
        for p in (workspace, state, outside, outside / "secret.txt"):
            os.chown(p, UNPRIVILEGED_UID, UNPRIVILEGED_UID)
        # The checkout may sit in a directory only root can enter (CI clones into a
        # mktemp dir, mode 0700): the unprivileged user runs a copy of the launcher.
        launcher = base / LAUNCHER.name
        shutil.copy2(LAUNCHER, launcher)
        launcher.chmod(0o755)
        prefix = ["setpriv", f"--reuid={UNPRIVILEGED_UID}", f"--regid={UNPRIVILEGED_UID}"]
        inside = launch(
            workspace,
            state,
            outside,
            listener,
            python=SYSTEM_PYTHON,
            prefix=[*prefix, "--clear-groups"],
            launcher=launcher,
        )
        assert inside["uid"] == UNPRIVILEGED_UID
        assert inside["etc_passwd"] == "ENOENT"
        assert inside["outside_file"] == "ENOENT"
        assert inside["write_workspace"] == "ok"
        assert inside["connect_host_loopback"] in {"ECONNREFUSED", "ENETUNREACH"}
    finally:
        shutil.rmtree(base)
