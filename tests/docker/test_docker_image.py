"""The Docker image, run the hardened way: non-root, read-only root filesystem, no network
but `lo`, no capabilities, and Landlock inside refuses what lies outside /notes and /state.

Needs an engine and a built image: `make docker-test` (or `.ci/docker.sh up` and the
variables `.ci/docker.sh env` prints). Skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

IMAGE = os.environ.get("FSNOTES_DOCKER_IMAGE", "")
DOCKER = os.environ.get("FSNOTES_DOCKER_CLI") or shutil.which("docker") or "docker"
RUN_TIMEOUT_S = 90  # a container starts in about a second; 90 s means the engine hangs
# The CI runs as root; `--user $(id -u)` would then be root in the container, which is the
# one thing these tests must not do, so root callers use the image's own user instead.
UID, GID = (os.getuid(), os.getgid()) if os.getuid() != 0 else (10001, 10001)


def _skip_reason() -> str | None:
    if os.environ.get("FSNOTES_DOCKER_SKIPPED"):
        return f".ci/docker.sh skipped Docker: {os.environ['FSNOTES_DOCKER_SKIPPED']}"
    if not IMAGE or not os.environ.get("DOCKER_HOST"):
        return "FSNOTES_DOCKER_IMAGE and DOCKER_HOST are not set (run `make docker-test`)"
    return None


pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
]

# Runs inside the container (fed on stdin to `python -`): prints one JSON object.
PROBE = r"""
import errno, json, os, socket, sys
def attempt(fn):
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok"
def write(path, data="x"):
    with open(path, "x") as f:
        f.write(data)
def read(path):
    with open(path) as f:
        return f.read()
def routes():
    # No packet is ever sent: an empty routing table shows there is nowhere to send one.
    return len(read("/proc/net/route").splitlines()[1:])
status = dict(l.split(":", 1) for l in read("/proc/self/status").splitlines())
out = {
    "uid": os.getuid(),
    "cap_eff": int(status["CapEff"].strip(), 16),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "interfaces": [name for _, name in socket.if_nameindex()],
    "write_rootfs": attempt(lambda: write("/opt/venv/planted")),
    "write_tmp": attempt(lambda: write("/tmp/planted")),
    "routes": routes(),
    "before_outside": attempt(lambda: read("/outside/secret.txt")),
}
if sys.argv[1:] == ["landlock"]:
    from sandbox.jail import apply_landlock, runtime_read_only_paths
    report = apply_landlock(writable=["/notes"], state_dirs=["/state"],
                            read_only=runtime_read_only_paths())
    out["abi"] = report.abi
    out["applied"] = report.applied
    out["etc_passwd"] = attempt(lambda: read("/etc/passwd"))
    out["outside"] = attempt(lambda: read("/outside/secret.txt"))
    out["symlink"] = attempt(lambda: os.symlink("/etc/passwd", "/notes/link"))
    out["notes_write"] = attempt(lambda: write("/notes/inside.md", "inside"))
    out["notes_read"] = attempt(lambda: read("/notes/inside.md"))
    out["state_write"] = attempt(lambda: write("/state/replay.db"))
    from fsnotes.app import doctor
    report = doctor.report()
    out["doctor_landlock"] = report["layers"]["landlock"]["state"]
    out["doctor_container"] = report["layers"]["container"]["kind"]
print(json.dumps(out))
"""


def docker(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DOCKER, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def mounts(tmp: Path) -> list[str]:
    notes, state, outside = tmp / "notes", tmp / "state", tmp / "outside"
    for d in (notes, state, outside):
        d.mkdir()
        os.chown(d, UID, GID)
    (outside / "secret.txt").write_text("SECRET")
    os.chown(outside / "secret.txt", UID, GID)
    return [
        f"--volume={notes}:/notes",
        f"--volume={state}:/state",
        f"--volume={outside}:/outside:ro",
    ]


HARDENED = [
    "run",
    "-i",
    "--rm",
    "--read-only",
    "--network=none",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    f"--user={UID}:{GID}",
]


def hardened_run(tmp: Path, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """`docker run -i` with the hardened flags and the /notes, /state, /outside mounts under
    ``tmp``; ``args`` go after the flags (``--entrypoint=...``, the image, its arguments)."""
    return docker(*HARDENED, *mounts(tmp), *args, stdin=stdin)


def run_probe(tmp: Path, *args: str) -> dict[str, Any]:
    proc = hardened_run(tmp, "--entrypoint=python3", IMAGE, "-", *args, stdin=PROBE)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_image_config_runs_fsnotes_serve_as_a_non_root_user() -> None:
    proc = docker("image", "inspect", "--format={{json .Config}}", IMAGE)
    assert proc.returncode == 0, proc.stderr
    config = json.loads(proc.stdout)
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["fsnotes", "serve"]
    assert "FSNOTES_WORKSPACE=/notes" in config["Env"]
    assert "FSNOTES_STATE_DIR=/state" in config["Env"]
    which = docker(
        "run", "--rm", "--network=none", "--entrypoint=sh", IMAGE, "-c", "command -v fsnotes; id -u"
    )
    assert which.returncode == 0, which.stderr
    assert which.stdout.split() == ["/opt/venv/bin/fsnotes", "10001"]


def test_hardened_container_is_non_root_read_only_without_network(tmp_path: Path) -> None:
    inside = run_probe(tmp_path)
    assert inside["uid"] == UID != 0
    assert inside["cap_eff"] == 0
    assert inside["no_new_privs"] == "1"
    assert inside["write_rootfs"] == "EROFS"
    assert inside["write_tmp"] == "EROFS"
    assert inside["interfaces"] == ["lo"]
    assert inside["routes"] == 0
    assert inside["before_outside"] == "ok"  # readable without Landlock: see the next test


def test_landlock_inside_the_container_refuses_files_outside_the_workspace(
    tmp_path: Path,
) -> None:
    inside = run_probe(tmp_path, "landlock")
    assert inside["applied"] is True and inside["abi"] >= 1
    assert inside["etc_passwd"] == "EACCES"
    assert inside["outside"] == "EACCES"
    assert inside["symlink"] == "EACCES"
    assert inside["notes_write"] == "ok"
    assert inside["notes_read"] == "ok"
    assert inside["state_write"] == "ok"
    assert (tmp_path / "notes" / "inside.md").read_text() == "inside"
    assert inside["doctor_landlock"] == "applied"
    assert inside["doctor_container"] == "docker"
