"""An MCP session against the hardened container over stdio, and layer 3 alone inside it.

Needs the image from `make docker-test` (skipped with the reason otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path

from e2e.wire import Wire, meta
from test_docker_image import DOCKER, GID, HARDENED, IMAGE, UID, mounts, pytestmark  # noqa: F401

SERVERS = Path(__file__).resolve().parents[1] / "servers"


def _vault(tmp_path: Path) -> list[str]:
    volumes = mounts(tmp_path)
    notes = tmp_path / "notes"
    (notes / "sub").mkdir()
    (notes / "sub" / "plan.md").write_text("# Plan\n\nThe plan.\n")
    (tmp_path / "outside" / "secret.md").write_text("# Secret\nOUTSIDE SECRET\n")
    # symlinks as the container sees the paths
    os.symlink("/etc/passwd", notes / "passwd.md")
    os.symlink("/outside/secret.md", notes / "planted.md")
    for p in (notes / "sub", notes / "sub" / "plan.md"):
        os.chown(p, UID, GID)
    os.lchown(notes / "passwd.md", UID, GID)
    os.lchown(notes / "planted.md", UID, GID)
    return volumes


def _tool(
    w: Wire,
    name: str,
    args: dict[str, object],
    caps: dict[str, object] | None = None,
    **extra: object,
) -> dict[str, object]:
    resp = w.call(
        "tools/call", {"_meta": meta(caps), "name": name, "arguments": args, **extra}, timeout=60
    )
    return dict(resp["result"])


def test_mcp_session_in_the_hardened_container(tmp_path: Path) -> None:
    volumes = _vault(tmp_path)
    w = Wire.spawn([DOCKER, *HARDENED, *volumes, IMAGE])
    try:
        init = w.call(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "docker-test", "version": "1"},
            },
            timeout=60,
        )
        assert init["result"]["serverInfo"]["name"] == "fsnotes"
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = w.call("tools/call", {"name": "workspaces_list", "arguments": {}})["result"]
        assert listed["structuredContent"]["workspaces"][0]["uri"] == "file:///notes"
        read = _tool(w, "notes_read", {"uri": "file:///notes/sub/plan.md"})
        assert read["structuredContent"]["title"] == "Plan"  # type: ignore[index]
        created = _tool(w, "notes_create", {"path": "new/idea.md", "content": "# Idea\n"})
        assert created.get("isError") is not True, created
        assert (tmp_path / "notes" / "new" / "idea.md").read_text() == "# Idea\n"
        # escapes: lexical, sibling, encoded, and symlinks planted in the workspace
        for uri in (
            "file:///etc/passwd",
            "file:///notes/../outside/secret.md",
            "file:///notes/%2e%2e/outside/secret.md",
            "file:///notes-evil/x.md",
            "file:///notes/passwd.md",
            "file:///notes/planted.md",
        ):
            result = _tool(w, "notes_read", {"uri": uri})
            text = str(result["content"][0]["text"])  # type: ignore[index]
            assert result["isError"] is True, (uri, result)
            assert "root:" not in text and "OUTSIDE SECRET" not in text
        # the delete confirmation round trip (2026-07-28) inside the container
        form = {"elicitation": {"form": {}}}
        first = _tool(w, "notes_delete", {"uri": "file:///notes/sub/plan.md"}, form)
        (key,) = first["inputRequests"]  # type: ignore[misc]
        done = _tool(
            w,
            "notes_delete",
            {"uri": "file:///notes/sub/plan.md"},
            form,
            inputResponses={
                key: {"action": "accept", "content": {"note_id": "sub/plan.md", "confirm": True}}
            },
            requestState=first["requestState"],
        )
        assert done["structuredContent"]["deleted"] is True  # type: ignore[index]
        assert not (tmp_path / "notes" / "sub" / "plan.md").exists()
    finally:
        err = w.close()
    assert "Traceback" not in err


def test_layer3_alone_in_the_container(tmp_path: Path) -> None:
    volumes = _vault(tmp_path)
    w = Wire.spawn(
        [
            DOCKER,
            *HARDENED,
            *volumes,
            f"--volume={SERVERS}:/testservers:ro",
            "--entrypoint=python3",
            IMAGE,
            "/testservers/layer2_disabled.py",
            "serve",
        ]
    )
    try:
        for name in ("passwd.md", "planted.md"):
            result = _tool(w, "notes_read", {"uri": f"file:///notes/{name}"})
            text = str(result["content"][0]["text"])  # type: ignore[index]
            assert result["isError"] is True and "(EACCES)" in text, result
            assert "root:" not in text and "OUTSIDE SECRET" not in text
    finally:
        w.close()
