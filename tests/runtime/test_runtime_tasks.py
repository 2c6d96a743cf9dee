"""The task host on its own, over the real dispatcher and a real SQLite task store: a call
that ends soon is answered plainly, one that says it is long (or runs past ``after_s``)
becomes a task; MRTR before a task, input inside one; a protocol error ends it failed, a
tool error completed; a cancel ends it cancelled; outside :meth:`TaskHost.serving` no call
becomes a task; the server's stop ends running tasks as failed."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from fsnotes.protocol import App, RequestContext, Tool, ToolAnnotations, ToolResult
from fsnotes.protocol.calls import Call
from fsnotes.protocol.dispatch import Dispatcher, Reply
from fsnotes.protocol.inbound import Request
from fsnotes.protocol.registry import JSONObject
from fsnotes.runtime.tasks import STOPPED, TaskHost
from fsnotes.state.shared import SharedState
from fsnotes.state.tasks import SQLTaskStore, open_tasks
from tests.protocol.protocol_harness import meta
from tests.servers import conformance_tasks

pytestmark = pytest.mark.anyio

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}


class Sleep(BaseModel):
    seconds: float = 0.0


async def unannounced(ctx: RequestContext, args: Sleep) -> ToolResult:
    """Never says it is long: only the measured rule can make it a task."""
    await anyio.sleep(args.seconds)
    return ToolResult(text=f"slept {args.seconds:g} s")


class Channel:
    closed = False

    def __init__(self) -> None:
        self.sent: list[JSONObject] = []

    async def send(self, message: JSONObject) -> None:
        self.sent.append(message)

    async def ask(self, method: str, params: JSONObject | None, timeout: float) -> None:
        return None


def store(tmp_path: Path, stale_after: float = 30.0) -> SQLTaskStore:
    shared = SharedState(tmp_path)
    return open_tasks(shared, clock=time.time, stale_after=stale_after, lost=STOPPED)


def app_with(host: TaskHost) -> App:
    extra = Tool(
        name="unannounced",
        title="unannounced",
        description="sleeps",
        input_model=Sleep,
        output_model=None,
        annotations=ToolAnnotations(),
        handler=unannounced,
        task_support="optional",
    )
    base = App(name="t", version="1", title=None, instructions=None, tools=[extra])
    return dataclasses.replace(base, tools=[extra, *conformance_tasks.tools()], tasks=host)


@asynccontextmanager
async def served(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[Dispatcher, TaskHost]]:
    host = TaskHost(store(tmp_path), **{"after_s": 0.5, "beat_s": 0.1, **options})
    async with host.serving():
        yield Dispatcher(app_with(host)), host


async def ask(
    d: Dispatcher, method: str, params: dict[str, Any], caps: Any = None, who: str = "ada"
) -> dict[str, Any]:
    body = {**params, "_meta": meta(TASKS if caps is None else caps)}
    routed = d.route(Request(1, method, body), session=None, principal=who)
    message = routed.message if isinstance(routed, Reply) else None
    if isinstance(routed, Call):
        message = await d.respond(routed, Channel())
    assert message is not None
    return dict(message)


async def tool(d: Dispatcher, name: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    answer = await ask(d, "tools/call", {"name": name, "arguments": args}, **kw)
    return dict(answer["result"])


async def until_ended(d: Dispatcher, task_id: str, who: str = "ada") -> dict[str, Any]:
    with anyio.fail_after(10):
        while True:
            got = (await ask(d, "tasks/get", {"taskId": task_id}, who=who))["result"]
            if got["status"] in ("completed", "failed", "cancelled"):
                return dict(got)
            await anyio.sleep(0.05)


async def test_a_quick_call_is_answered_plainly_and_a_long_one_becomes_a_task(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as (d, _):
        quick = await tool(d, "unannounced", {"seconds": 0.0})
        assert quick["resultType"] == "complete" and quick["content"][0]["text"] == "slept 0 s"
        measured = await tool(d, "unannounced", {"seconds": 1.5})  # past after_s: measured
        assert measured["resultType"] == "task" and measured["status"] == "working"
        final = await until_ended(d, measured["taskId"])
        assert final["result"]["content"][0]["text"] == "slept 1.5 s"
        said = await tool(d, "slow_compute", {"seconds": 0.3})  # says so: a task at once
        assert said["resultType"] == "task"
        assert said["statusMessage"] == "computing a result"


async def test_without_the_extension_nothing_is_a_task_and_tasks_methods_are_refused(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as (d, _):
        plain = await tool(d, "unannounced", {"seconds": 0.8}, caps={})
        assert plain["resultType"] == "complete"
        required = await ask(d, "tools/call", {"name": "failing_job", "arguments": {}}, caps={})
        assert required["error"]["code"] == -32021
        for method in ("tasks/get", "tasks/cancel"):
            refused = await ask(d, method, {"taskId": "x"}, caps={})
            assert refused["error"]["code"] == -32021
        for removed in ("tasks/result", "tasks/list"):
            assert (await ask(d, removed, {"taskId": "x"}))["error"]["code"] == -32601


async def test_tool_errors_complete_and_protocol_errors_fail(tmp_path: Path) -> None:
    async with served(tmp_path) as (d, _):
        tool_error = await until_ended(d, (await tool(d, "failing_job", {}))["taskId"])
        assert tool_error["status"] == "completed" and tool_error["result"]["isError"] is True
        broken = await until_ended(d, (await tool(d, "protocol_error_job", {}))["taskId"])
        assert broken["status"] == "failed" and "result" not in broken
        assert broken["error"]["code"] == -32603


async def test_input_inside_a_task_is_answered_through_tasks_update_key_by_key(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as (d, _):
        task_id = (await tool(d, "multi_input", {}))["taskId"]
        with anyio.fail_after(5):
            while True:
                got = (await ask(d, "tasks/get", {"taskId": task_id}))["result"]
                if got["status"] == "input_required":
                    break
                await anyio.sleep(0.02)
        assert set(got["inputRequests"]) == {"first", "second"}
        accept = {"action": "accept", "content": {"confirm": True}}
        update = {"taskId": task_id, "inputResponses": {"first": accept}}
        ack = (await ask(d, "tasks/update", update))["result"]
        assert set(ack) == {"resultType", "_meta"}
        got = (await ask(d, "tasks/get", {"taskId": task_id}))["result"]
        assert got["status"] == "input_required" and set(got["inputRequests"]) == {"second"}
        update = {"taskId": task_id, "inputResponses": {"second": accept}}
        await ask(d, "tasks/update", update)
        final = await until_ended(d, task_id)
        assert final["result"]["content"][0]["text"] == "Answered: first, second"


async def test_mrtr_first_then_a_task_whose_result_has_the_answer(tmp_path: Path) -> None:
    async with served(tmp_path) as (d, _):
        first = await tool(d, "test_tool_with_task", {})
        assert first["resultType"] == "input_required" and "taskId" not in first
        answer = {"user_name": {"action": "accept", "content": {"name": "Alice"}}}
        params = {"name": "test_tool_with_task", "arguments": {}, "inputResponses": answer}
        second = (await ask(d, "tools/call", params))["result"]
        assert second["resultType"] == "task" and "requestState" not in second
        final = await until_ended(d, second["taskId"])
        assert "Alice" in final["result"]["content"][0]["text"]


async def test_a_cancel_ends_the_task_cancelled_and_others_see_nothing(tmp_path: Path) -> None:
    async with served(tmp_path) as (d, _):
        task_id = (await tool(d, "slow_compute", {"seconds": 30}))["taskId"]
        foreign = await ask(d, "tasks/cancel", {"taskId": task_id}, who="bob")
        unknown = await ask(d, "tasks/cancel", {"taskId": "no-such-task"}, who="bob")
        assert foreign["error"] == unknown["error"] and foreign["error"]["code"] == -32602
        assert "result" in await ask(d, "tasks/cancel", {"taskId": task_id})
        assert (await until_ended(d, task_id))["status"] == "cancelled"


async def test_outside_serving_no_call_becomes_a_task(tmp_path: Path) -> None:
    host = TaskHost(store(tmp_path), after_s=0.1)
    d = Dispatcher(app_with(host))
    plain = await tool(d, "slow_compute", {"seconds": 0.3})
    assert plain["resultType"] == "complete"


async def test_a_server_stop_ends_running_tasks_failed(tmp_path: Path) -> None:
    async with served(tmp_path) as (d, _):
        task_id = (await tool(d, "slow_compute", {"seconds": 30}))["taskId"]
    # The host stopped (the server's lifespan ended): the task is not left "working".
    d2 = Dispatcher(app_with(TaskHost(store(tmp_path))))
    final = (await ask(d2, "tasks/get", {"taskId": task_id}))["result"]
    assert final["status"] == "failed" and final["error"] == STOPPED
