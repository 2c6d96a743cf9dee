"""One built server, many principals: each request acts for the principal its transport gave.

Nothing about the principal lives in the service, the delete flow or the setup flow: two
connections to the same server (as two HTTP sessions will be) see their own grants, and a
confirmation sealed for one principal is refused for another.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from fsnotes.app.config import load
from fsnotes.app.server import Server, build
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import Harness, meta, request, running

pytestmark = pytest.mark.anyio

FORM = {"elicitation": {"form": {}}}


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[Server, Path, Path]]:
    """``team`` is granted to ada and bob (delete), ``diary`` to ada only."""
    team, diary = tmp_path / "team", tmp_path / "diary"
    team.mkdir()
    diary.mkdir()
    (team / "plan.md").write_text("# Plan\n\nShip it.\n")
    (diary / "secret.md").write_text("# Secret\n\nOnly for ada.\n")
    config = tmp_path / "fsnotes.toml"
    config.write_text(
        f'principal = "ada"\n'
        f'[[workspace]]\nname = "team"\npath = "{team}"\n'
        f'[[workspace]]\nname = "diary"\npath = "{diary}"\n'
        '[[grant]]\nprincipal = "ada"\nworkspace = "team"\naccess = "delete"\n'
        '[[grant]]\nprincipal = "ada"\nworkspace = "diary"\naccess = "delete"\n'
        '[[grant]]\nprincipal = "bob"\nworkspace = "team"\naccess = "delete"\n'
    )
    server = build(
        load(
            config_file=str(config),
            state_dir=str(tmp_path / "state"),
            require_workspace=False,
            env={},
        )
    )
    yield server, team, diary
    server.close()


def tool(rid: int, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    params = {"_meta": meta(FORM), "name": name, "arguments": arguments, **extra}
    return request(rid, "tools/call", params)


async def result(h: Harness, rid: int, name: str, args: dict[str, Any], **extra: Any) -> Any:
    return (await h.call(tool(rid, name, args, **extra), timeout=10))["result"]


async def test_two_connections_to_one_server_each_see_their_own_principals_grants(
    shared: tuple[Server, Path, Path],
) -> None:
    server, _team, diary = shared
    async with (
        running(ServerConnection(server.app, principal="ada")) as ada,
        running(ServerConnection(server.app, principal="bob")) as bob,
    ):
        seen_by_ada, seen_by_bob = await _both(
            result(ada, 1, "workspaces_list", {}), result(bob, 1, "workspaces_list", {})
        )
        names = lambda r: sorted(w["name"] for w in r["structuredContent"]["workspaces"])  # noqa: E731
        assert names(seen_by_ada) == ["diary", "team"]
        assert names(seen_by_bob) == ["team"]

        uri = (diary / "secret.md").as_uri()
        read_by_bob = await result(bob, 2, "notes_read", {"uri": uri})
        assert read_by_bob["isError"] is True
        assert "Only for ada" not in str(read_by_bob)
        read_by_ada = await result(ada, 2, "notes_read", {"uri": uri})
        assert "Only for ada" in read_by_ada["structuredContent"]["content"]

        found = await result(bob, 3, "notes_search", {"query": "secret"})
        assert found["structuredContent"]["results"] == []
        listed = await ada.call(request(4, "resources/list", {"_meta": meta()}), timeout=10)
        assert any(r["uri"] == uri for r in listed["result"]["resources"])
        listed = await bob.call(request(4, "resources/list", {"_meta": meta()}), timeout=10)
        assert all(r["uri"] != uri for r in listed["result"]["resources"])


async def test_a_delete_confirmed_for_one_principal_cannot_be_completed_by_another(
    shared: tuple[Server, Path, Path],
) -> None:
    server, team, _diary = shared
    note = team / "plan.md"
    args = {"uri": note.as_uri()}
    async with (
        running(ServerConnection(server.app, principal="ada")) as ada,
        running(ServerConnection(server.app, principal="bob")) as bob,
    ):
        first = await result(ada, 1, "notes_delete", args)
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        answer = {key: {"action": "accept", "content": {"note_id": "plan.md", "confirm": True}}}
        # Bob holds the same grant on this workspace, so only the binding stands in his way.
        stolen = await result(
            bob, 2, "notes_delete", args, inputResponses=answer, requestState=first["requestState"]
        )
        assert stolen["isError"] is True
        assert "different request" in stolen["content"][0]["text"]
        assert note.exists()
        done = await result(
            ada, 3, "notes_delete", args, inputResponses=answer, requestState=first["requestState"]
        )
        assert done["structuredContent"]["deleted"] is True
        assert not note.exists()


async def test_each_kept_version_names_the_principal_of_the_request_that_replaced_it(
    shared: tuple[Server, Path, Path],
) -> None:
    server, team, _diary = shared
    note = (team / "plan.md").as_uri()
    async with (
        running(ServerConnection(server.app, principal="ada")) as ada,
        running(ServerConnection(server.app, principal="bob")) as bob,
    ):
        await result(ada, 1, "notes_update", {"uri": note, "content": "by ada\n"})
        await result(bob, 1, "notes_update", {"uri": note, "content": "by bob\n"})
        listed = await result(ada, 2, "notes_history", {"uri": note})
        versions = listed["structuredContent"]["versions"]
        assert [v["principal"] for v in versions] == ["bob", "ada"]
        first = await result(bob, 2, "notes_delete", {"uri": note})
        (key,) = first["inputRequests"]
        answer = {key: {"action": "accept", "content": {"note_id": "plan.md", "confirm": True}}}
        await result(
            bob,
            3,
            "notes_delete",
            {"uri": note},
            inputResponses=answer,
            requestState=first["requestState"],
        )
        listed = await result(bob, 4, "notes_history", {"uri": note})
        newest = listed["structuredContent"]["versions"][0]
        assert (newest["principal"], newest["tool"]) == ("bob", "notes_delete")
        # ada restores it: the note comes back, by her request
        back = await result(ada, 3, "notes_restore", {"uri": note, "version": newest["version"]})
        assert back["structuredContent"]["created"] is True
        assert (team / "plan.md").read_text() == "by bob\n"


async def _both(a: Any, b: Any) -> tuple[Any, Any]:
    """Run two awaitables at once (the two principals' calls overlap in one server)."""
    out: list[Any] = [None, None]

    async def put(i: int, aw: Any) -> None:
        out[i] = await aw

    async with anyio.create_task_group() as tg:
        tg.start_soon(put, 0, a)
        tg.start_soon(put, 1, b)
    return out[0], out[1]


async def test_a_ceiling_given_with_the_principal_lowers_its_grants_and_a_plain_name_has_none(
    shared: tuple[Server, Path, Path],
) -> None:
    server, team, _diary = shared
    async with (
        running(ServerConnection(server.app, principal="ada", ceiling="read")) as reader,
        running(ServerConnection(server.app, principal="ada")) as full,
    ):
        listed = await result(reader, 1, "workspaces_list", {})
        access = {w["name"]: w["access"] for w in listed["structuredContent"]["workspaces"]}
        assert access == {"team": "read", "diary": "read"}
        made = await result(
            reader, 2, "notes_create",
            {"workspaceUri": team.as_uri(), "path": "r.md", "content": "x"},
        )  # fmt: skip
        assert made["isError"] is True and not (team / "r.md").exists()
        assert "'read'" in made["content"][0]["text"]

        listed = await result(full, 1, "workspaces_list", {})
        access = {w["name"]: w["access"] for w in listed["structuredContent"]["workspaces"]}
        assert access == {"team": "delete", "diary": "delete"}
        made = await result(
            full, 2, "notes_create",
            {"workspaceUri": team.as_uri(), "path": "f.md", "content": "x"},
        )  # fmt: skip
        assert made["isError"] is False and (team / "f.md").exists()
