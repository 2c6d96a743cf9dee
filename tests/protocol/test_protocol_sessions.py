"""Sessions apart from the process: the principal comes with each request from the transport,
root hints stay in the session that reported them, the legacy adapter's fallback for a form the
host cannot show, and the dispatcher serving a stateless request with no session at all."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fsnotes.protocol import App, ElicitForm, InputRequired, RequestContext, Tool, ToolAnnotations
from fsnotes.protocol.registry import ToolResult
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import Harness, meta, request, running
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
