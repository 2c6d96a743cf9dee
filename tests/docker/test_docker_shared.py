"""Two hardened containers of the image as a team deployment: one PostgreSQL database, one
keys file and token, one notes volume; a confirmation asked of one container is executed by
the other, once, and the audit log (read with the image's own `fsnotes audit`) says who.

The shape of deploy/compose.yaml without the balancer (tests/e2e/test_balanced_wire.py puts
HAProxy in front of host processes). As in test_docker_http.py the private CI daemon has no
bridge, so the containers share the host's network namespace (--network=host) and reach the
test's PostgreSQL (tests/pgcluster.py) on loopback; the rest is the hardened configuration,
Landlock inside included (the jail lets each container connect to the database's port).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from pgcluster import PASSWORD
from test_docker_image import (  # noqa: F401
    DOCKER,
    GID,
    HARDENED,
    IMAGE,
    UID,
    docker,
    pytestmark,
)
from transport.http_support import HttpServer, Raw, answer_of

FORM = {"elicitation": {"form": {}}}
NETWORKED = [f if f != "--network=none" else "--network=host" for f in HARDENED]


def owned_dir(path: Path) -> Path:
    path.mkdir()
    os.chown(path, UID, GID)
    return path


def instance(notes: Path, state: Path, dsn: str, name: str) -> HttpServer:
    from setup.person import free_port

    return HttpServer(
        [DOCKER, *NETWORKED, f"--volume={notes}:/notes", f"--volume={state}:/state",
         "-e", f"FSNOTES_DATABASE={dsn}", "-e", f"FSNOTES_INSTANCE={name}",
         "-e", "FSNOTES_PRINCIPAL=ada", "-e", f"FSNOTES_HTTP=127.0.0.1:{free_port()}", IMAGE]
    )  # fmt: skip


def call(raw: Raw, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = raw.request("tools/call", {"name": "notes_delete", "arguments": args, **extra}, FORM)
    response = raw.post(body)
    assert response.status_code == 200, response.text
    return dict(answer_of(response)["result"])


def test_two_containers_on_one_postgresql_execute_a_confirmation_once(
    tmp_path: Path, pg_dsn: str
) -> None:
    notes, state_a, state_b = (owned_dir(tmp_path / n) for n in ("notes", "state-a", "state-b"))
    note = notes / "cross.md"
    note.write_text("# Cross\n\nto be deleted through another container\n")
    os.chown(note, UID, GID)
    state_mount = f"--volume={state_a}:/state"
    keys = docker(*HARDENED, state_mount, "--entrypoint", "fsnotes", IMAGE, "rotate-key")
    assert keys.returncode == 0, keys.stderr
    made = docker(
        *HARDENED, state_mount, "--entrypoint", "fsnotes", IMAGE, "token", "add", "--principal",
        "ada",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    for name in ("seal-keys.json", "http-tokens.json"):  # shared, as docs/team.md says
        shutil.copy2(state_a / name, state_b / name)
        os.chown(state_b / name, UID, GID)

    a = instance(notes, state_a, pg_dsn, "a")
    try:
        b = instance(notes, state_b, pg_dsn, "b")
    except BaseException:
        a.stop()
        raise
    to_a, to_b = Raw(a, token), Raw(b, token)
    try:
        first = call(to_a, {"uri": "file:///notes/cross.md"})
        assert first["resultType"] == "input_required", first
        ((key, _),) = first["inputRequests"].items()
        answer = {
            "inputResponses": {
                key: {"action": "accept", "content": {"note_id": "cross.md", "confirm": True}}
            },
            "requestState": first["requestState"],
        }
        done = call(to_b, {"uri": "file:///notes/cross.md"}, **answer)
        assert done.get("isError") is not True, done
        assert done["structuredContent"]["deleted"] is True and not note.exists()
        note.write_text("# Cross\n\na new note under the old name\n")
        os.chown(note, UID, GID)
        replay = call(to_a, {"uri": "file:///notes/cross.md"}, **answer)
        assert replay.get("isError") is True and note.exists(), replay
        assert "Landlock ABI" in a.stderr() and "Landlock ABI" in b.stderr()
    finally:
        to_a.close()
        to_b.close()
        a.stop()
        b.stop()
    assert token not in a.stderr() + b.stderr()
    assert PASSWORD not in a.stderr() + b.stderr()

    audit = docker(
        *NETWORKED, state_mount, "-e", f"FSNOTES_DATABASE={pg_dsn}", "--entrypoint", "fsnotes",
        IMAGE, "audit", "--json",
    )  # fmt: skip
    assert audit.returncode == 0, audit.stderr
    rows = [json.loads(line) for line in audit.stdout.splitlines() if line.strip()]
    deletes = [r for r in rows if r["action"] == "delete" and r["path"] == "cross.md"]
    done_rows = [r for r in deletes if r["outcome"] == "done"]
    assert [(r["instance"], r["principal"], r["confirmed_by"]) for r in done_rows] == [
        ("b", "ada", "ada")
    ], deletes
