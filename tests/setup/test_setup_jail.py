"""Layer 3 for the setup page: the jailed server may bind only the page's port, connect to no
TCP port, and reach the allowlisted parents (writable only when the policy may grant write).

Each case runs in a child process (Landlock cannot be undone): it builds the real server from
a real configuration, applies the same jail `fsnotes serve` applies, then probes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.jail import landlock_abi
from tests.setup.person import free_port

CHILD = r"""
import errno, json, os, socket, sys
from fsnotes.app.config import load
from fsnotes.app.server import build, jail

place, port, max_access = sys.argv[1], int(sys.argv[2]), sys.argv[3]
config = load(
    workspaces=[place + "/notes"], state_dir=place + "/state",
    setup_allow=[place + "/shared"], setup_port=port,
    env={"FSNOTES_SETUP_MAX_ACCESS": max_access},
)
server = build(config)
report = jail(server)
out = {"applied": bool(report and report.applied), "net": report.handled_net if report else []}

def bind(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        s.close()

def connect(p):
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", p))
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    finally:
        s.close()

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

out["bind_page_port"] = bind(port)
out["bind_other_port"] = bind(int(sys.argv[4]))
out["connect_listener"] = connect(int(sys.argv[5]))
out["read_in_parent"] = attempt(lambda: open(place + "/shared/proj/plan.md").read())
out["write_in_parent"] = attempt(lambda: open(place + "/shared/proj/new.md", "w").close())
out["read_outside"] = attempt(lambda: open(place + "/outside/secret.md").read())
print(json.dumps(out))
"""


@pytest.fixture
def place(tmp_path: Path) -> Path:
    (tmp_path / "notes").mkdir()
    (tmp_path / "shared" / "proj").mkdir(parents=True)
    (tmp_path / "shared" / "proj" / "plan.md").write_text("# Plan\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("secret\n")
    return tmp_path


@pytest.mark.skipif((landlock_abi() or 0) < 4, reason="Landlock TCP rules need ABI 4 (Linux 6.7)")
@pytest.mark.parametrize(("max_access", "write"), [("write", "ok"), ("read", "EACCES")])
def test_jailed_server_binds_only_the_page_port_and_follows_max_access(
    place: Path, max_access: str, write: str
) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        port, other = free_port(), free_port()
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                str(place),
                str(port),
                max_access,
                str(other),
                str(listener.getsockname()[1]),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["applied"] and "bind_tcp" in out["net"] and "connect_tcp" in out["net"]
    assert out["bind_page_port"] == "ok"
    assert out["bind_other_port"] == "EACCES"
    assert out["connect_listener"] == "EACCES"
    assert out["read_in_parent"] == "ok"
    assert out["write_in_parent"] == write
    assert out["read_outside"] == "EACCES"
