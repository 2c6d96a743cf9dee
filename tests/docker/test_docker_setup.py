"""The setup page inside the hardened container: a person approves over HTTP, the grant works.

The private CI daemon runs with --bridge=none, so ports cannot be published here; the
container shares the host's network namespace instead (--network=host) and binds the page
on 127.0.0.1 only. Everything else is the hardened configuration (read-only root, no
capabilities, no new privileges, uid 10001, Landlock inside). The published-port form of
docs/setup.md (-p 127.0.0.1:PORT:PORT with FSNOTES_SETUP_BIND=0.0.0.0) differs only in the network.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from e2e.wire import Wire, meta
from setup.person import Person, free_port, listening
from test_docker_image import (  # noqa: F401
    DOCKER,
    GID,
    HARDENED,
    IMAGE,
    RUN_TIMEOUT_S,
    UID,
    docker,
    mounts,
    pytestmark,
)

URL_CAPS = {"elicitation": {"url": {}}}


def test_setup_page_in_the_hardened_container_grants_a_folder(tmp_path: Path) -> None:
    volumes = mounts(tmp_path)
    for sub in ("personal", "projects"):
        (tmp_path / "notes" / sub).mkdir()
        os.chown(tmp_path / "notes" / sub, UID, GID)
    (tmp_path / "notes" / "projects" / "plan.md").write_text("# Plan\nship\n")
    os.chown(tmp_path / "notes" / "projects" / "plan.md", UID, GID)
    port = free_port()
    flags = [f if f != "--network=none" else "--network=host" for f in HARDENED]
    w = Wire.spawn(
        [
            DOCKER,
            *flags,
            *volumes,
            "-e",
            "FSNOTES_WORKSPACE=/notes/personal",
            "-e",
            "FSNOTES_SETUP_ALLOW=/notes",
            "-e",
            f"FSNOTES_SETUP_PORT={port}",
            IMAGE,
        ]
    )
    try:
        args = {"workspaceUri": "file:///notes/projects", "access": "write"}
        first = w.call(
            "tools/call",
            {"_meta": meta(URL_CAPS), "name": "notes_setup", "arguments": args},
            timeout=60,
        )["result"]
        assert first["resultType"] == "input_required", first
        url = first["inputRequests"]["connect_folder"]["params"]["url"]
        assert url.startswith(f"http://127.0.0.1:{port}/setup/") and listening(port)
        code = (tmp_path / "state" / "setup-code").read_text().strip()
        page = Person(port).decide(url, "approve", code)
        assert page.status == 200, page.body[:300]
        done = w.call(
            "tools/call",
            {
                "_meta": meta(URL_CAPS),
                "name": "notes_setup",
                "arguments": args,
                "inputResponses": {"connect_folder": {"action": "accept"}},
                "requestState": first["requestState"],
            },
            timeout=60,
        )["result"]
        assert done["structuredContent"]["status"] == "granted", done
        read = w.call(
            "tools/call",
            {
                "_meta": meta(),
                "name": "notes_read",
                "arguments": {"uri": "file:///notes/projects/plan.md"},
            },
            timeout=60,
        )["result"]
        assert read["structuredContent"]["title"] == "Plan"
    finally:
        err = w.close()
    assert "Traceback" not in err and "setup code" in err
    deadline = time.monotonic() + 10
    while listening(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not listening(port)


SETUP_PAGE = Path(__file__).resolve().parents[2] / "docs" / "setup.md"
# docs/setup.md marks its Docker grant example with this comment; the test runs that block's
# commands exactly as printed, so the text and the test cannot drift apart.
GRANT_EXAMPLE_MARKER = "<!-- docker-grant-example:"


def grant_example() -> list[str]:
    """The commands of docs/setup.md's Docker grant example, as printed (continuations kept)."""
    text = SETUP_PAGE.read_text()
    after = text[text.index(GRANT_EXAMPLE_MARKER) :]
    start = after.index("```sh\n") + len("```sh\n")
    block = after[start : after.index("\n```", start)]
    commands, current = [], ""
    for line in block.splitlines():
        current += line + "\n"
        if not line.endswith("\\"):
            commands.append(current)
            current = ""
    return commands


def test_the_docs_docker_grant_example_works_as_printed(tmp_path: Path) -> None:
    mkdir, grant, serve = grant_example()
    assert " grant " in grant and grant.rstrip().endswith("--access write")
    # The docs' image name, as `docker build -t fsnotes .` makes it.
    tagged = docker("tag", IMAGE, "fsnotes")
    assert tagged.returncode == 0, tagged.stderr
    home = tmp_path / "home"
    home.mkdir()
    # A person's shell: their HOME, `docker` on PATH, `id` giving their uid. (CI runs as root;
    # the tests never run a container as root, so a root caller acts as the image's user.)
    prelude = f'export HOME={home}\ndocker() {{ {DOCKER} "$@"; }}\n'
    if os.getuid() == 0:
        prelude += f'id() {{ case "$1" in -u) echo {UID};; -g) echo {GID};; esac; }}\n'

    def shell(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", prelude + command],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )

    made = shell(mkdir)
    assert made.returncode == 0, made.stderr
    (home / "notes" / "proj" / "plan.md").write_text("# Plan\nship\n")
    for path in [home, *home.rglob("*")]:
        os.chown(path, UID, GID)  # the person owns their home
    granted = shell(grant)
    assert granted.returncode == 0, granted.stderr
    assert "granted 'write' on /notes/proj to ada" in granted.stdout
    w = Wire.spawn(["bash", "-c", prelude + serve])
    try:
        listed = w.call(
            "tools/call",
            {"_meta": meta(), "name": "workspaces_list", "arguments": {}},
            timeout=60,
        )["result"]["structuredContent"]["workspaces"]
        access = {ws["uri"]: ws["access"] for ws in listed}
        assert access == {"file:///notes/personal": "delete", "file:///notes/proj": "write"}
        read = w.call(
            "tools/call",
            {
                "_meta": meta(),
                "name": "notes_read",
                "arguments": {"uri": "file:///notes/proj/plan.md"},
            },
            timeout=60,
        )["result"]
        assert read["structuredContent"]["title"] == "Plan", read
    finally:
        err = w.close()
    assert "Traceback" not in err
    # The docs' fallback pairing: without FSNOTES_PRINCIPAL, a --user without a passwd
    # entry in the image is served as uid-<n>.
    who = docker(
        "run",
        "--rm",
        "--network=none",
        "--user=1000:1000",
        "--entrypoint=python3",
        "fsnotes",
        "-c",
        "from fsnotes.app.config import load; print(load(require_workspace=False).principal)",
    )
    assert who.returncode == 0, who.stderr
    assert who.stdout.strip() == "uid-1000"
