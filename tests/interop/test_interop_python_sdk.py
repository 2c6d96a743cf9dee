"""The real demo server process driven by the official Python SDK (`mcp` 2.3.0), both eras."""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the mcp SDK (dev dependency) is not installed")
import mcp.types as types  # noqa: E402
from mcp import Client, ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client import ClientRequestContext  # noqa: E402

from tests.interop.interop_support import server_command  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.interop, pytest.mark.timeout(60)]

warnings.filterwarnings("ignore", category=DeprecationWarning)


def params() -> StdioServerParameters:
    cmd = server_command()
    return StdioServerParameters(command=cmd[0], args=cmd[1:])


class Recorder:
    """Client callbacks that answer like a person who says yes, and remember what they saw."""

    def __init__(self) -> None:
        self.elicitations: list[Any] = []
        self.progress: list[float] = []
        self.roots_asked = 0

    async def elicit(
        self, ctx: ClientRequestContext, p: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.elicitations.append(p)
        if isinstance(p, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"ok": True})

    async def roots(self, ctx: ClientRequestContext) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/ada/notes", name="notes")])

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append(progress)


def text_of(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_session_initialize_legacy_tools_progress_and_live_elicitation() -> None:
    rec = Recorder()
    async with (
        stdio_client(params()) as (read, write),
        ClientSession(
            read, write, elicitation_callback=rec.elicit, list_roots_callback=rec.roots
        ) as session,
    ):
        init = await session.initialize()
        assert init.protocol_version == "2025-11-25"
        assert init.server_info.name == "fsnotes-demo"
        tools = await session.list_tools()
        assert [t.name for t in tools.tools][:3] == ["echo", "add", "confirm"]
        echoed = await session.call_tool("echo", {"text": "héllo"})
        assert echoed.structured_content == {"text": "héllo"} and not echoed.is_error
        slow = await session.call_tool(
            "slow", {"steps": 3, "delay": 0.01}, progress_callback=rec.on_progress
        )
        assert text_of(slow) == "done 3"
        confirmed = await session.call_tool("confirm", {"title": "groceries"})
        assert confirmed.structured_content == {"deleted": True}
        assert (
            len(rec.elicitations) == 1 and rec.elicitations[0].message == "Delete note 'groceries'?"
        )
        # Roots were pushed after notifications/initialized: the server asked and kept them.
        with anyio.fail_after(5):
            while True:
                seen = await session.call_tool("roots_seen", {})
                if seen.structured_content == {"roots": ["file:///home/ada/notes"]}:
                    break
                await anyio.sleep(0.05)
        assert rec.roots_asked >= 1
        bad = await session.call_tool("add", {"a": 1, "b": -1})
        assert bad.is_error and "- b:" in text_of(bad)


async def test_session_discover_modern_and_manual_input_required_loop() -> None:
    rec = Recorder()
    async with (
        stdio_client(params()) as (read, write),
        ClientSession(read, write, elicitation_callback=rec.elicit) as session,
    ):
        discovered = await session.discover()
        assert "2026-07-28" in discovered.supported_versions
        assert session.protocol_version == "2026-07-28"
        who = await session.call_tool("whoami", {})
        assert who.structured_content is not None and who.structured_content["era"] == "modern"
        result = await session.call_tool("confirm", {"title": "x"}, allow_input_required=True)
        rounds = 0
        while isinstance(result, types.InputRequiredResult):
            rounds += 1
            responses: dict[str, Any] = {}
            for key, req in (result.input_requests or {}).items():
                ctx = ClientRequestContext(session=session, request_id=f"mrtr-{key}")
                responses[key] = await session.dispatch_input_request(ctx, req)
            result = await session.call_tool(
                "confirm",
                {"title": "x"},
                input_responses=responses,
                request_state=result.request_state,
                allow_input_required=True,
            )
        assert rounds == 1
        assert result.structured_content == {"deleted": True}


async def test_client_auto_mode_runs_modern_with_automatic_elicitation_round_trip() -> None:
    rec = Recorder()
    async with Client(params(), mode="auto", elicitation_callback=rec.elicit) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("confirm", {"title": "auto"})
        assert result.structured_content == {"deleted": True}
        url = await client.call_tool("visit", {})
        assert text_of(url) == "url accept"
        # In 2026-07-28 the URL elicitation carries no elicitationId.
        url_params = [p for p in rec.elicitations if isinstance(p, types.ElicitRequestURLParams)]
        assert url_params and url_params[0].elicitation_id is None


async def test_client_legacy_mode_url_elicitation_has_an_id() -> None:
    rec = Recorder()
    async with Client(params(), mode="legacy", elicitation_callback=rec.elicit) as client:
        assert client.protocol_version == "2025-11-25"
        url = await client.call_tool("visit", {})
        assert text_of(url) == "url accept"
        url_params = [p for p in rec.elicitations if isinstance(p, types.ElicitRequestURLParams)]
        assert url_params and url_params[0].elicitation_id == "demo-1"


async def test_client_without_elicitation_gets_a_clear_answer_in_both_eras() -> None:
    async with Client(params(), mode="legacy") as client:
        result = await client.call_tool("confirm", {"title": "x"})
        assert result.is_error and "cannot ask" in text_of(result)
    async with Client(params(), mode="2026-07-28") as client:
        with pytest.raises(mcp.MCPError) as info:
            await client.call_tool("confirm", {"title": "x"})
        assert info.value.error.code == -32021
