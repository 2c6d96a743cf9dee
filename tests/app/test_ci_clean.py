"""`make clean` removes what `make test` leaves outside the checkout (issue 24: 470 MB in
/var/tmp/fsnotes-ci): `.ci/docker.sh clean`, run here on a work folder of its own."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_docker_sh_clean_removes_its_work_folder_and_nothing_beside_it(tmp_path: Path) -> None:
    work = tmp_path / "fsnotes-ci"
    for part in ("docker/data/overlay2", "context/wheels", "wheel-cache"):
        (work / part).mkdir(parents=True)
    (work / "base-bookworm-python3.tar").write_bytes(b"\0" * 4096)
    (work / "docker" / "dockerd.pid").write_text("999999999\n")  # a pid no process has
    beside = tmp_path / "keep.txt"
    beside.write_text("mine")
    done = subprocess.run(
        [str(REPO / ".ci" / "docker.sh"), "clean"],
        env={**os.environ, "FSNOTES_CI_DIR": str(work)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not work.exists() and beside.read_text() == "mine"
    assert f"removing {work}" in done.stderr


def test_make_clean_runs_it() -> None:
    recipe = re.search(r"^clean:\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert recipe is not None and ".ci/docker.sh clean" in recipe.group(1)
