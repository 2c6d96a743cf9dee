"""The request runner on its own: admission against the count and byte budgets, cancellation
(before and while a job runs), our request to the client answered through the runner's one
table, and the client gone (EOF) while a job waits for it.

The calls come from the real dispatcher and the demo app's real handlers; the peer records
what a transport would write.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from fsnotes.protocol.calls import Call
from fsnotes.protocol.dispatch import Dispatcher, Reply
from fsnotes.protocol.inbound import Request
from fsnotes.protocol.registry import JSONObject
from fsnotes.protocol.session import Session
from fsnotes.protocol.wire import Fault
from fsnotes.runtime.answers import AnswerBudget
from fsnotes.runtime.budget import InFlightBudget
from fsnotes.runtime.runner import Runner
from tests.protocol.protocol_harness import meta
from tests.servers.demo_server import build_app

pytestmark = pytest.mark.anyio

FORM_CAPS = {"elicitation": {"form": {}}}


class Recorder:
    """A :class:`~fsnotes.runtime.runner.Peer` that keeps what it was given, as the wire
    would carry it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.answers: list[tuple[dict[str, Any], int | None]] = []

    async def send(self, message: JSONObject) -> None:
        self.sent.append(json.loads(json.dumps(message)))

    async def answer(self, line: bytes, error_code: int | None) -> None:
        self.answers.append((json.loads(line), error_code))

    def methods(self) -> list[str]:
        return [m.get("method", "") for m in self.sent]

    async def sent_one(self, method: str) -> dict[str, Any]:
        with anyio.fail_after(5):
            while True:
                for message in self.sent:
                    if message.get("method") == method:
                        return message
                await anyio.sleep(0.005)


def make_runner(
    *, max_in_flight: int = 8, budget_bytes: int = 1 << 20, input_timeout: float = 5.0
) -> Runner:
    return Runner(
        Dispatcher(build_app(), input_timeout=input_timeout),
        budget=InFlightBudget(budget_bytes),
        answers=AnswerBudget(1 << 20),
        max_in_flight=max_in_flight,
    )


def modern_call(runner: Runner, rid: Any, tool: str, args: dict[str, Any]) -> Call:
    params = {"name": tool, "arguments": args, "_meta": meta(None, progressToken=rid)}
    routed = runner.dispatcher.route(
        Request(rid, "tools/call", params), session=None, principal="ada"
    )
    assert isinstance(routed, Call)
    return routed


def legacy_call(runner: Runner, rid: Any, tool: str, args: dict[str, Any]) -> Call:
    init = {"protocolVersion": "2025-11-25", "capabilities": FORM_CAPS, "clientInfo": {}}
    opened = runner.dispatcher.route(Request(0, "initialize", init), session=None, principal="a")
    assert isinstance(opened, Reply) and isinstance(opened.opened, Session)
    params = {"name": tool, "arguments": args}
    routed = runner.dispatcher.route(
        Request(rid, "tools/call", params), session=opened.opened, principal="ada"
    )
    assert isinstance(routed, Call)
    return routed


async def test_a_job_cancelled_while_it_runs_answers_nothing_and_gives_its_bytes_back() -> None:
    runner = make_runner()
    peer = Recorder()
    job = runner.start(modern_call(runner, 1, "slow", {"steps": 100, "delay": 0.02}), 500)
    assert (runner.in_flight, runner.budget.held) == (1, 500)
    async with anyio.create_task_group() as tg:
        tg.start_soon(job.run, peer)
        await peer.sent_one("notifications/progress")
        with anyio.fail_after(2):
            runner.cancel(1)  # as notifications/cancelled names it
            runner.cancel(1)  # a second cancel, or one for a finished id, is ignored
            runner.cancel(99)
    assert peer.answers == []
    assert (runner.in_flight, runner.budget.held) == (0, 0)
    progress = [m for m in peer.sent if m["method"] == "notifications/progress"]
    assert len(progress) < 100


async def test_a_job_cancelled_before_it_runs_ends_at_its_first_wait() -> None:
    runner = make_runner()
    peer = Recorder()
    job = runner.start(modern_call(runner, "x", "slow", {"steps": 5, "delay": 1}), 10)
    runner.cancel("x")
    with anyio.fail_after(2):
        await job.run(peer)
    assert (peer.answers, peer.sent, runner.in_flight, runner.budget.held) == ([], [], 0, 0)


async def test_admission_stops_at_the_count_and_at_the_byte_budget_and_admits_once_freed() -> None:
    runner = make_runner(max_in_flight=2, budget_bytes=100)
    assert runner.has_room(100) and not runner.has_room(101)
    with pytest.raises(Fault, match="charged 101 bytes") as too_big:
        runner.start(modern_call(runner, 1, "echo", {"text": "a"}), 101)
    assert too_big.value.code == -32603 and runner.in_flight == 0
    first = runner.start(modern_call(runner, 1, "echo", {"text": "a"}), 60)
    with pytest.raises(Fault, match="already hold 60 of 100"):
        runner.start(modern_call(runner, 2, "echo", {"text": "b"}), 60)
    second = runner.start(modern_call(runner, 2, "echo", {"text": "b"}), 40)
    assert not runner.has_room(0)
    with pytest.raises(Fault, match="2 requests are already in flight"):
        runner.start(modern_call(runner, 3, "echo", {"text": "c"}), 0)
    peer = Recorder()
    with anyio.fail_after(5):
        await first.run(peer)
        await second.run(peer)
    assert [a["result"]["structuredContent"]["text"] for a, _code in peer.answers] == ["a", "b"]
    assert (runner.in_flight, runner.budget.held, runner.answers.held) == (0, 0, 0)
    assert runner.has_room(100)
    third = runner.start(modern_call(runner, 3, "echo", {"text": "c"}), 100)
    with anyio.fail_after(5):
        await third.run(peer)
    assert peer.answers[-1][0]["id"] == 3 and peer.answers[-1][1] is None


async def test_our_request_to_the_client_is_answered_through_the_runners_one_table() -> None:
    runner = make_runner()
    peer = Recorder()
    job = runner.start(legacy_call(runner, 7, "confirm", {"title": "groceries"}), 50)
    async with anyio.create_task_group() as tg:
        tg.start_soon(job.run, peer)
        ask = await peer.sent_one("elicitation/create")
        assert runner.pending == 1
        assert not runner.answered(ask["id"] + 1, {"jsonrpc": "2.0", "result": {}}, 10)
        reply = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}}
        reply["result"]["content"] = {"ok": True}
        assert runner.answered(ask["id"], reply, 30)
        assert not runner.answered(ask["id"], reply, 30)  # a second answer finds no waiter
    assert runner.pending == 0
    [(answer, code)] = peer.answers
    assert code is None and answer["id"] == 7
    assert answer["result"]["structuredContent"] == {"deleted": True}
    assert (runner.in_flight, runner.budget.held) == (0, 0)
    assert "notifications/cancelled" not in peer.methods()


async def test_an_answer_past_the_byte_budget_is_dropped_and_the_job_hears_why() -> None:
    runner = make_runner(budget_bytes=100)
    peer = Recorder()
    job = runner.start(legacy_call(runner, 1, "confirm", {"title": "x"}), 90)
    async with anyio.create_task_group() as tg:
        tg.start_soon(job.run, peer)
        ask = await peer.sent_one("elicitation/create")
        reply = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}}
        assert runner.answered(ask["id"], reply, 11)  # 90 + 11 > 100
    [(answer, _code)] = peer.answers
    assert answer["result"]["isError"] is True
    assert "answer dropped: 11 bytes" in answer["result"]["content"][0]["text"]
    assert runner.budget.held == 0


async def test_eof_wakes_a_job_waiting_for_the_client_and_nothing_more_is_asked() -> None:
    runner = make_runner()
    peer = Recorder()
    job = runner.start(legacy_call(runner, 1, "confirm", {"title": "x"}), 10)
    async with anyio.create_task_group() as tg:
        tg.start_soon(job.run, peer)
        await peer.sent_one("elicitation/create")
        with anyio.fail_after(2):
            runner.close()  # stdin ended: no answer can come
    [(answer, _code)] = peer.answers
    assert answer["result"]["isError"] is True
    assert "did not answer" in answer["result"]["content"][0]["text"]
    # The client is gone: no notifications/cancelled is written for the unanswered request.
    assert peer.methods() == ["elicitation/create"]
    assert runner.pending == 0
    # A later request that needs input asks nothing: the answer is "no answer" at once.
    later = runner.start(legacy_call(runner, 2, "confirm", {"title": "y"}), 10)
    with anyio.fail_after(2):
        await later.run(peer)
    assert peer.methods() == ["elicitation/create"]
    assert peer.answers[-1][0]["result"]["isError"] is True


async def test_an_unanswered_request_of_ours_is_withdrawn_when_its_wait_ends() -> None:
    runner = make_runner(input_timeout=0.05)
    peer = Recorder()
    job = runner.start(legacy_call(runner, 1, "confirm", {"title": "x"}), 10)
    with anyio.fail_after(5):
        await job.run(peer)
    ask, withdrawn = peer.sent
    assert withdrawn["method"] == "notifications/cancelled"
    assert withdrawn["params"]["requestId"] == ask["id"] and runner.pending == 0


async def test_session_end_cancels_every_job_and_wakes_every_waiter() -> None:
    runner = make_runner()
    peer = Recorder()
    asking = runner.start(legacy_call(runner, 1, "confirm", {"title": "x"}), 10)
    slow = runner.start(modern_call(runner, 2, "slow", {"steps": 100, "delay": 0.05}), 10)
    async with anyio.create_task_group() as tg:
        tg.start_soon(asking.run, peer)
        tg.start_soon(slow.run, peer)
        await peer.sent_one("elicitation/create")
        with anyio.fail_after(2):
            runner.cancel_all()
    assert peer.answers == [] and (runner.in_flight, runner.pending, runner.budget.held) == (
        0,
        0,
        0,
    )


async def test_stateless_jobs_with_one_id_run_side_by_side_and_no_id_cancels_them() -> None:
    runner = make_runner()
    peer = Recorder()
    jobs = [
        runner.start(modern_call(runner, 1, "echo", {"text": t}), 10, keyed=False) for t in "ab"
    ]
    assert runner.in_flight == 2
    runner.cancel(1)  # a stateless request is not known by its id
    with anyio.fail_after(5):
        for job in jobs:
            await job.run(peer)
    assert sorted(a["result"]["structuredContent"]["text"] for a, _ in peer.answers) == ["a", "b"]
