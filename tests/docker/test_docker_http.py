"""The HTTP mode of the hardened container: a token made with the image, the endpoint serving it.

The private CI daemon runs with --bridge=none, so ports cannot be published here; the
container shares the host's network namespace instead (--network=host) and binds 127.0.0.1
only. Everything else is the hardened configuration (read-only root, no capabilities, no new
privileges, uid 10001, Landlock inside). docs/docker.md's published-port form
(-p 127.0.0.1:PORT:PORT with FSNOTES_HTTP=0.0.0.0:PORT and FSNOTES_HTTP_EXPOSE=1) differs
only in the network.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from setup.person import free_port
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
from transport.http_support import HttpServer, Raw


def test_the_container_serves_http_with_a_token_made_by_the_image(tmp_path: Path) -> None:
    volumes = mounts(tmp_path)
    note = tmp_path / "notes" / "plan.md"
    note.write_text("# Plan\n\nship the kettle\n")
    os.chown(note, UID, GID)
    made = docker(
        *HARDENED, *volumes, "--entrypoint", "fsnotes", IMAGE, "token", "add", "--principal", "ada"
    )
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    assert token and token not in (tmp_path / "state" / "http-tokens.json").read_text()
    port = free_port()
    flags = [f if f != "--network=none" else "--network=host" for f in HARDENED]
    server = HttpServer(
        [
            DOCKER,
            *flags,
            *volumes,
            "-e",
            "FSNOTES_PRINCIPAL=ada",
            "-e",
            f"FSNOTES_HTTP=127.0.0.1:{port}",
            IMAGE,
        ]
    )
    ada, nobody = Raw(server, token), Raw(server, None)
    try:
        assert server.port == port
        found = ada.call("tools/call", {"name": "notes_search", "arguments": {"query": "kettle"}})
        assert [r["path"] for r in found["result"]["structuredContent"]["results"]] == ["plan.md"]
        outside = ada.call(
            "tools/call", {"name": "notes_read", "arguments": {"uri": "file:///outside/secret.txt"}}
        )
        assert outside["result"]["isError"] is True and "SECRET" not in str(outside)
        refused = nobody.post(nobody.request("tools/list"))
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        foreign = ada.post(ada.request("tools/list"), {"host": f"evil.example:{port}"})
        assert foreign.status_code == 403
        assert "Landlock ABI" in server.stderr()
    finally:
        ada.close()
        nobody.close()
        server.stop()
    assert token not in server.stderr()


DOCKER_PAGE = Path(__file__).resolve().parents[2] / "docs" / "docker.md"
DOCKER_HTTP_MARKER = "<!-- docker-http-example:"


def page_commands(page: Path, marker: str) -> list[str]:
    """The commands of the block after ``marker`` in ``page``, as printed."""
    text = page.read_text()
    after = text[text.index(marker) :]
    start = after.index("```sh\n") + len("```sh\n")
    commands, current = [], ""
    for line in after[start : after.index("\n```", start)].splitlines():
        current += line + "\n"
        if not line.endswith("\\"):
            commands.append(current)
            current = ""
    return commands


def test_the_docs_docker_http_example_works_from_a_fresh_home(tmp_path: Path) -> None:
    mkdir, token_add, serve = page_commands(DOCKER_PAGE, DOCKER_HTTP_MARKER)
    assert "mkdir -p" in mkdir and "token add" in token_add
    tagged = docker("tag", IMAGE, "fsnotes")  # the README's name, as `make image` makes it
    assert tagged.returncode == 0, tagged.stderr
    home = tmp_path / "home"
    home.mkdir()  # no notes, no state folder yet: a first run
    prelude = f'export HOME={home}\ndocker() {{ {DOCKER} "$@"; }}\n'
    if os.getuid() == 0:  # CI runs as root; the tests never run a container as root
        prelude += f'id() {{ case "$1" in -u) echo {UID};; -g) echo {GID};; esac; }}\n'
    made = subprocess.run(
        ["bash", "-c", prelude + mkdir], capture_output=True, text=True, timeout=60, check=False
    )
    assert made.returncode == 0, made.stderr
    (home / "notes" / "plan.md").write_text("# Plan\n\nship the kettle\n")
    for path in [home, *home.rglob("*")]:
        os.chown(path, UID, GID)  # what the person's own mkdir makes is theirs
    added = subprocess.run(
        ["bash", "-c", prelude + token_add],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    assert token.startswith("fsn_")
    # The CI daemon has no bridge: the host's network instead of the published port.
    port = free_port()
    assert "-p 127.0.0.1:8080:8080" in serve and "FSNOTES_HTTP=0.0.0.0:8080" in serve
    local = serve.replace("-p 127.0.0.1:8080:8080", "--network host").replace(
        "FSNOTES_HTTP=0.0.0.0:8080", f"FSNOTES_HTTP=127.0.0.1:{port}"
    )
    server = HttpServer(["bash", "-c", prelude + "exec " + local])
    ada = Raw(server, token)
    try:
        listed = ada.call("tools/call", {"name": "workspaces_list", "arguments": {}})
        assert [w["uri"] for w in listed["result"]["structuredContent"]["workspaces"]] == [
            "file:///notes"
        ]
        found = ada.call("tools/call", {"name": "notes_search", "arguments": {"query": "kettle"}})
        assert [r["path"] for r in found["result"]["structuredContent"]["results"]] == ["plan.md"]
    finally:
        ada.close()
        server.stop()
    assert "no workspace is granted" not in server.stderr()


def test_a_state_folder_docker_made_for_root_is_refused_with_its_owner_and_the_fix(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)  # what `docker run -v` makes of a missing folder: root's
    os.chown(state, 0, 0)
    refused = docker(
        *HARDENED, "-v", f"{state}:/state", "--entrypoint", "fsnotes", IMAGE,
        "token", "add", "--principal", "ada",
    )  # fmt: skip
    assert refused.returncode == 2 and refused.stdout == ""
    err = refused.stderr
    assert "cannot use the state directory /state: Operation not permitted" in err, err
    assert f"fsnotes runs as uid {UID} (gid {GID}), and /state is owned by uid 0 (root)" in err
    assert "mkdir -p" in err and f"sudo chown -R {UID}:{GID}" in err
    assert not any(state.iterdir())
