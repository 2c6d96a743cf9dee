"""The method handlers (fsnotes/protocol/handlers.py), called directly: the tool table and its
cursors, the descriptors, and how ``tools/call``, ``resources/read``, ``completion/complete``
and ``prompts/get`` turn a handler's answer or failure into the era's wire shape.

The handlers are driven with a :class:`Call` and a channel that records what would be sent
(the runner's part, which these tests are not about); the tools and providers are real ones
written for the test, with the registry's types.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from fsnotes.protocol import cursor as cursor_codec
from fsnotes.protocol import limits
from fsnotes.protocol.calls import Asking, Call
from fsnotes.protocol.handlers import Handlers, ToolTable, describe
from fsnotes.protocol.registry import (
    App,
    ElicitForm,
    InputRequired,
    JSONObject,
    MissingCapability,
    RequestContext,
    ResourceNotFound,
    Tool,
    ToolAnnotations,
    ToolError,
)
from fsnotes.protocol.session import Session
from fsnotes.protocol.wire import INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY, Fault

ASKING = Asking(input_timeout=1.0, roots_timeout=1.0, max_rounds=2)


class Recorder:
    """A channel: what the request sends, and the replies it gets when it asks (legacy)."""

    def __init__(self, replies: list[JSONObject | None] | None = None) -> None:
        self.sent: list[JSONObject] = []
        self.asked: list[tuple[str, JSONObject | None]] = []
        self.replies = list(replies or [])
        self.closed = False

    async def send(self, message: JSONObject) -> None:
        self.sent.append(message)

    async def ask(
        self, method: str, params: JSONObject | None, timeout: float
    ) -> JSONObject | None:
        self.asked.append((method, params))
        return self.replies.pop(0) if self.replies else None


class Args(BaseModel):
    what: str = "fine"


class Answer(BaseModel):
    said: str


async def answers(ctx: RequestContext, a: Args) -> Answer:
    """Behaves as ``a.what`` says: a result, a refusal of each kind, or a question."""
    if a.what == "tool-error":
        raise ToolError("Try another note.", structured={"hint": "other"})
    if a.what == "missing":
        raise MissingCapability("Needs URL elicitation.", required={"elicitation": {"url": {}}})
    if a.what == "not-found":
        raise ResourceNotFound("file:///nowhere.md")
    if a.what == "bug":
        raise RuntimeError("a bug in the tool")
    return Answer(said=a.what)


async def asks(ctx: RequestContext, a: Args) -> Answer | InputRequired:
    if ctx.input_responses is None:
        form = ElicitForm(
            message="Sure?",
            requested_schema={"type": "object", "properties": {}},
            unavailable="This host cannot ask; nothing was done.",
        )
        return InputRequired(requests={"sure": form}, state="sealed")
    return Answer(said=f"{ctx.input_responses['sure']['action']} with {ctx.request_state}")


def tool(name: str, handler: Any, output: type[BaseModel] | None = Answer) -> Tool[Any, Any]:
    return Tool(
        name=name,
        title=name.title(),
        description=f"The {name} tool.",
        input_model=Args,
        output_model=output,
        annotations=ToolAnnotations(title=name.title(), read_only=True, destructive=False),
        handler=handler,
    )


class Provider:
    """Resources and prompts for the tests: one resource, one prompt, many completions."""

    async def list_resources(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        return [{"uri": "file:///a.md", "name": "a"}], None

    async def list_templates(self, ctx: RequestContext) -> list[JSONObject]:
        return []

    async def read_resource(self, ctx: RequestContext, uri: str) -> list[JSONObject]:
        if uri != "file:///a.md":
            raise ResourceNotFound(uri)
        return [{"uri": uri, "text": "A"}]

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        return [f"v{i}" for i in range(limits.MAX_COMPLETION_VALUES + 5)], None, False

    async def list_prompts(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        return [{"name": "daily"}], None

    async def get_prompt(
        self, ctx: RequestContext, name: str, arguments: Mapping[str, str]
    ) -> JSONObject:
        return {"messages": [{"role": "user", "content": {"type": "text", "text": name}}]}


def app(*, providers: bool = True) -> App:
    return App(
        name="t",
        version="1",
        title=None,
        instructions=None,
        tools=[tool("answers", answers), tool("asks", asks), tool("bare", answers, None)],
        resources=Provider() if providers else None,
        prompts=Provider() if providers else None,
    )


def handlers(a: App | None = None, page_size: int = 100) -> Handlers:
    a = a or app()
    return Handlers(a, ToolTable(list(a.tools), page_size), ASKING)


def call(method: str, params: JSONObject, *, era: str = "modern", caps: Any = None) -> Call:
    h = handlers()
    session = Session(version="2025-11-25", capabilities=caps or {}, client_info=None)
    return Call(
        id=1,
        method=method,
        params=params,
        era=era,  # type: ignore[arg-type]
        version="2026-07-28" if era == "modern" else "2025-11-25",
        principal="ada",
        ceiling=None,
        capabilities=caps or {},
        client_info=None,
        handler=h.table[method],
        session=session if era == "legacy" else None,
    )


def run(method: str, params: JSONObject, channel: Recorder | None = None, **kw: Any) -> JSONObject:
    c = call(method, params, **kw)
    result: JSONObject = anyio.run(c.handler, c, channel or Recorder())
    return result


def fault(method: str, params: JSONObject, **kw: Any) -> Fault:
    with pytest.raises(Fault) as caught:
        run(method, params, **kw)
    return caught.value


# --- the tool table ------------------------------------------------------------------------


def test_the_table_refuses_two_tools_of_one_name() -> None:
    with pytest.raises(ValueError, match="duplicate tool name 'answers'"):
        ToolTable([tool("answers", answers), tool("answers", asks)], 10)


def test_pages_follow_the_cursor_and_only_the_modern_era_gets_cache_hints() -> None:
    table = ToolTable(list(app().tools), page_size=2)
    first = table.page(None, modern=True)
    assert [t["name"] for t in first["tools"]] == ["answers", "asks"]
    assert first["ttlMs"] == limits.TOOLS_LIST_TTL_MS and first["cacheScope"] == "public"
    second = table.page(first["nextCursor"], modern=False)
    assert [t["name"] for t in second["tools"]] == ["bare"]
    assert "nextCursor" not in second and "ttlMs" not in second
    assert table.page("", modern=False)["tools"] == first["tools"]  # "" is the first page


@pytest.mark.parametrize(
    "cursor",
    [
        lambda fp: 5,
        lambda fp: "x" * 201,
        lambda fp: "not base64 json",
        lambda fp: cursor_codec.encode([0, fp]),  # never issued: page 0 has no cursor
        lambda fp: cursor_codec.encode([3, fp]),  # past the end
        lambda fp: cursor_codec.encode([True, fp]),
        lambda fp: cursor_codec.encode([1, "000000000000"]),  # another tool list's
    ],
)
def test_a_cursor_not_issued_for_this_list_is_invalid_params(cursor: Any) -> None:
    table = ToolTable(list(app().tools), page_size=1)
    assert table.page(cursor_codec.encode([1, table.fingerprint]), modern=True)["tools"]
    with pytest.raises(Fault) as caught:
        table.page(cursor(table.fingerprint), modern=True)
    assert caught.value.code == INVALID_PARAMS and "cursor" in caught.value.message


def test_a_descriptor_maps_the_annotations_and_omits_a_missing_output_schema() -> None:
    described = describe(tool("bare", answers, None)).descriptor
    assert list(described) == ["name", "title", "description", "inputSchema", "annotations"]
    assert described["annotations"] == {
        "title": "Bare",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    assert describe(tool("answers", answers)).descriptor["outputSchema"]["type"] == "object"


def test_the_table_holds_only_the_methods_the_app_serves() -> None:
    assert set(handlers(app(providers=False)).table) == {"tools/call"}
    assert {"resources/read", "prompts/get", "completion/complete"} <= set(handlers().table)
    assert "resources/subscribe" not in handlers().table  # the app has no subscriptions


# --- tools/call ----------------------------------------------------------------------------


def test_a_result_model_is_sent_as_structured_content_and_its_json_as_text() -> None:
    body = run("tools/call", {"name": "answers", "arguments": {"what": "hello"}})
    assert body["structuredContent"] == {"said": "hello"}
    assert body["content"] == [{"type": "text", "text": '{"said":"hello"}'}]
    assert body.get("isError", False) is False


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "needs a tool name"),
        ({"name": 5}, "needs a tool name"),
        ({"name": "nope"}, "Unknown tool: nope"),
        ({"name": "answers", "arguments": [1]}, "arguments must be an object"),
    ],
)
def test_a_call_that_names_no_tool_is_invalid_params(params: JSONObject, message: str) -> None:
    refused = fault("tools/call", params)
    assert refused.code == INVALID_PARAMS and message in refused.message


def test_arguments_the_model_refuses_are_a_tool_error_the_model_can_fix() -> None:
    body = run("tools/call", {"name": "answers", "arguments": {"what": 5}})
    assert body["isError"] is True
    assert "what" in body["content"][0]["text"]


def test_a_tool_error_keeps_its_sentence_and_structured_content() -> None:
    body = run("tools/call", {"name": "answers", "arguments": {"what": "tool-error"}})
    assert body["isError"] is True and body["content"][0]["text"] == "Try another note."
    assert body["structuredContent"] == {"hint": "other"}


def test_a_missing_capability_is_an_error_response_only_in_the_modern_era() -> None:
    params = {"name": "answers", "arguments": {"what": "missing"}}
    with pytest.raises(MissingCapability):
        run("tools/call", params)
    body = run("tools/call", params, era="legacy")
    assert body["isError"] is True and body["content"][0]["text"] == "Needs URL elicitation."


def test_a_missing_resource_in_a_tool_is_a_tool_error_naming_the_uri() -> None:
    body = run("tools/call", {"name": "answers", "arguments": {"what": "not-found"}})
    assert body["isError"] is True and "file:///nowhere.md" in body["content"][0]["text"]


def test_a_tool_that_fails_says_internal_error_and_logs_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="fsnotes.protocol"):
        body = run("tools/call", {"name": "answers", "arguments": {"what": "bug"}})
    assert body == {"content": [{"type": "text", "text": "Internal error"}], "isError": True}
    assert "tool answers failed" in caplog.text and "a bug in the tool" in caplog.text


def test_a_question_is_encoded_for_a_modern_retry_and_asked_live_in_legacy() -> None:
    form_caps = {"elicitation": {"form": {}}}
    modern = run("tools/call", {"name": "asks"}, caps=form_caps)
    assert modern["resultType"] == "input_required" and modern["requestState"] == "sealed"
    assert modern["inputRequests"]["sure"]["method"] == "elicitation/create"
    channel = Recorder(replies=[{"result": {"action": "accept"}}])
    legacy = run("tools/call", {"name": "asks"}, channel, era="legacy", caps=form_caps)
    assert [m for m, _ in channel.asked] == ["elicitation/create"]
    assert legacy["structuredContent"] == {"said": "accept with sealed"}


def test_a_legacy_host_without_the_form_gets_the_forms_own_sentence() -> None:
    channel = Recorder()
    body = run("tools/call", {"name": "asks"}, channel, era="legacy")
    assert body["isError"] is True
    assert body["content"][0]["text"] == "This host cannot ask; nothing was done."
    assert channel.asked == []  # nothing was asked of a host that cannot answer


# --- resources, completion, prompts --------------------------------------------------------


def test_resources_are_cached_privately_in_the_modern_era_only() -> None:
    modern = run("resources/read", {"uri": "file:///a.md"})
    assert modern["contents"] == [{"uri": "file:///a.md", "text": "A"}]
    assert modern["cacheScope"] == "private" and modern["ttlMs"] == limits.RESOURCES_TTL_MS
    assert "ttlMs" not in run("resources/list", {}, era="legacy")


def test_a_missing_resource_is_32002_in_legacy_and_32602_in_the_modern_era() -> None:
    missing = {"uri": "file:///b.md"}
    assert fault("resources/read", missing, era="legacy").code == RESOURCE_NOT_FOUND_LEGACY
    modern = fault("resources/read", missing)
    assert modern.code == INVALID_PARAMS and modern.data == {"uri": "file:///b.md"}
    assert fault("resources/read", {}).code == INVALID_PARAMS  # no uri string


def test_resource_templates_come_in_one_page() -> None:
    assert fault("resources/templates/list", {"cursor": "next"}).code == INVALID_PARAMS
    assert fault("resources/list", {"cursor": 5}).message.endswith("cursor must be a string")


def test_completion_values_are_capped_and_say_there_are_more() -> None:
    body = run(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "daily"}, "argument": {"name": "a", "value": ""}},
    )
    assert len(body["completion"]["values"]) == limits.MAX_COMPLETION_VALUES
    assert body["completion"]["hasMore"] is True and "total" not in body["completion"]


@pytest.mark.parametrize(
    "params",
    [
        {"ref": {"type": "ref/tool"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/prompt"}, "argument": {"name": "a"}},
        {"ref": "ref/prompt", "argument": {"name": "a", "value": ""}},
    ],
)
def test_a_completion_without_a_ref_or_argument_is_invalid_params(params: JSONObject) -> None:
    assert fault("completion/complete", params).code == INVALID_PARAMS


def test_prompts_get_needs_a_name_and_string_arguments() -> None:
    got = run("prompts/get", {"name": "daily", "arguments": {"day": "today"}})
    assert got["messages"][0]["content"]["text"] == "daily"
    assert fault("prompts/get", {}).code == INVALID_PARAMS
    refused = fault("prompts/get", {"name": "daily", "arguments": {"day": 1}})
    assert "map names to strings" in refused.message
    listed = run("prompts/list", {})
    assert listed["prompts"] == [{"name": "daily"}] and listed["cacheScope"] == "public"
