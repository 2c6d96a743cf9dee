"""Sessions apart from the process: the principal comes with each request from the transport,
root hints stay in the session that reported them, the legacy adapter's fallback for a form the
host cannot show, and the dispatcher serving a stateless request with no session at all."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from fsnotes.protocol import App, ElicitForm, InputRequired, RequestContext, Tool, ToolAnnotations
from fsnotes.protocol.calls import Call
from fsnotes.protocol.dispatch import Dispatcher, Reply
from fsnotes.protocol.inbound import Request
from fsnotes.protocol.registry import JSONObject, ToolResult
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import MODERN, Harness, meta, request, running
from tests.servers.demo_server import build_app

pytestmark = pytest.mark.anyio

ROOTS_CAPS = {"roots": {"listChanged": True}}


def initialize(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return request(
        0,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": caps or {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )


def call(rid: Any, name: str, **params: Any) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": {}, **params})


async def structured(h: Harness, message: dict[str, Any]) -> Any:
    result = (await h.call(message))["result"]
    assert result["isError"] is False, result
    return result["structuredContent"]


async def report_roots(h: Harness, uris: list[str]) -> None:
    """Answer the roots/list the server sends after notifications/initialized."""
    h.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})
    ask = await h.wait_for(lambda m: m.get("method") == "roots/list")
    roots = [{"uri": u, "name": u.rsplit("/", 1)[-1]} for u in uris]
    h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": roots}})
    await h.settle()


# --- the principal --------------------------------------------------------------------------


async def test_each_connection_serves_its_requests_as_the_principal_its_transport_gave() -> None:
    async with (
        running(ServerConnection(build_app(), principal="ada")) as ada,
        running(ServerConnection(build_app(), principal="bob")) as bob,
    ):
        await ada.call(initialize())
        await bob.call(initialize())
        assert (await structured(ada, call(1, "whoami")))["principal"] == "ada"
        assert (await structured(bob, call(1, "whoami")))["principal"] == "bob"
        # A stateless request on the same process acts for the same configured principal.
        modern = await structured(ada, call(2, "whoami", _meta=meta()))
        assert (modern["era"], modern["principal"]) == ("modern", "ada")
        modern = await structured(bob, call(2, "whoami", _meta=meta()))
        assert (modern["era"], modern["principal"]) == ("modern", "bob")


# --- root hints -----------------------------------------------------------------------------


async def test_one_sessions_roots_never_reach_another_sessions_requests() -> None:
    async with (
        running(ServerConnection(build_app(), principal="ada")) as first,
        running(ServerConnection(build_app(), principal="ada")) as second,
    ):
        await first.call(initialize(ROOTS_CAPS))
        await second.call(initialize(ROOTS_CAPS))
        await report_roots(first, ["file:///srv/first"])
        # The second client has reported no roots yet: it sees none, not the first one's.
        assert await structured(second, call(1, "roots_seen")) == {"roots": []}
        await report_roots(second, ["file:///srv/second"])
        assert await structured(first, call(2, "roots_seen")) == {"roots": ["file:///srv/first"]}
        assert await structured(second, call(2, "roots_seen")) == {"roots": ["file:///srv/second"]}


async def test_a_modern_request_sees_no_session_roots_and_is_not_hinted() -> None:
    async with running(ServerConnection(build_app(), principal="ada")) as h:
        await h.call(initialize(ROOTS_CAPS))
        await report_roots(h, ["file:///srv/legacy"])
        legacy = await structured(h, call(1, "whoami"))
        assert legacy["hinted"] is True
        modern = await structured(h, call(2, "whoami", _meta=meta()))
        assert modern["hinted"] is False
        # Stateless: the session's roots are not the modern request's; it must ask for its own.
        asked = (await h.call(call(3, "roots_seen", _meta=meta(ROOTS_CAPS))))["result"]
        assert asked["resultType"] == "input_required"
        assert asked["inputRequests"] == {"roots": {"method": "roots/list"}}


async def test_a_legacy_session_is_hinted_before_its_client_reports_roots() -> None:
    async with running(ServerConnection(build_app(), principal="ada")) as h:
        await h.call(initialize())  # no roots capability: nothing is ever fetched
        assert (await structured(h, call(1, "whoami")))["hinted"] is True
        assert await structured(h, call(2, "roots_seen")) == {"roots": []}


# --- the legacy fallback for a form the host cannot show ---------------------------------------

CANNOT_ASK = "This host cannot ask you to confirm; delete the note in your file manager instead."


class NoArgs(BaseModel):
    pass


def app_asking_a_form(unavailable: str | None) -> tuple[App, list[str]]:
    calls: list[str] = []

    async def ask(ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
        calls.append(ctx.era)
        if ctx.input_responses:
            return ToolResult(text="confirmed")
        form = ElicitForm("Sure?", {"type": "object", "properties": {}}, unavailable=unavailable)
        return InputRequired(requests={"confirm": form}, state="s")

    tool: Tool[NoArgs, BaseModel] = Tool(
        "ask", "Ask", "Asks a form.", NoArgs, None, ToolAnnotations(), ask
    )
    return App(name="t", version="1", title=None, instructions=None, tools=[tool]), calls


async def test_a_form_the_legacy_host_cannot_show_answers_the_handlers_sentence() -> None:
    app, calls = app_asking_a_form(CANNOT_ASK)
    async with running(ServerConnection(app, principal="ada")) as h:
        await h.call(initialize({"roots": {}}))  # no elicitation declared
        result = (await h.call(call(1, "ask")))["result"]
        assert result == {"content": [{"type": "text", "text": CANNOT_ASK}], "isError": True}
        assert not any(m.get("method") == "elicitation/create" for m in h.out)
        assert calls == ["legacy"]  # asked once, never called again


async def test_a_form_the_legacy_host_can_show_is_asked_despite_its_fallback() -> None:
    app, _calls = app_asking_a_form(CANNOT_ASK)
    async with running(ServerConnection(app, principal="ada")) as h:
        await h.call(initialize({"elicitation": {"form": {}}}))
        h.feed(call(1, "ask"))
        ask = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}})
        result = (await h.response(1))["result"]
        assert result["isError"] is False and result["content"][0]["text"] == "confirmed"


async def test_a_form_without_a_fallback_gets_the_generic_sentence_in_the_legacy_era() -> None:
    app, _calls = app_asking_a_form(None)
    async with running(ServerConnection(app, principal="ada")) as h:
        await h.call(initialize())
        result = (await h.call(call(1, "ask")))["result"]
        assert result["isError"] is True
        assert "did not declare that capability" in result["content"][0]["text"]


async def test_a_form_the_modern_client_did_not_declare_is_still_32021() -> None:
    app, _calls = app_asking_a_form(CANNOT_ASK)
    async with running(ServerConnection(app, principal="ada")) as h:
        error = (await h.call(call(1, "ask", _meta=meta())))["error"]
        assert error["code"] == -32021
        assert error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
        assert CANNOT_ASK not in error["message"]


# --- the dispatcher without a process ---------------------------------------------------------


class RecordingChannel:
    """A channel that only records: what a stateless transport offers (it never asks)."""

    def __init__(self) -> None:
        self.sent: list[JSONObject] = []

    @property
    def closed(self) -> bool:
        return False

    async def send(self, message: JSONObject) -> None:
        self.sent.append(message)

    async def ask(
        self, method: str, params: JSONObject | None, timeout: float
    ) -> JSONObject | None:
        raise AssertionError(f"a stateless request asked the client live ({method})")


async def test_the_dispatcher_serves_a_modern_request_with_no_session() -> None:
    dispatcher = Dispatcher(build_app())
    params = {
        "name": "slow",
        "arguments": {"steps": 2, "delay": 0},
        "_meta": meta(None, progressToken="p", **{"io.modelcontextprotocol/logLevel": "info"}),
    }
    routed = dispatcher.route(Request(7, "tools/call", params), session=None, principal="carol")
    assert isinstance(routed, Call) and routed.session is None and routed.principal == "carol"
    channel = RecordingChannel()
    with anyio.fail_after(5):
        response = await dispatcher.respond(routed, channel)
    assert response["id"] == 7 and response["result"]["content"][0]["text"] == "done 2"
    assert response["result"]["resultType"] == "complete"
    assert [m["method"] for m in channel.sent] == [
        "notifications/progress",
        "notifications/message",
    ] * 2

    who = dispatcher.route(
        Request(8, "tools/call", {"name": "whoami", "_meta": meta()}),
        session=None,
        principal="carol",
    )
    assert isinstance(who, Call)
    body = (await dispatcher.respond(who, RecordingChannel()))["result"]["structuredContent"]
    assert (body["era"], body["principal"], body["hinted"]) == ("modern", "carol", False)
    assert body["asksLive"] is False

    # Answered at once, no call and no session: tools/list and server/discover.
    listed = dispatcher.route(
        Request(9, "tools/list", {"_meta": meta()}), session=None, principal="carol"
    )
    assert isinstance(listed, Reply) and listed.opened is None
    assert listed.message["result"]["tools"][0]["name"] == "echo"
    discover = dispatcher.route(
        Request(10, "server/discover", {"_meta": meta()}), session=None, principal="carol"
    )
    assert isinstance(discover, Reply) and MODERN in discover.message["result"]["supportedVersions"]


async def test_without_a_session_a_legacy_request_is_refused_and_initialize_opens_one() -> None:
    dispatcher = Dispatcher(build_app())
    refused = dispatcher.route(
        Request(1, "tools/call", {"name": "whoami"}), session=None, principal="d"
    )
    assert isinstance(refused, Reply) and refused.message["error"]["code"] == -32602
    opened = dispatcher.route(
        Request(2, "initialize", initialize()["params"]), session=None, principal="d"
    )
    assert isinstance(opened, Reply) and opened.opened is not None
    assert opened.opened.version == "2025-11-25"
    served = dispatcher.route(
        Request(3, "tools/call", {"name": "whoami"}), session=opened.opened, principal="d"
    )
    assert isinstance(served, Call) and served.session is opened.opened
    body = (await dispatcher.respond(served, RecordingChannel()))["result"]["structuredContent"]
    assert (body["era"], body["principal"], body["hinted"]) == ("legacy", "d", True)
    assert body["asksLive"] is True


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel"])
def test_a_method_2026_removed_is_method_not_found_when_the_request_is_modern(method: str) -> None:
    # D26 versioning.mdx: "A request carrying modern per-request _meta is served statelessly
    # according to this revision", and the revision removed initialize, ping and
    # logging/setLevel (D26 changelog 2, 5). So a modern-tagged initialize opens no session.
    dispatcher = Dispatcher(build_app())
    params = {**initialize()["params"], "level": "info", "_meta": meta()}
    answer = dispatcher.route(Request(5, method, params), session=None, principal="d")
    assert isinstance(answer, Reply) and answer.opened is None
    assert answer.message["id"] == 5 and answer.message["error"]["code"] == -32601
