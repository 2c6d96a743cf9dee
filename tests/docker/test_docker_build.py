"""`make image-offline`, the documented build without Docker Hub (docs/docker.md): on the
Docker the environment names (here the CI's private daemon), from the debootstrap base that
`.ci/docker.sh up` made, with the build itself run with --network none."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from test_docker_image import DOCKER, docker, pytestmark  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
TAG = "local/fsnotes:offline-test"
BUILD_TIMEOUT_S = 600  # a cached build takes seconds; wheels fetched afresh about a minute


def test_make_image_offline_builds_a_working_image_without_docker_hub() -> None:
    built = subprocess.run(
        ["make", "image-offline", f"IMAGE={TAG}"],
        cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "PATH": f"{Path(DOCKER).parent}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    assert f"built {TAG} without Docker Hub" in built.stderr
    try:
        base = docker("image", "inspect", "-f", "{{.Config.Env}}", TAG)
        assert base.returncode == 0 and "FSNOTES_STATE_DIR=/state" in base.stdout
        version = docker("run", "--rm", "--network=none", "--entrypoint=fsnotes", TAG, "--version")
        assert version.returncode == 0 and version.stdout.startswith("fsnotes "), version.stderr
    finally:
        docker("image", "rm", TAG)
