"""Tool calls, MRTR (modern encoding and the legacy adapter), progress, cancellation, logging,
resources and roots, driven through the core with no I/O."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import pytest

from fsnotes.protocol import ElicitForm, InputRequired, RequestContext, ToolResult
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import Harness, meta, request, running
from tests.servers.demo_server import build_app

FORM_CAPS = {"elicitation": {}}


def init_msg(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return request(
        0,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": caps or {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )


async def legacy(h: Harness, caps: dict[str, Any] | None = None) -> None:
    await h.call(init_msg(caps))
    h.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})


def call(
    rid: Any, name: str, arguments: dict[str, Any] | None = None, **params: Any
) -> dict[str, Any]:
    p: dict[str, Any] = {"name": name, **params}
    if arguments is not None:
        p["arguments"] = arguments
    return request(rid, "tools/call", p)


def modern_call(
    rid: Any, name: str, arguments: dict[str, Any] | None = None, caps: Any = None, **extra: Any
) -> dict[str, Any]:
    return call(rid, name, arguments, _meta=meta(caps), **extra)


@pytest.mark.anyio
async def test_tool_result_has_structured_content_and_the_same_json_as_text() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        msg = await h.call(modern_call(1, "echo", {"text": "hi"}))
        assert msg["result"] == {
            "resultType": "complete",
            "content": [{"type": "text", "text": '{"text":"hi"}'}],
            "isError": False,
            "structuredContent": {"text": "hi"},
            "_meta": {
                "io.modelcontextprotocol/serverInfo": msg["result"]["_meta"][
                    "io.modelcontextprotocol/serverInfo"
                ]
            },
        }


@pytest.mark.anyio
async def test_unknown_tool_is_invalid_params_with_its_name() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        msg = await h.call(modern_call(1, "nope"))
        assert msg["error"] == {"code": -32602, "message": "Unknown tool: nope"}
        bad_args = await h.call(
            request(2, "tools/call", {"_meta": meta(), "name": "echo", "arguments": [1]})
        )
        assert bad_args["error"]["code"] == -32602


@pytest.mark.anyio
async def test_argument_errors_are_actionable_is_error_results() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        msg = await h.call(modern_call(1, "add", {"a": "x", "b": 5000}))
        result = msg["result"]
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert "- a:" in text and "expected integer" in text
        assert "- b:" in text and "less than or equal to 1000" in text and "5000" in text
        missing = (await h.call(modern_call(2, "echo", {})))["result"]["content"][0]["text"]
        assert "- text: required field is missing; expected string: Text to send back" in missing


@pytest.mark.anyio
async def test_tool_error_internal_error_and_invalid_params_from_handlers() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        tool_error = (await h.call(modern_call(1, "fail", {"kind": "tool"})))["result"]
        assert tool_error["isError"] is True and "on purpose" in tool_error["content"][0]["text"]
        crash = (await h.call(modern_call(2, "fail", {"kind": "crash"})))["result"]
        assert crash["isError"] is True and crash["content"][0]["text"] == "Internal error"
        invalid = await h.call(modern_call(3, "fail", {"kind": "invalid"}))
        assert invalid["error"] == {
            "code": -32602,
            "message": "bad on purpose",
            "data": {"field": "kind"},
        }


@pytest.mark.anyio
async def test_modern_form_input_required_exact_shape_then_retry_completes() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        first = (await h.call(modern_call(1, "confirm", {"title": "groceries"}, FORM_CAPS)))[
            "result"
        ]
        assert first == {
            "resultType": "input_required",
            "inputRequests": {
                "confirm": {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": "Delete note 'groceries'?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"ok": {"type": "boolean", "title": "Delete it"}},
                            "required": ["ok"],
                        },
                    },
                }
            },
            "requestState": "confirm:groceries",
            "_meta": first["_meta"],
        }
        retry = modern_call(
            2,
            "confirm",
            {"title": "groceries"},
            FORM_CAPS,
            inputResponses={"confirm": {"action": "accept", "content": {"ok": True}}},
            requestState="confirm:groceries",
        )
        done = (await h.call(retry))["result"]
        assert done["resultType"] == "complete" and done["structuredContent"] == {"deleted": True}


@pytest.mark.anyio
async def test_modern_missing_capability_is_32021_with_required_capabilities_object() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        msg = await h.call(modern_call(1, "confirm", {"title": "x"}, {}))
        assert msg["error"]["code"] == -32021
        assert msg["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
        url_only = await h.call(
            modern_call(2, "confirm", {"title": "x"}, {"elicitation": {"url": {}}})
        )
        assert url_only["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
        url = await h.call(modern_call(3, "visit", {}, {"elicitation": {}}))
        assert url["error"]["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
        roots = await h.call(modern_call(4, "roots_seen", {}, {"elicitation": {}}))
        assert roots["error"]["data"] == {"requiredCapabilities": {"roots": {}}}


@pytest.mark.anyio
async def test_capabilities_are_never_reused_from_an_earlier_request() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        ok = (await h.call(modern_call(1, "confirm", {"title": "x"}, FORM_CAPS)))["result"]
        assert ok["resultType"] == "input_required"
        later = await h.call(modern_call(2, "confirm", {"title": "x"}, {}))
        assert later["error"]["code"] == -32021


@pytest.mark.anyio
async def test_modern_url_elicitation_has_no_elicitation_id_and_no_cache_fields() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        result = (await h.call(modern_call(1, "visit", {}, {"elicitation": {"url": {}}})))["result"]
        assert result["inputRequests"]["visit"]["params"] == {
            "mode": "url",
            "message": "Authorize the demo",
            "url": "https://example.invalid/authorize",
        }
        assert "ttlMs" not in result and "cacheScope" not in result


@pytest.mark.anyio
async def test_modern_roots_input_request_and_malformed_input_responses() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        first = (await h.call(modern_call(1, "roots_seen", {}, {"roots": {}})))["result"]
        assert (
            first["inputRequests"] == {"roots": {"method": "roots/list"}}
            and "requestState" not in first
        )
        retry = modern_call(
            2,
            "roots_seen",
            {},
            {"roots": {}},
            inputResponses={"roots": {"roots": [{"uri": "file:///n"}]}},
        )
        assert (await h.call(retry))["result"]["structuredContent"] == {"roots": ["file:///n"]}
        bad = await h.call(modern_call(3, "roots_seen", {}, {"roots": {}}, inputResponses=[1]))
        assert bad["error"]["code"] == -32602
        bad_state = await h.call(modern_call(4, "roots_seen", {}, {"roots": {}}, requestState=7))
        assert bad_state["error"]["code"] == -32602


@pytest.mark.anyio
async def test_legacy_adapter_sends_live_elicitation_and_calls_the_handler_again() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await legacy(h, FORM_CAPS)
        h.feed(call(1, "confirm", {"title": "groceries"}))
        ask = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        assert (
            ask["params"]["mode"] == "form"
            and ask["params"]["message"] == "Delete note 'groceries'?"
        )
        assert isinstance(ask["id"], int)
        h.feed(
            {
                "jsonrpc": "2.0",
                "id": ask["id"],
                "result": {"action": "accept", "content": {"ok": True}},
            }
        )
        result = (await h.response(1))["result"]
        assert result["structuredContent"] == {"deleted": True} and result["isError"] is False
        assert "resultType" not in result


@pytest.mark.anyio
async def test_legacy_url_elicitation_includes_elicitation_id() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await legacy(h, {"elicitation": {"url": {}}})
        h.feed(call(1, "visit", {}))
        ask = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        assert ask["params"] == {
            "mode": "url",
            "message": "Authorize the demo",
            "url": "https://example.invalid/authorize",
            "elicitationId": "demo-1",
        }
        h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
        assert (await h.response(1))["result"]["content"][0]["text"] == "url decline"


@pytest.mark.anyio
async def test_legacy_client_error_reply_becomes_is_error_result() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await legacy(h, FORM_CAPS)
        h.feed(call(1, "confirm", {"title": "x"}))
        ask = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        h.feed({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32601, "message": "no UI"}})
        result = (await h.response(1))["result"]
        assert result["isError"] is True and "no UI" in result["content"][0]["text"]


@pytest.mark.anyio
async def test_legacy_timeout_withdraws_the_request_and_reports_an_error_result() -> None:
    async with running(ServerConnection(build_app(), input_timeout=0.05, principal="unit")) as h:
        await legacy(h, FORM_CAPS)
        h.feed(call(1, "confirm", {"title": "x"}))
        ask = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        result = (await h.response(1))["result"]
        assert result["isError"] is True and "did not answer" in result["content"][0]["text"]
        cancel = await h.wait_for(lambda m: m.get("method") == "notifications/cancelled")
        assert cancel["params"]["requestId"] == ask["id"]
        # A late answer is a response to nothing pending: ignored.
        h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}})
        assert (await h.call(request(2, "ping")))["result"] == {}


@pytest.mark.anyio
async def test_legacy_missing_capability_is_an_is_error_result_not_a_request() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await legacy(h, {})
        result = (await h.call(call(1, "confirm", {"title": "x"})))["result"]
        assert result["isError"] is True and "cannot ask" in result["content"][0]["text"]
        assert not any(m.get("method") == "elicitation/create" for m in h.out)


@pytest.mark.anyio
async def test_legacy_adapter_gives_up_after_max_rounds() -> None:
    async def always_ask(ctx: RequestContext, args: Any) -> InputRequired:
        return InputRequired(
            requests={"q": ElicitForm("again?", {"type": "object", "properties": {}})}
        )

    app = build_app()
    app.tools = [replace(app.tools[0], name="nag", handler=always_ask)]
    async with running(ServerConnection(app, max_input_rounds=2, principal="unit")) as h:
        await legacy(h, FORM_CAPS)
        h.feed(call(1, "nag", {"text": "x"}))
        answered: set[int] = set()
        for _ in range(2):
            ask = await h.wait_for(
                lambda m: m.get("method") == "elicitation/create" and m["id"] not in answered
            )
            answered.add(ask["id"])
            h.feed(
                {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}}
            )
        result = (await h.response(1))["result"]
        assert result["isError"] is True and "2 rounds" in result["content"][0]["text"]
        assert len([m for m in h.out if m.get("method") == "elicitation/create"]) == 2


@pytest.mark.anyio
async def test_cancelled_request_stops_and_sends_nothing() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        h.feed(
            modern_call(1, "slow", {"steps": 50, "delay": 0.02}, _meta_extra=None)
            if False
            else modern_call(1, "slow", {"steps": 50, "delay": 0.02})
        )
        await h.settle()
        h.feed(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 1, "reason": "user"},
            }
        )
        await h.call(request(2, "tools/list", {"_meta": meta()}))
        await anyio.sleep(0.1)
        assert not any(m.get("id") == 1 and "method" not in m for m in h.out)
        assert h.conn.in_flight == 0


@pytest.mark.anyio
async def test_legacy_cancel_while_waiting_for_elicitation_withdraws_our_request() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await legacy(h, FORM_CAPS)
        h.feed(call(1, "confirm", {"title": "x"}))
        ask = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        h.feed({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        cancel = await h.wait_for(lambda m: m.get("method") == "notifications/cancelled")
        assert cancel["params"]["requestId"] == ask["id"]
        assert not any(m.get("id") == 1 and "method" not in m for m in h.out)


@pytest.mark.anyio
async def test_progress_only_with_a_token_strictly_increasing_and_not_after_completion() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await h.call(modern_call(1, "slow", {"steps": 2, "delay": 0}))
        assert not any(m.get("method") == "notifications/progress" for m in h.out)
        m = meta(progressToken="tok")
        await h.call(call(2, "slow", {"steps": 3, "delay": 0}, _meta=m))
        progress = [x["params"] for x in h.out if x.get("method") == "notifications/progress"]
        assert [p["progress"] for p in progress] == [1, 2, 3]
        assert all(p["progressToken"] == "tok" for p in progress)
        response_index = next(i for i, x in enumerate(h.out) if x.get("id") == 2)
        last_progress = max(
            i for i, x in enumerate(h.out) if x.get("method") == "notifications/progress"
        )
        assert last_progress < response_index


@pytest.mark.anyio
async def test_progress_rules_enforced_in_the_context() -> None:
    seen: list[RequestContext] = []

    async def handler(ctx: RequestContext, args: Any) -> ToolResult:
        seen.append(ctx)
        await ctx.report_progress(1)
        await ctx.report_progress(1)  # not increasing: dropped
        await ctx.report_progress(0.5)  # decreasing: dropped
        await ctx.report_progress(2, 10, "two")
        return ToolResult(text="ok")

    app = build_app()
    tool = app.tools[0]
    app.tools = [replace(tool, name="p", handler=handler)]
    async with running(ServerConnection(app, principal="unit")) as h:
        await h.call(call(1, "p", {"text": "x"}, _meta=meta(progressToken=5)))
        progress = [x["params"] for x in h.out if x.get("method") == "notifications/progress"]
        assert progress == [
            {"progressToken": 5, "progress": 1},
            {"progressToken": 5, "progress": 2, "total": 10, "message": "two"},
        ]
        before = len(h.out)
        await seen[0].report_progress(3)  # the request has finished: nothing is sent
        await seen[0].log("emergency", "late")
        assert len(h.out) == before


@pytest.mark.anyio
async def test_modern_logs_only_when_the_request_asked_and_at_or_above_its_level() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await h.call(modern_call(1, "slow", {"steps": 1, "delay": 0}))
        assert not any(m.get("method") == "notifications/message" for m in h.out)
        await h.call(
            call(
                2,
                "slow",
                {"steps": 2, "delay": 0},
                _meta=meta(**{"io.modelcontextprotocol/logLevel": "info"}),
            )
        )
        logs = [m["params"] for m in h.out if m.get("method") == "notifications/message"]
        assert logs == [
            {"level": "info", "data": {"step": 1}},
            {"level": "info", "data": {"step": 2}},
        ]
        await h.call(
            call(
                3,
                "slow",
                {"steps": 1, "delay": 0},
                _meta=meta(**{"io.modelcontextprotocol/logLevel": "error"}),
            )
        )
        assert len([m for m in h.out if m.get("method") == "notifications/message"]) == 2


@pytest.mark.anyio
async def test_legacy_logs_follow_set_level_default_warning() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await legacy(h)
        await h.call(call(1, "slow", {"steps": 1, "delay": 0}))
        assert not any(m.get("method") == "notifications/message" for m in h.out)
        await h.call(request(2, "logging/setLevel", {"level": "debug"}))
        await h.call(call(3, "slow", {"steps": 1, "delay": 0}))
        assert [
            m["params"]["level"] for m in h.out if m.get("method") == "notifications/message"
        ] == ["info"]


@pytest.mark.anyio
async def test_resources_not_found_codes_differ_by_era_with_uri_data() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        modern = await h.call(request(1, "resources/read", {"_meta": meta(), "uri": "note://zzz"}))
        assert modern["error"] == {
            "code": -32602,
            "message": "Resource not found",
            "data": {"uri": "note://zzz"},
        }
        await legacy(h)
        old = await h.call(request(2, "resources/read", {"uri": "note://zzz"}))
        assert old["error"] == {
            "code": -32002,
            "message": "Resource not found",
            "data": {"uri": "note://zzz"},
        }


@pytest.mark.anyio
async def test_resources_read_list_templates_and_completion_route_to_the_provider() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        read = (await h.call(request(1, "resources/read", {"_meta": meta(), "uri": "note://a"})))[
            "result"
        ]
        assert read["contents"] == [{"uri": "note://a", "mimeType": "text/plain", "text": "alpha"}]
        assert (
            read["ttlMs"] == 5000
            and read["cacheScope"] == "private"
            and read["resultType"] == "complete"
        )
        page1 = (await h.call(request(2, "resources/list", {"_meta": meta()})))["result"]
        assert [r["uri"] for r in page1["resources"]] == ["note://a"] and page1[
            "nextCursor"
        ] == "p2"
        page2 = (await h.call(request(3, "resources/list", {"_meta": meta(), "cursor": "p2"})))[
            "result"
        ]
        assert [r["uri"] for r in page2["resources"]] == ["note://b"] and "nextCursor" not in page2
        bad = await h.call(request(4, "resources/list", {"_meta": meta(), "cursor": "zz"}))
        assert bad["error"]["code"] == -32602
        templates = (await h.call(request(5, "resources/templates/list", {"_meta": meta()})))[
            "result"
        ]
        assert templates["resourceTemplates"][0]["uriTemplate"] == "note://{name}"
        completion = await h.call(
            request(
                6,
                "completion/complete",
                {
                    "_meta": meta(),
                    "ref": {"type": "ref/resource", "uri": "note://{name}"},
                    "argument": {"name": "name", "value": "b"},
                },
            )
        )
        assert completion["result"]["completion"] == {"values": ["b"], "hasMore": False, "total": 1}
        assert "ttlMs" not in completion["result"]
        bad_ref = await h.call(
            request(7, "completion/complete", {"_meta": meta(), "ref": {}, "argument": {}})
        )
        assert bad_ref["error"]["code"] == -32602


@pytest.mark.anyio
async def test_resources_read_input_required_in_both_eras() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        modern = (
            await h.call(
                request(1, "resources/read", {"_meta": meta(FORM_CAPS), "uri": "note://secret"})
            )
        )["result"]
        assert modern["resultType"] == "input_required" and "ttlMs" not in modern
        await legacy(h, FORM_CAPS)
        h.feed(request(2, "resources/read", {"uri": "note://secret"}))
        ask = await h.wait_for(lambda m: m.get("method") == "elicitation/create")
        h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {}}})
        assert (await h.response(2))["result"]["contents"][0]["text"] == "s3cret"


@pytest.mark.anyio
async def test_legacy_roots_are_fetched_after_initialized_and_on_list_changed() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await legacy(h, {"roots": {"listChanged": True}})
        ask = await h.wait_for(lambda m: m.get("method") == "roots/list")
        h.feed({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": "file:///one"}]}})
        seen = (await h.call(call(1, "roots_seen", {})))["result"]["structuredContent"]
        assert seen == {"roots": ["file:///one"]}
        h.feed({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        again = await h.wait_for(lambda m: m.get("method") == "roots/list" and m["id"] != ask["id"])
        h.feed({"jsonrpc": "2.0", "id": again["id"], "result": {"roots": [{"uri": "file:///two"}]}})
        await h.settle()
        seen = (await h.call(call(2, "roots_seen", {})))["result"]["structuredContent"]
        assert seen == {"roots": ["file:///two"]}


@pytest.mark.anyio
async def test_no_roots_request_without_the_capability() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        await legacy(h, {})
        await h.settle()
        assert not any(m.get("method") == "roots/list" for m in h.out)


def test_context_capability_checks_follow_the_elicitation_mode_rules() -> None:
    def ctx(caps: dict[str, Any]) -> RequestContext:
        return RequestContext(
            era="modern",
            protocol_version="2026-07-28",
            method="tools/call",
            principal="unit",
            client_capabilities=caps,
            client_info=None,
        )

    assert ctx({"elicitation": {}}).supports_elicitation("form")
    assert not ctx({"elicitation": {}}).supports_elicitation("url")
    assert ctx({"elicitation": {"url": {}}}).supports_elicitation("url")
    assert not ctx({"elicitation": {"url": {}}}).supports_elicitation("form")
    assert not ctx({}).supports_elicitation("form")
    assert not ctx({"elicitation": True}).supports_elicitation("form")
    assert ctx({"roots": {}}).supports_roots() and not ctx({}).supports_roots()


@pytest.mark.anyio
async def test_a_result_that_cannot_be_encoded_still_gets_an_answer() -> None:
    # A handler bug (a value JSON cannot carry) must not leave the client waiting forever.
    from pydantic import BaseModel

    from fsnotes.protocol import App, Tool, ToolAnnotations

    class NoArgs(BaseModel):
        pass

    async def broken(ctx: RequestContext, args: Any) -> ToolResult:
        return ToolResult(structured={"members": {1, 2}}, text="looks fine")

    app = App(
        name="t",
        version="1",
        title=None,
        instructions=None,
        tools=[Tool("broken", "Broken", "d", NoArgs, None, ToolAnnotations(), broken)],
    )
    async with running(ServerConnection(app, principal="unit")) as h:
        resp = await h.call(modern_call(1, "broken"))
        assert resp["error"]["code"] == -32603
