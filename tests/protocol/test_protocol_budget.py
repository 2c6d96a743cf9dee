"""The in-flight byte budget: a request is charged what its line holds once parsed from its start
until its task ends (finished or cancelled), answers to our requests are charged to the request
that waits for them, a request past the budget is answered "busy", and a line of too many values
is refused unparsed."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

import anyio
import pytest

from fsnotes.protocol import ElicitForm, InputRequired, RequestContext, ToolResult
from fsnotes.protocol.limits import MAX_IN_FLIGHT_BYTES, MAX_LINE_BYTES, MAX_LINE_VALUES
from fsnotes.protocol.linecost import line_cost
from fsnotes.runtime.connection import Job, ServerConnection
from tests.protocol.protocol_harness import Harness, meta, request, running, sends
from tests.servers.demo_server import build_app

pytestmark = pytest.mark.anyio


def slow(rid: Any, junk: Any = None, steps: int = 100) -> dict[str, Any]:
    params: dict[str, Any] = {
        "_meta": meta(),
        "name": "slow",
        "arguments": {"steps": steps, "delay": 0.01},
    }
    if junk is not None:
        params["junk"] = junk  # ignored by the server, held all the same
    return request(rid, "tools/call", params)


def charge_of(message: Any) -> int:
    """What the harness's line for ``message`` is charged (it sends json.dumps of it)."""
    return line_cost(json.dumps(message).encode()).charge


async def until_released(h: Harness) -> None:
    with anyio.fail_after(3):
        while h.conn.in_flight_bytes:
            await anyio.sleep(0.001)


async def test_a_request_is_charged_while_it_runs_and_gives_it_back_when_it_finishes() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        message = slow(1, "x" * 100_000, steps=5)
        h.feed(message)
        await h.settle()
        assert h.conn.in_flight_bytes == charge_of(message) > 100_000
        assert (await h.response(1))["result"]["content"][0]["text"] == "done 5"
        await until_released(h)


async def test_a_cancelled_request_gives_its_bytes_back_when_its_task_ends() -> None:
    # A cancelled handler in a worker thread runs on until the thread returns, holding its
    # arguments: the bytes come back then, not when the cancel arrives.
    release = threading.Event()

    async def blocking(ctx: RequestContext, args: Any) -> ToolResult:
        await anyio.to_thread.run_sync(release.wait)
        return ToolResult(text="finished")

    app = build_app()
    app.tools = [replace(app.tools[0], name="blocking", handler=blocking)]
    async with running(ServerConnection(app, principal="unit")) as h:
        message = request(
            1,
            "tools/call",
            {"_meta": meta(), "name": "blocking", "arguments": {"text": "x" * 100_000}},
        )
        h.feed(message)
        await h.settle()
        h.feed({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        await h.settle()
        assert h.conn.in_flight == 0
        assert h.conn.in_flight_bytes == charge_of(message)
        release.set()
        await until_released(h)
        assert not any(m.get("id") == 1 for m in h.out)


async def test_a_request_past_the_byte_budget_is_answered_busy_with_its_id() -> None:
    first = slow(1, "x" * 100_000, steps=20)
    budget = charge_of(first) * 3 // 2
    async with running(
        ServerConnection(build_app(), max_in_flight_bytes=budget, principal="unit")
    ) as h:
        h.feed(first)
        busy = await h.call(slow(2, "x" * 100_000))
        assert busy["id"] == 2 and busy["error"]["code"] == -32603
        assert "busy" in busy["error"]["message"] and str(budget) in busy["error"]["message"]
        # Answered at once, not in flight: a ping and a small call still get through.
        assert (await h.call(request(3, "ping")))["result"] == {}
        small = await h.call(slow(4, steps=1))
        assert small["result"]["content"][0]["text"] == "done 1"
        await h.response(1)
        await until_released(h)
        h.feed(slow(5, "x" * 100_000, steps=1))
        assert (await h.response(5))["result"]["content"][0]["text"] == "done 1"


async def test_a_line_of_too_many_values_is_refused_unparsed_without_id() -> None:
    c = ServerConnection(build_app(), principal="unit")
    junk = "[" + "{}," * MAX_LINE_VALUES + "{}]"
    line = json.dumps(slow(1, "@")).replace('"@"', junk).encode()
    assert json.loads(line)["params"]["junk"][0] == {}
    refused = sends(c.receive_line(line))
    assert refused == [
        {
            "jsonrpc": "2.0",
            "error": {
                "code": -32600,
                "message": f"Message too complex: more than {MAX_LINE_VALUES} JSON values in "
                "one line; it was skipped unread",
            },
        }
    ]
    assert c.in_flight == 0 and c.in_flight_bytes == 0
    # The same characters inside a string are one value.
    assert isinstance(c.receive_line(json.dumps(slow(2, junk)).encode())[0], Job)


async def test_the_largest_admissible_line_runs_when_nothing_else_does() -> None:
    # Just under the line limit, with an emoji (4 bytes a character once parsed) and just under
    # the per-line value cap: the most any line can be charged still fits the default budget.
    values = [{"a": {"a": {}}}] * ((MAX_LINE_VALUES - 100) // 6)
    message = slow(1, [values, "a" * (MAX_LINE_BYTES - 200_000) + "\N{GRINNING FACE}"])
    line = json.dumps(message, ensure_ascii=False).encode()
    assert MAX_LINE_BYTES - 100_000 < len(line) <= MAX_LINE_BYTES
    cost = line_cost(line)
    assert MAX_LINE_VALUES - 100 < cost.values <= MAX_LINE_VALUES
    c = ServerConnection(build_app(), principal="unit")
    assert isinstance(c.receive_line(line)[0], Job)
    assert c.in_flight_bytes == cost.charge > 4 * MAX_LINE_BYTES - 1_000_000
    assert cost.charge <= MAX_IN_FLIGHT_BYTES


async def test_an_answer_to_our_request_is_charged_to_the_request_that_waits_for_it() -> None:
    seen: list[int] = []
    conns: list[ServerConnection] = []

    async def ask(ctx: RequestContext, args: Any) -> ToolResult | InputRequired:
        if ctx.input_responses is None:
            form = ElicitForm("Sure?", {"type": "object", "properties": {}})
            return InputRequired(requests={"q": form}, state="asked")
        seen.append(conns[0].in_flight_bytes)  # while the answer is in the handler's hands
        return ToolResult(text="answered")

    app = build_app()
    app.tools = [replace(app.tools[0], name="ask", handler=ask)]
    conns.append(conn := ServerConnection(app, principal="unit"))
    async with running(conn) as h:
        await h.call(init_legacy())
        call = request(1, "tools/call", {"name": "ask", "arguments": {"text": "x"}})
        h.feed(call)
        question = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        answer = {
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "accept", "content": {}, "junk": "y" * 100_000},
        }
        h.feed(answer)
        assert (await h.response(1))["result"]["content"][0]["text"] == "answered"
        assert seen == [charge_of(call) + charge_of(answer)]
        await until_released(h)


async def test_an_answer_past_the_budget_is_dropped_and_the_handler_sees_an_error() -> None:
    call = request(1, "tools/call", {"name": "confirm", "arguments": {"title": "x"}})
    conn = ServerConnection(
        build_app(), max_in_flight_bytes=charge_of(call) + 10_000, principal="unit"
    )
    async with running(conn) as h:
        await h.call(init_legacy())
        h.feed(call)
        question = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        h.feed(
            {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"ok": True}, "junk": "y" * 100_000},
            }
        )
        result = (await h.response(1))["result"]
        assert result["isError"] is True and "answer dropped" in result["content"][0]["text"]
        await until_released(h)


async def roots_seen(h: Harness, rid: int) -> list[str]:
    """The roots this session keeps, as the demo tool reports them."""
    reply = await h.call(request(rid, "tools/call", {"name": "roots_seen", "arguments": {}}))
    return list(reply["result"]["structuredContent"]["roots"])


async def test_a_roots_answer_is_charged_until_it_is_handled_and_dropped_past_the_budget() -> None:
    async with running(
        ServerConnection(build_app(), max_in_flight_bytes=50_000, principal="unit")
    ) as h:
        await h.call(init_legacy(caps={"roots": {"listChanged": True}}))
        h.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ask = await h.wait_for(lambda m: m.get("method") == "roots/list")
        roots = [{"uri": "file:///one", "name": "n" * 10_000}]
        h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": roots}})
        await h.settle()
        await until_released(h)
        assert await roots_seen(h, 10) == ["file:///one"]
        h.feed({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        again = await h.wait_for(lambda m: m.get("method") == "roots/list" and m["id"] != ask["id"])
        roots = [{"uri": "file:///two", "name": "n" * 100_000}]
        h.feed({"jsonrpc": "2.0", "id": again["id"], "result": {"roots": roots}})
        await h.settle()
        assert h.conn.in_flight_bytes == 0
        assert await roots_seen(h, 11) == ["file:///one"]  # the answer was dropped


async def test_each_member_of_a_batch_is_charged_for_itself() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await h.call(init_legacy("2025-03-26"))
        big, small = slow(1, "x" * 500_000, steps=50), slow(2, steps=1)
        line = json.dumps([big, small]).encode()
        h.perform(h.conn.receive_line(line))
        await h.settle()
        assert 500_000 < h.conn.in_flight_bytes < line_cost(line).charge + 1000
        await h.response(2)
        await h.settle()
        # The small member gave back its own bytes only; the big one still holds its string.
        assert 500_000 < h.conn.in_flight_bytes < 510_000 + 128 * 30


async def test_answered_at_once_requests_and_notifications_are_never_charged() -> None:
    async with running(ServerConnection(build_app(), max_in_flight_bytes=1, principal="unit")) as h:
        junk = "x" * 1_000_000
        pong = await h.call(request(1, "ping", {"junk": junk}))
        assert pong["result"] == {}
        h.feed({"jsonrpc": "2.0", "method": "notifications/unknown", "params": {"junk": junk}})
        listed = await h.call(request(2, "tools/list", {"_meta": meta(), "junk": junk}))
        assert listed["result"]["tools"]
        assert h.conn.in_flight_bytes == 0


def init_legacy(version: str = "2025-11-25", caps: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": {"elicitation": {}} if caps is None else caps,
        "clientInfo": {"name": "t", "version": "1"},
    }
    return request(0, "initialize", params)


async def test_connections_sharing_a_budget_share_one_bound() -> None:
    # The HTTP transport shares one budget between its sessions: what one client's requests
    # hold counts against every other's, so the number of clients does not multiply it.
    from fsnotes.runtime.budget import InFlightBudget

    message = slow(1, "x" * 100_000, steps=5)
    budget = InFlightBudget(charge_of(message) + 10_000)
    first = ServerConnection(build_app(), principal="unit", budget=budget)
    second = ServerConnection(build_app(), principal="unit", budget=budget)
    async with running(first) as a, running(second) as b:
        a.feed(message)
        await a.settle()
        assert budget.held == charge_of(message) == second.in_flight_bytes
        b.feed(slow(2, "y" * 20_000, steps=1))
        refused = await b.response(2)
        assert refused["error"]["code"] == -32603 and "Server busy" in refused["error"]["message"]
        assert (await a.response(1))["result"]["content"][0]["text"] == "done 5"
        await until_released(a)
        b.feed(slow(3, "y" * 20_000, steps=1))
        assert (await b.response(3))["result"]["content"][0]["text"] == "done 1"
    assert budget.held == 0
