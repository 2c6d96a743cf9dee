"""URL-mode extras of the core: -32042 (2025-11-25 only), the completion notification, a
handler's own capability error in both eras, and the App lifespan hook of the transport."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from fsnotes.protocol import (
    App,
    ElicitURL,
    MissingCapability,
    RequestContext,
    Tool,
    ToolAnnotations,
    ToolResult,
    URLElicitationRequired,
)
from fsnotes.runtime.connection import ServerConnection
from fsnotes.transport.stdio import serve_stdio
from tests.protocol.protocol_harness import Harness, meta, request, running

URL_CAPS = {"elicitation": {"url": {}}}
LINK = ElicitURL(message="Open the page", url="http://127.0.0.1:1/setup/x", elicitation_id="el-1")


class NoArgs(BaseModel):
    pass


def app_with(handler: Callable[[RequestContext, BaseModel], Awaitable[Any]], **kw: Any) -> App:
    tool = Tool(
        name="t",
        title="t",
        description="t",
        input_model=NoArgs,
        output_model=None,
        annotations=ToolAnnotations(),
        handler=handler,
    )
    return App(name="x", version="1", title=None, instructions=None, tools=[tool], **kw)


async def legacy(h: Harness, caps: dict[str, Any]) -> None:
    await h.call(
        request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": caps,
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
    )
    h.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})


def tcall(rid: int, **params: Any) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": "t", "arguments": {}, **params})


async def needs_url(ctx: RequestContext, args: BaseModel) -> ToolResult:
    raise URLElicitationRequired([LINK])


@pytest.mark.anyio
async def test_legacy_url_elicitation_required_is_32042_with_the_elicitations() -> None:
    async with running(ServerConnection(app_with(needs_url), principal="unit")) as h:
        await legacy(h, URL_CAPS)
        reply = await h.call(tcall(1))
        assert reply["error"] == {
            "code": -32042,
            "message": "This request requires more information.",
            "data": {
                "elicitations": [
                    {
                        "mode": "url",
                        "message": "Open the page",
                        "url": "http://127.0.0.1:1/setup/x",
                        "elicitationId": "el-1",
                    }
                ]
            },
        }


@pytest.mark.anyio
async def test_32042_is_never_sent_without_the_url_capability_nor_in_the_modern_era() -> None:
    async with running(ServerConnection(app_with(needs_url), principal="unit")) as h:
        await legacy(h, {"elicitation": {}})  # form only
        reply = await h.call(tcall(1))
        assert reply["error"]["code"] == -32600 and "did not declare" in reply["error"]["message"]
        modern = await h.call(tcall(2, _meta=meta(URL_CAPS)))
        assert modern["error"] == {"code": -32603, "message": "Internal error"}
    assert not any(m.get("error", {}).get("code") == -32042 for m in h.out[1:])


@pytest.mark.anyio
async def test_handler_missing_capability_is_32021_modern_and_is_error_legacy() -> None:
    async def handler(ctx: RequestContext, args: BaseModel) -> ToolResult:
        raise MissingCapability("Run: fsnotes grant ...", required={"elicitation": {"url": {}}})

    async with running(ServerConnection(app_with(handler), principal="unit")) as h:
        modern = await h.call(tcall(1, _meta=meta({})))
        assert modern["error"] == {
            "code": -32021,
            "message": "Run: fsnotes grant ...",
            "data": {"requiredCapabilities": {"elicitation": {"url": {}}}},
        }
        await legacy(h, {})
        old = await h.call(tcall(2))
        assert old["result"]["isError"] is True
        assert old["result"]["content"][0]["text"] == "Run: fsnotes grant ..."


@pytest.mark.anyio
async def test_completion_notifier_outlives_its_request_and_is_legacy_only() -> None:
    kept: list[Callable[[], Awaitable[None]] | None] = []

    async def handler(ctx: RequestContext, args: BaseModel) -> ToolResult:
        kept.append(ctx.elicitation_complete_notifier("el-7"))
        return ToolResult(text="started")

    conn = ServerConnection(app_with(handler), principal="unit")
    async with running(conn) as h:
        await h.call(tcall(1, _meta=meta(URL_CAPS)))
        assert kept == [None]  # 2026-07-28 removed the notification
        await legacy(h, URL_CAPS)
        await h.call(tcall(2))
        notify = kept[1]
        assert notify is not None
        await notify()  # after tools/call 2 has been answered
        note = await h.wait_for(lambda m: m.get("method") == "notifications/elicitation/complete")
        assert note == {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": "el-7"},
        }
        conn.client_closed()
        before = len(h.out)
        await notify()
        assert len(h.out) == before  # the client is gone: nothing is written


@pytest.mark.anyio
async def test_stdio_transport_runs_inside_the_app_lifespan() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        events.append("enter")
        try:
            yield
        finally:
            events.append("exit")

    async def handler(ctx: RequestContext, args: BaseModel) -> ToolResult:
        events.append("call")
        return ToolResult(text="ok")

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.write(in_w, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    os.close(in_w)
    try:
        with anyio.fail_after(10):
            await serve_stdio(
                app_with(handler, lifespan=lifespan),
                principal="unit",
                stdin_fd=in_r,
                stdout_fd=out_w,
            )
        assert events == ["enter", "exit"]
        assert b'"id":1' in os.read(out_r, 65536)
    finally:
        for fd in (in_r, out_r, out_w):
            os.close(fd)


@pytest.mark.anyio
async def test_one_completion_notifier_per_elicitation_id_and_connection() -> None:
    kept: list[Any] = []

    async def handler(ctx: RequestContext, args: BaseModel) -> ToolResult:
        kept.append(ctx.elicitation_complete_notifier("same"))
        kept.append(ctx.elicitation_complete_notifier("other"))
        return ToolResult(text="ok")

    async with running(ServerConnection(app_with(handler), principal="unit")) as h:
        await legacy(h, URL_CAPS)
        await h.call(tcall(1))
        await h.call(tcall(2))
    assert kept[0] is kept[2] and kept[1] is kept[3] and kept[0] is not kept[1]
