"""The method handlers: ``tools/*``, ``resources/*``, ``completion/complete``, ``prompts/*``.

Each takes a validated :class:`~fsnotes.protocol.calls.Call` and its channel and returns the
result body, or raises :class:`~fsnotes.protocol.wire.Fault` (or a registry exception the
dispatcher maps to an error). They know the :class:`App` they serve, never a session store, a
process or a transport: the same handlers serve every session and the stateless era.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from fsnotes.protocol import cursor as cursor_codec
from fsnotes.protocol import limits
from fsnotes.protocol.calls import (
    Asking,
    Call,
    Channel,
    Handler,
    InputUnavailable,
    check_askable,
    drive,
)
from fsnotes.protocol.calls import context as call_context
from fsnotes.protocol.encoding import encode_input_required, text_result, tool_result
from fsnotes.protocol.registry import (
    App,
    InputRequired,
    InvalidParams,
    JSONObject,
    MissingCapability,
    RequestContext,
    ResourceNotFound,
    Tool,
    ToolError,
    ToolResult,
    URLElicitationRequired,
)
from fsnotes.protocol.tasks import TASK_METHODS, missing_extension, opted_in
from fsnotes.protocol.tasks import serve as serve_task_method
from fsnotes.protocol.tool_schema import (
    ParamHeader,
    SchemaError,
    declared_schema,
    describe_validation_error,
    header_params,
    model_schema,
)
from fsnotes.protocol.wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND_LEGACY,
    Fault,
)

_log = logging.getLogger("fsnotes.protocol")


@dataclass
class ToolEntry:
    tool: Tool[Any, Any]
    input_schema: JSONObject
    descriptor: JSONObject
    # The parameters an HTTP client mirrors into Mcp-Param-* headers (x-mcp-header).
    headers: tuple[ParamHeader, ...] = ()


class ToolTable:
    """The app's tools by name, their descriptors, and the pages of ``tools/list``."""

    def __init__(self, tools: list[Tool[Any, Any]], page_size: int) -> None:
        self.page_size = page_size
        self.entries: dict[str, ToolEntry] = {}
        for tool in tools:
            if tool.name in self.entries:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self.entries[tool.name] = describe(tool)
        self.order = list(self.entries)
        names = "\n".join(self.order).encode()
        # Cursors name the tool list they page through, so a stale or forged one is rejected.
        self.fingerprint = hashlib.sha256(names).hexdigest()[:12]

    def get(self, name: str) -> ToolEntry | None:
        return self.entries.get(name)

    def page(self, cursor: Any, *, modern: bool) -> JSONObject:
        """The ``tools/list`` result body for ``cursor``."""
        start = self.decode_cursor(cursor)
        end = start + self.page_size
        body: JSONObject = {"tools": [self.entries[n].descriptor for n in self.order[start:end]]}
        if end < len(self.order):
            body["nextCursor"] = self.encode_cursor(end)
        if modern:
            body["ttlMs"] = limits.TOOLS_LIST_TTL_MS
            body["cacheScope"] = "public"
        return body

    def encode_cursor(self, offset: int) -> str:
        return cursor_codec.encode([offset, self.fingerprint])

    def decode_cursor(self, cursor: Any) -> int:
        # An empty-string cursor is valid (2026-07-28 pagination); we never issue one, so it
        # means the first page.
        if cursor is None or cursor == "":
            return 0
        bad = Fault(
            INVALID_PARAMS, "Invalid params: invalid or expired cursor; list again from the start"
        )
        if not isinstance(cursor, str) or len(cursor) > 200:
            raise bad
        try:
            offset, fingerprint = cursor_codec.decode(cursor)
        except (ValueError, TypeError):
            raise bad from None
        if (
            fingerprint != self.fingerprint
            or not isinstance(offset, int)
            or isinstance(offset, bool)
            or not 0 < offset < len(self.order)
        ):
            raise bad
        return offset


def describe(tool: Tool[Any, Any]) -> ToolEntry:
    """A tool's ``tools/list`` descriptor and input schema, generated from its models (or its
    own checked ``input_schema``), and its mirrored parameters; :class:`SchemaError` on a
    schema clients could not use."""
    if tool.input_schema is not None:
        input_schema = declared_schema(tool.input_schema)
    else:
        input_schema = model_schema(tool.input_model)
    try:
        headers = header_params(input_schema)
    except SchemaError as exc:
        raise SchemaError(f"tool {tool.name!r}: {exc}") from None
    descriptor: JSONObject = {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": input_schema,
    }
    if tool.output_model is not None:
        descriptor["outputSchema"] = model_schema(tool.output_model)
    ann = tool.annotations
    annotations: JSONObject = {}
    if ann.title is not None:
        annotations["title"] = ann.title
    annotations.update(
        readOnlyHint=ann.read_only,
        destructiveHint=ann.destructive,
        idempotentHint=ann.idempotent,
        openWorldHint=ann.open_world,
    )
    descriptor["annotations"] = annotations
    return ToolEntry(tool, input_schema, descriptor, headers)


T = TypeVar("T")


async def _settled(name: str, call: Call, work: Awaitable[T]) -> T | JSONObject:
    """``work``'s outcome, or the tool error body a tool's failure is reported as. Protocol
    errors (Fault, InvalidParams, URLElicitationRequired, and MissingCapability in the
    2026-07-28 era) propagate: they are the request's error, or a task's failure. Any other
    exception is the tool's failure, reported as a tool error, as before tasks."""
    try:
        return await work
    except (Fault, InvalidParams, URLElicitationRequired):
        raise
    except MissingCapability as exc:
        if call.era == "modern":
            raise
        # 2025-11-25 has no capability error code: tools report it as a tool error.
        return text_result(exc.message, is_error=True)
    except ResourceNotFound as exc:
        return text_result(f"{exc}. Check the URI and try again.", is_error=True)
    except ToolError as exc:
        body = text_result(exc.message, is_error=True)
        if exc.structured is not None:
            body["structuredContent"] = exc.structured
        return body
    except Exception:
        _log.exception("tool %s failed (request %r)", name, call.id)
        return text_result("Internal error", is_error=True)


def _page(call: Call) -> str | None:
    cursor = call.params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise Fault(INVALID_PARAMS, "Invalid params: cursor must be a string")
    return cursor


def _uri(call: Call) -> str:
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise Fault(INVALID_PARAMS, f"Invalid params: {call.method} needs a uri string")
    return uri


def _cache(call: Call, body: JSONObject) -> JSONObject:
    if call.era == "modern":
        body["ttlMs"] = limits.RESOURCES_TTL_MS
        body["cacheScope"] = "private"  # note contents are the user's own data
    return body


class Handlers:
    """The handlers of the methods that run as tasks, over one :class:`App`."""

    def __init__(self, app: App, tools: ToolTable, asking: Asking) -> None:
        self.app = app
        self.tools = tools
        self.asking = asking
        table: dict[str, Handler] = {"tools/call": self.tools_call}
        if app.resources is not None:
            table["resources/list"] = self.resources_list
            table["resources/templates/list"] = self.resources_templates
            table["resources/read"] = self.resources_read
            if app.subscriptions is not None:
                table["resources/subscribe"] = self.resources_subscribe
                table["resources/unsubscribe"] = self.resources_unsubscribe
        if app.prompts is not None:
            table["prompts/list"] = self.prompts_list
            table["prompts/get"] = self.prompts_get
        if app.resources is not None or app.prompts is not None:
            table["completion/complete"] = self.complete
        if app.tasks is not None:
            for method in TASK_METHODS:
                table[method] = self.tasks_method
        # Unknown methods, those removed in an era and capabilities not advertised are absent.
        self.table = table

    # --- tools -------------------------------------------------------------------------------

    async def tools_call(self, call: Call, channel: Channel) -> JSONObject:
        name = call.params.get("name")
        if not isinstance(name, str):
            raise Fault(INVALID_PARAMS, "Invalid params: tools/call needs a tool name")
        entry = self.tools.get(name)
        if entry is None:
            raise Fault(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = call.params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise Fault(INVALID_PARAMS, "Invalid params: arguments must be an object")
        tool = entry.tool
        try:
            model = tool.input_model.model_validate(arguments or {})
        except ValidationError as exc:
            # Argument errors are tool errors the model can fix (SEP-1303), not -32602.
            return text_result(
                describe_validation_error(name, exc, entry.input_schema), is_error=True
            )

        async def run(ctx: RequestContext) -> ToolResult | InputRequired:
            outcome = await tool.handler(ctx, model)
            if isinstance(outcome, BaseModel):
                return ToolResult(structured=outcome)  # the tool's result model
            return outcome

        service = self.app.tasks
        if service is not None and call.era == "modern" and tool.task_support != "forbidden":
            if opted_in(call.capabilities):

                async def step(
                    responses: Mapping[str, Any] | None, state: str | None
                ) -> JSONObject | InputRequired:
                    ctx = call_context(call, channel, responses, state)
                    outcome = await _settled(name, call, run(ctx))
                    if isinstance(outcome, InputRequired):
                        check_askable(ctx, outcome)
                        return outcome
                    return outcome if isinstance(outcome, dict) else tool_result(outcome)

                body: JSONObject = await service.run(call, channel, step)
                return body
            if tool.task_support == "required":
                raise missing_extension(f"the tool {name}")

        outcome = await _settled(name, call, drive(call, channel, run, self.asking))
        if isinstance(outcome, dict):
            return outcome
        if isinstance(outcome, InputRequired):
            return encode_input_required(outcome)
        if isinstance(outcome, InputUnavailable):
            return text_result(outcome.text, is_error=True)
        return tool_result(outcome)

    async def tasks_method(self, call: Call, channel: Channel) -> JSONObject:
        """``tasks/get``, ``tasks/update``, ``tasks/cancel`` (:mod:`fsnotes.protocol.tasks`)."""
        return await serve_task_method(self.app.tasks, call)

    # --- resources, completion ---------------------------------------------------------------

    async def resources_list(self, call: Call, channel: Channel) -> JSONObject:
        assert self.app.resources is not None
        ctx = call_context(call, channel)
        resources, next_cursor = await self.app.resources.list_resources(ctx, _page(call))
        body: JSONObject = {"resources": resources}
        if next_cursor is not None:
            body["nextCursor"] = next_cursor
        return _cache(call, body)

    async def resources_templates(self, call: Call, channel: Channel) -> JSONObject:
        assert self.app.resources is not None
        if _page(call):
            raise Fault(
                INVALID_PARAMS, "Invalid params: invalid cursor; templates come in one page"
            )
        templates = await self.app.resources.list_templates(call_context(call, channel))
        return _cache(call, {"resourceTemplates": templates})

    async def resources_read(self, call: Call, channel: Channel) -> JSONObject:
        provider = self.app.resources
        assert provider is not None
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise Fault(INVALID_PARAMS, "Invalid params: resources/read needs a uri string")

        async def run(ctx: RequestContext) -> list[JSONObject] | InputRequired:
            return await provider.read_resource(ctx, uri)

        try:
            outcome = await drive(call, channel, run, self.asking)
        except ResourceNotFound as exc:
            # 2026-07-28 must use -32602 for a missing resource; 2025-11-25 used -32002.
            code = INVALID_PARAMS if call.era == "modern" else RESOURCE_NOT_FOUND_LEGACY
            raise Fault(code, "Resource not found", {"uri": exc.uri}) from None
        if isinstance(outcome, InputRequired):
            return encode_input_required(outcome)
        if isinstance(outcome, InputUnavailable):
            raise Fault(INTERNAL_ERROR, outcome.text)
        return _cache(call, {"contents": outcome})

    async def resources_subscribe(self, call: Call, channel: Channel) -> JSONObject:
        subscriptions, session = self.app.subscriptions, call.session
        assert subscriptions is not None and session is not None  # legacy only (dispatch)
        uri = _uri(call)
        if uri in session.subscriptions:
            return {}  # one subscription per URI and session
        if len(session.subscriptions) >= limits.MAX_SUBSCRIPTIONS_PER_SESSION:
            raise Fault(
                INVALID_PARAMS,
                f"Invalid params: this session already holds "
                f"{limits.MAX_SUBSCRIPTIONS_PER_SESSION} subscriptions; unsubscribe from some "
                "first",
            )
        message: JSONObject = {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": uri},
        }

        async def updated() -> None:
            if not channel.closed:
                await channel.send(message)

        # Held before the app is asked, so a concurrent subscribe to the same URI finds it.
        session.subscriptions[uri] = updated
        try:
            await subscriptions.subscribe(call_context(call, channel), uri, updated)
        except BaseException as exc:
            session.subscriptions.pop(uri, None)
            if isinstance(exc, ResourceNotFound):
                raise Fault(RESOURCE_NOT_FOUND_LEGACY, "Resource not found", {"uri": uri}) from None
            raise
        return {}

    async def resources_unsubscribe(self, call: Call, channel: Channel) -> JSONObject:
        subscriptions, session = self.app.subscriptions, call.session
        assert subscriptions is not None and session is not None  # legacy only (dispatch)
        uri = _uri(call)
        updated = session.subscriptions.pop(uri, None)
        if updated is not None:
            await subscriptions.unsubscribe(call_context(call, channel), uri, updated)
        return {}

    async def complete(self, call: Call, channel: Channel) -> JSONObject:
        ref = call.params.get("ref")
        argument = call.params.get("argument")
        if not isinstance(ref, dict) or ref.get("type") not in ("ref/prompt", "ref/resource"):
            raise Fault(
                INVALID_PARAMS, "Invalid params: ref must be a ref/prompt or ref/resource object"
            )
        if (
            not isinstance(argument, dict)
            or not isinstance(argument.get("name"), str)
            or not isinstance(argument.get("value"), str)
        ):
            raise Fault(INVALID_PARAMS, "Invalid params: argument needs string name and value")
        given = call.params.get("context")
        raw_args = given.get("arguments") if isinstance(given, dict) else None
        context_arguments = (
            {k: v for k, v in raw_args.items() if isinstance(v, str)}
            if isinstance(raw_args, dict)
            else {}
        )
        # A prompt's arguments are completed by the prompts, a template's by the resources.
        provider = self.app.prompts if ref["type"] == "ref/prompt" else self.app.resources
        if provider is None:
            raise Fault(
                INVALID_PARAMS, f"Invalid params: this server has no {ref['type']} to complete"
            )
        values, total, has_more = await provider.complete(
            call_context(call, channel), ref, argument, context_arguments
        )
        completion: JSONObject = {
            "values": values[: limits.MAX_COMPLETION_VALUES],
            "hasMore": has_more or len(values) > limits.MAX_COMPLETION_VALUES,
        }
        if total is not None:
            completion["total"] = total
        return {"completion": completion}

    # --- prompts -----------------------------------------------------------------------------

    async def prompts_list(self, call: Call, channel: Channel) -> JSONObject:
        assert self.app.prompts is not None
        ctx = call_context(call, channel)
        prompts, next_cursor = await self.app.prompts.list_prompts(ctx, _page(call))
        body: JSONObject = {"prompts": prompts}
        if next_cursor is not None:
            body["nextCursor"] = next_cursor
        if call.era == "modern":
            body["ttlMs"] = limits.TOOLS_LIST_TTL_MS
            body["cacheScope"] = "public"
        return body

    async def prompts_get(self, call: Call, channel: Channel) -> JSONObject:
        provider = self.app.prompts
        assert provider is not None
        name = call.params.get("name")
        arguments = call.params.get("arguments") or {}
        if not isinstance(name, str):
            raise Fault(INVALID_PARAMS, "Invalid params: prompts/get needs a prompt name")
        if not isinstance(arguments, dict) or not all(
            isinstance(v, str) for v in arguments.values()
        ):
            raise Fault(
                INVALID_PARAMS, "Invalid params: prompt arguments must map names to strings"
            )

        async def run(ctx: RequestContext) -> JSONObject | InputRequired:
            return await provider.get_prompt(ctx, name, arguments)

        outcome = await drive(call, channel, run, self.asking)
        if isinstance(outcome, InputRequired):
            return encode_input_required(outcome)
        if isinstance(outcome, InputUnavailable):
            raise Fault(INTERNAL_ERROR, outcome.text)
        return outcome
