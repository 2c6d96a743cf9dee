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
from pathlib import Path

from setup.person import free_port
from test_docker_image import (  # noqa: F401
    DOCKER,
    GID,
    HARDENED,
    IMAGE,
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
