"""The setup page inside the hardened container: a person approves over HTTP, the grant works.

The private CI daemon runs with --bridge=none, so ports cannot be published here; the
container shares the host's network namespace instead (--network=host) and binds the page
on 127.0.0.1 only. Everything else is the hardened configuration (read-only root, no
capabilities, no new privileges, uid 10001, Landlock inside). The README's published-port
form (-p 127.0.0.1:PORT:PORT with FSNOTES_SETUP_BIND=0.0.0.0) differs only in the network.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from e2e.wire import Wire, meta
from setup.person import Person, free_port, listening
from test_docker_image import DOCKER, GID, HARDENED, IMAGE, UID, mounts, pytestmark  # noqa: F401

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
