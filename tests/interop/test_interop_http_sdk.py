"""A real `fsnotes serve --http` driven by the official Python SDK client (`mcp` 2.3.0) over
Streamable HTTP, in each negotiation mode: auto (probes server/discover), pinned to 2026-07-28,
and legacy (initialize, a session); a confirmed and a declined delete in each."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the mcp SDK (dev dependency) is not installed")
import httpx2  # noqa: E402
import mcp.types as types  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client import ClientRequestContext  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.transport.http_support import (  # noqa: E402
    HttpServer,
    add_token,
    make_workspace,
    start_fsnotes,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]
warnings.filterwarnings("ignore", category=DeprecationWarning)

MODES = ["auto", "2026-07-28", "legacy"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[HttpServer, str, Path]]:
    workspace, state = make_workspace(tmp_path), tmp_path / "state"
    token = add_token(state, "ada")
    with start_fsnotes(workspace, state) as server:
        yield server, token, workspace


def _elicit(choice: dict[str, Any], seen: list[Any]) -> Any:
    async def on_elicit(
        ctx: ClientRequestContext, p: types.ElicitRequestParams
    ) -> types.ElicitResult:
        seen.append(p)
        return types.ElicitResult(**choice)

    return on_elicit


async def _session(
    server: HttpServer, token: str, mode: str, choice: dict[str, Any], workspace: Path
) -> dict[str, Any]:
    seen: list[Any] = []
    out: dict[str, Any] = {}
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(
            streamable_http_client(server.url, http_client=http),
            mode=mode,  # type: ignore[arg-type]
            elicitation_callback=_elicit(choice, seen),
        ) as client,
    ):
        out["version"] = client.protocol_version
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        read = await client.call_tool("notes_read", {"uri": (workspace / "plan.md").as_uri()})
        out["title"] = (read.structured_content or {}).get("title")
        deleted = await client.call_tool(
            "notes_delete", {"workspaceUri": workspace.as_uri(), "title": "groceries"}
        )
        out["delete"] = deleted.structured_content
        out["asked"] = len(seen)
        out["form"] = isinstance(seen[0], types.ElicitRequestFormParams) if seen else None
    return out


@pytest.mark.parametrize("mode", MODES)
def test_confirmed_delete_through_the_sdk_over_http(
    served: tuple[HttpServer, str, Path], mode: str
) -> None:
    server, token, workspace = served
    choice = {"action": "accept", "content": {"note_id": "groceries.md", "confirm": True}}
    out = anyio.run(_session, server, token, mode, choice, workspace)
    assert out["version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert "notes_delete" in out["tools"] and out["title"] == "Plan"
    assert out["asked"] == 1 and out["form"] is True
    assert out["delete"]["deleted"] is True and out["delete"]["path"] == "groceries.md"
    assert not (workspace / "groceries.md").exists()
    assert (workspace / "garden/groceries-list.md").exists()
    if mode == "legacy":
        assert server.logged("the client ended it (DELETE)"), server.stderr()


@pytest.mark.parametrize("mode", MODES)
def test_declined_delete_through_the_sdk_over_http_keeps_the_note(
    served: tuple[HttpServer, str, Path], mode: str
) -> None:
    server, token, workspace = served
    out = anyio.run(_session, server, token, mode, {"action": "decline"}, workspace)
    assert out["asked"] == 1 and out["delete"]["outcome"] == "declined"
    assert (workspace / "groceries.md").exists()


def test_the_sdk_without_a_token_is_refused(served: tuple[HttpServer, str, Path]) -> None:
    server, _token, _workspace = served

    async def main() -> None:
        async with Client(server.url, mode="auto") as client:
            await client.list_tools()

    with pytest.raises(BaseException) as info:
        anyio.run(main)
    leaves = [info.value]
    while any(isinstance(e, BaseExceptionGroup) for e in leaves):
        leaves = [x for e in leaves for x in getattr(e, "exceptions", [e])]
    assert any(isinstance(e, mcp.MCPError) for e in leaves), leaves
    assert "opened an HTTP session" not in server.stderr()
