"""Answers waiting to be written: each finished request's answer is held once, encoded, and
charged from then until it is written. Past the budget a large answer is dropped: a request that
only reads runs again once there is room (one at a time), any other is answered "busy". Small
answers are always kept, one answer alone is always kept, and past half the budget the core says
the transport should read no more requests until the backlog drains."""

from __future__ import annotations

import json
import tracemalloc
from dataclasses import replace
from typing import Any

import anyio
import pytest

from fsnotes.protocol import ElicitForm, InputRequired, RequestContext, ToolAnnotations, ToolResult
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import Harness, meta, request, running
from tests.servers.demo_server import build_app

pytestmark = pytest.mark.anyio

SIZE = 1_000_000  # characters of text in each large answer


class BigApp:
    """The demo app plus tools answering ``SIZE`` characters (a fresh string each time):
    ``big`` only reads, ``big_write`` changes things, ``ask_big`` asks the client first."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.app = build_app()

        async def big(ctx: RequestContext, args: Any) -> ToolResult:
            self.runs.append("big")
            return ToolResult(text="".join(["x"] * SIZE))

        async def big_write(ctx: RequestContext, args: Any) -> ToolResult:
            self.runs.append("big_write")
            return ToolResult(text="".join(["x"] * SIZE))

        async def ask_big(ctx: RequestContext, args: Any) -> ToolResult | InputRequired:
            self.runs.append("ask_big")
            if ctx.input_responses is None:
                form = ElicitForm("Sure?", {"type": "object", "properties": {}})
                return InputRequired(requests={"q": form}, state="asked")
            return ToolResult(text="".join(["x"] * SIZE))

        echo = self.app.tools[0]
        writes = ToolAnnotations(read_only=False, destructive=False)
        self.app.tools = [
            *self.app.tools,
            replace(echo, name="big", handler=big),
            replace(echo, name="big_write", handler=big_write, annotations=writes),
            replace(echo, name="ask_big", handler=ask_big),
        ]


def tool_call(rid: Any, name: str, text: str = "", modern: bool = True) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"text": text}}
    if modern:
        params["_meta"] = meta()
    return request(rid, "tools/call", params)


def wire_size(message: dict[str, Any]) -> int:
    """Bytes of ``message`` as the core encodes it (compact, UTF-8, with its newline)."""
    return len(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()) + 1


async def answer_size(h: Harness) -> int:
    """Bytes of one ``big`` answer with an integer id, measured on one written at once."""
    answer = await h.call(tool_call("probe", "big"))
    assert answer["result"]["content"][0]["text"] == "x" * SIZE
    return wire_size(answer) - len(json.dumps("probe")) + len(json.dumps(1))


async def test_answers_past_the_budget_are_computed_again_when_there_is_room() -> None:
    big = BigApp()
    async with running(ServerConnection(big.app, principal="unit")) as h:
        size = await answer_size(h)
        h.conn.max_pending_answer_bytes = 2 * size
        h.stall()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for rid in range(1, 6):
                h.feed(tool_call(rid, "big"))
            await h.settle()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        # Two fit; the other three were dropped and wait, still in flight, to run again.
        assert h.conn.pending_answer_bytes == 2 * size
        assert h.conn.answers_backlogged and h.conn.in_flight == 3
        assert big.runs.count("big") == 6  # the probe and five
        # Held once, as bytes: each answer's dict (another million characters) is already freed,
        # and so are the dropped answers.
        assert held < 1.2 * h.conn.pending_answer_bytes, (held, h.conn.pending_answer_bytes)
        # A small answer is kept even past the budget: it may be the only news of a write.
        h.feed(tool_call(6, "echo", "small"))
        await h.settle()
        assert h.conn.pending_answer_bytes > 2 * size
        assert not any(m.get("id") in range(1, 7) for m in h.out)
        h.resume()
        for rid in range(1, 6):
            assert (await h.response(rid))["result"]["content"][0]["text"] == "x" * SIZE
        assert (await h.response(6))["result"]["structuredContent"] == {"text": "small"}
        assert big.runs.count("big") == 6 + 3  # each dropped answer was computed once more
        assert h.conn.pending_answer_bytes == 0 and h.conn.in_flight == 0


async def test_a_large_answer_past_the_budget_to_a_request_that_changes_things_is_busy() -> None:
    big = BigApp()
    async with running(ServerConnection(big.app, principal="unit")) as h:
        size = await answer_size(h)
        h.conn.max_pending_answer_bytes = 2 * size
        h.stall()
        for rid in range(1, 4):
            h.feed(tool_call(rid, "big_write"))
        await h.settle()
        h.resume()
        for rid in (1, 2):
            assert (await h.response(rid))["result"]["content"][0]["text"] == "x" * SIZE
        error = (await h.response(3))["error"]
        assert error["code"] == -32603 and error["message"] == (
            f"Server busy: this request was carried out, but its {size}-byte answer was dropped: "
            f"{2 * size} bytes of earlier answers are waiting for the client to read them (at "
            f"most {2 * size} are kept)"
        )
        assert big.runs.count("big_write") == 3  # never run twice
        assert h.conn.pending_answer_bytes == 0


async def test_a_request_that_asked_the_client_is_not_run_again_and_is_answered_busy() -> None:
    big = BigApp()
    async with running(ServerConnection(big.app, principal="unit")) as h:
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"},
        }
        await h.call(request(0, "initialize", init))
        size = await answer_size(h)
        h.conn.max_pending_answer_bytes = 2 * size
        h.stall()
        h.feed(tool_call("ask", "ask_big", modern=False))
        question = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        for rid in (1, 2):
            h.feed(tool_call(rid, "big"))
        await h.settle()
        h.feed({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept"}})
        await h.settle()
        h.resume()
        assert "busy" in (await h.response("ask"))["error"]["message"]
        assert big.runs.count("ask_big") == 2  # asked, answered; never asked again


async def test_one_answer_larger_than_the_budget_is_kept_when_nothing_else_waits() -> None:
    big = BigApp()
    async with running(
        ServerConnection(big.app, max_pending_answer_bytes=1000, principal="unit")
    ) as h:
        h.stall()
        h.feed(tool_call(1, "big"))
        await h.settle()
        assert h.conn.pending_answer_bytes > SIZE and h.conn.answers_backlogged
        h.feed(tool_call(2, "big"))
        await h.settle()
        assert h.conn.in_flight == 1  # dropped, waiting to run again
        h.resume()
        for rid in (1, 2):
            assert (await h.response(rid))["result"]["content"][0]["text"] == "x" * SIZE


async def test_a_request_waiting_to_run_again_can_be_cancelled() -> None:
    big = BigApp()
    async with running(ServerConnection(big.app, principal="unit")) as h:
        size = await answer_size(h)
        h.conn.max_pending_answer_bytes = 2 * size
        h.stall()
        for rid in range(1, 4):
            h.feed(tool_call(rid, "big"))
        await h.settle()
        assert h.conn.in_flight == 1
        h.feed({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
        await h.settle()
        h.resume()
        await h.response(1)
        await h.response(2)
        await h.settle()
        assert not any(m.get("id") == 3 for m in h.out)
        assert big.runs.count("big") == 1 + 3
        assert h.conn.in_flight == 0 and h.conn.in_flight_bytes == 0


async def test_reading_may_go_on_once_the_backlog_is_under_half_the_budget() -> None:
    big = BigApp()
    async with running(ServerConnection(big.app, principal="unit")) as h:
        size = await answer_size(h)
        h.conn.max_pending_answer_bytes = 3 * size
        drained: list[int] = []

        async def reader() -> None:
            await h.conn.answers_drained()
            drained.append(h.conn.pending_answer_bytes)

        h.stall()
        h.feed(tool_call(1, "big"))
        await h.settle()
        assert not h.conn.answers_backlogged  # a third of the budget: reading goes on
        h.feed(tool_call(2, "big"))
        await h.settle()
        assert h.conn.answers_backlogged  # two thirds
        h.tg.start_soon(reader)
        await h.settle()
        assert drained == []
        h.resume()
        with anyio.fail_after(3):
            while not drained:
                await anyio.sleep(0.001)
        assert drained[0] * 2 < h.conn.max_pending_answer_bytes
        await h.response(2)
        assert h.conn.pending_answer_bytes == 0
