"""Tool results with content blocks of any kind (image, audio, embedded resource), and sampling
(``sampling/createMessage``) as an input request in both eras: an MRTR input request in
2026-07-28, a live request from the legacy adapter in 2025-11-25. Driven through the core with
no I/O."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fsnotes.protocol import (
    App,
    CreateMessage,
    InputRequired,
    RequestContext,
    Tool,
    ToolAnnotations,
    ToolResult,
)
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import Harness, meta, request, running

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0g"
BLOCKS: list[dict[str, Any]] = [
    {"type": "text", "text": "three kinds:"},
    {"type": "image", "data": PNG, "mimeType": "image/png"},
    {"type": "audio", "data": "UklGRiYAAABXQVZF", "mimeType": "audio/wav"},
    {
        "type": "resource",
        "resource": {"uri": "test://r", "mimeType": "application/json", "text": '{"a":1}'},
    },
]
QUESTION = CreateMessage(
    messages=({"role": "user", "content": {"type": "text", "text": "Capital of France?"}},),
    max_tokens=100,
)
ANSWER = {
    "role": "assistant",
    "content": {"type": "text", "text": "Paris"},
    "model": "m",
    "stopReason": "endTurn",
}


class NoArgs(BaseModel):
    pass


async def media(ctx: RequestContext, args: NoArgs) -> ToolResult:
    return ToolResult(content=BLOCKS)


async def ask_model(ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
    answer = (ctx.input_responses or {}).get("q")
    if not isinstance(answer, dict):
        return InputRequired(requests={"q": QUESTION})
    return ToolResult(text=f"model said {answer['content']['text']}")


def app() -> App:
    def tool(name: str, handler: Any) -> Tool[Any, Any]:
        return Tool(name, name, f"{name} for tests", NoArgs, None, ToolAnnotations(), handler)

    return App("t", "1", None, None, [tool("media", media), tool("ask_model", ask_model)])


def call(rid: Any, name: str, **params: Any) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": {}, **params})


async def legacy(h: Harness, caps: dict[str, Any]) -> None:
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": caps,
        "clientInfo": {"name": "t", "version": "1"},
    }
    await h.call(request(0, "initialize", init))
    h.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_content_blocks_of_every_kind_are_sent_as_the_handler_gave_them(era: str) -> None:
    async with running(ServerConnection(app(), principal="unit")) as h:
        if era == "legacy":
            await legacy(h, {})
            result = (await h.call(call(1, "media")))["result"]
        else:
            result = (await h.call(call(1, "media", _meta=meta())))["result"]
            assert result.pop("resultType") == "complete"
            result.pop("_meta")
        assert result == {"content": BLOCKS, "isError": False}


def test_a_result_gives_text_or_content_blocks_not_both() -> None:
    with pytest.raises(ValueError, match="text or content"):
        ToolResult(text="x", content=BLOCKS)
    with pytest.raises(ValueError, match="type"):
        ToolResult(content=[{"text": "no type"}])


async def test_modern_sampling_is_an_input_request_and_its_answer_reaches_the_handler() -> None:
    caps = {"sampling": {}}
    async with running(ServerConnection(app(), principal="unit")) as h:
        first = (await h.call(call(1, "ask_model", _meta=meta(caps))))["result"]
        assert first["resultType"] == "input_required"
        assert first["inputRequests"] == {
            "q": {
                "method": "sampling/createMessage",
                "params": {"messages": list(QUESTION.messages), "maxTokens": 100},
            }
        }
        retry = call(2, "ask_model", _meta=meta(caps), inputResponses={"q": ANSWER})
        done = (await h.call(retry))["result"]
        assert done["content"] == [{"type": "text", "text": "model said Paris"}]


async def test_modern_sampling_without_the_capability_is_32021_naming_sampling() -> None:
    async with running(ServerConnection(app(), principal="unit")) as h:
        error = (await h.call(call(1, "ask_model", _meta=meta({"elicitation": {}}))))["error"]
        assert error["code"] == -32021
        assert error["data"] == {"requiredCapabilities": {"sampling": {}}}


async def test_legacy_adapter_asks_the_client_to_sample_live_and_calls_the_handler_again() -> None:
    async with running(ServerConnection(app(), principal="unit")) as h:
        await legacy(h, {"sampling": {}})
        h.feed(call(1, "ask_model"))
        ask = await h.wait_for(lambda m: m.get("method") == "sampling/createMessage")
        assert ask["params"] == {"messages": list(QUESTION.messages), "maxTokens": 100}
        h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": ANSWER})
        result = (await h.response(1))["result"]
        assert result == {
            "content": [{"type": "text", "text": "model said Paris"}],
            "isError": False,
        }


async def test_legacy_sampling_without_the_capability_asks_nothing_and_says_why() -> None:
    async with running(ServerConnection(app(), principal="unit")) as h:
        await legacy(h, {"elicitation": {}})
        result = (await h.call(call(1, "ask_model")))["result"]
        assert result["isError"] is True
        assert "sampling" in result["content"][0]["text"]
        assert not any(m.get("method") == "sampling/createMessage" for m in h.out)


async def test_modern_input_response_that_is_not_an_object_is_invalid_params() -> None:
    # S26: InputResponses maps each key to an InputResponse (ElicitResult, CreateMessageResult
    # or ListRootsResult): an object. A number there is a malformed request, not an answer.
    caps = {"sampling": {}}
    async with running(ServerConnection(app(), principal="unit")) as h:
        bad = call(1, "ask_model", _meta=meta(caps), inputResponses={"q": 12345})
        error = (await h.call(bad))["error"]
        assert error["code"] == -32602 and "'q'" in error["message"]
