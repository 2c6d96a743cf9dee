"""Wire shapes of results: tool results, the 2026-07-28 InputRequiredResult, elicitation
params of both eras, and the result envelope.

Pure functions of their arguments; the dispatcher and the method handlers share them.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel

from fsnotes.protocol.registry import (
    CreateMessage,
    ElicitForm,
    ElicitURL,
    InputRequest,
    InputRequired,
    JSONObject,
    ToolResult,
)
from fsnotes.protocol.wire import META_SERVER_INFO, RequestId


def result_message(
    request_id: RequestId, body: JSONObject, *, modern: bool, server_info: JSONObject
) -> JSONObject:
    """The JSON-RPC response carrying ``body``."""
    if modern:
        # 2026-07-28: resultType and serverInfo on every result.
        meta = dict(body.get("_meta") or {})
        meta[META_SERVER_INFO] = server_info
        body = {"resultType": "complete", **body, "_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "result": body}


def text_result(text: str, *, is_error: bool) -> JSONObject:
    """A CallToolResult with one text block."""
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def tool_result(result: ToolResult) -> JSONObject:
    """A handler's :class:`ToolResult` as a CallToolResult (text defaults to the structured
    content's compact JSON)."""
    structured: JSONObject | None
    if isinstance(result.structured, BaseModel):
        structured = result.structured.model_dump(mode="json", by_alias=True)
    else:
        structured = result.structured
    if result.content is not None:
        body: JSONObject = {"content": list(result.content), "isError": result.is_error}
        if structured is not None:
            body["structuredContent"] = structured
        return body
    text = result.text
    if text is None:
        text = (
            ""
            if structured is None
            else json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        )
    body = text_result(text, is_error=result.is_error)
    if structured is not None:
        body["structuredContent"] = structured
    return body


def describe_need(request: InputRequest) -> str:
    """What an input request asks the client for, in words."""
    if isinstance(request, ElicitForm):
        return "a form answer (elicitation, form mode)"
    if isinstance(request, ElicitURL):
        return "a visit to a URL (elicitation, URL mode)"
    if isinstance(request, CreateMessage):
        return "a completion from the client's model (sampling)"
    return "the client's roots (roots/list)"


def required_capabilities(requests: list[InputRequest]) -> JSONObject:
    """``data.requiredCapabilities`` of a -32021 error for ``requests``."""
    required: JSONObject = {}
    for request in requests:
        if isinstance(request, ElicitForm | ElicitURL):
            mode = "form" if isinstance(request, ElicitForm) else "url"
            required.setdefault("elicitation", {})[mode] = {}
        elif isinstance(request, CreateMessage):
            required["sampling"] = {}
        else:
            required["roots"] = {}
    return required


def elicit_params(
    request: ElicitForm | ElicitURL, *, era: Literal["legacy", "modern"]
) -> JSONObject:
    """The ``elicitation/create`` params of ``request`` in ``era``."""
    if isinstance(request, ElicitForm):
        return {
            "mode": "form",
            "message": request.message,
            "requestedSchema": request.requested_schema,
        }
    params: JSONObject = {"mode": "url", "message": request.message, "url": request.url}
    if era == "legacy":
        params["elicitationId"] = request.elicitation_id  # removed in 2026-07-28
    return params


def sampling_params(request: CreateMessage) -> JSONObject:
    """The ``sampling/createMessage`` params of ``request`` (the same in both eras)."""
    params: JSONObject = {"messages": list(request.messages), "maxTokens": request.max_tokens}
    if request.system_prompt is not None:
        params["systemPrompt"] = request.system_prompt
    return params


def legacy_request_of(request: InputRequest) -> tuple[str, JSONObject | None]:
    """The live server-to-client request (method, params) that asks for ``request``."""
    if isinstance(request, ElicitForm | ElicitURL):
        return "elicitation/create", elicit_params(request, era="legacy")
    if isinstance(request, CreateMessage):
        return "sampling/createMessage", sampling_params(request)
    return "roots/list", None


def encode_input_required(outcome: InputRequired) -> JSONObject:
    """The 2026-07-28 InputRequiredResult body (never cached: no ttlMs/cacheScope)."""
    body: JSONObject = {"resultType": "input_required"}
    if outcome.requests:
        encoded: JSONObject = {}
        for key, request in outcome.requests.items():
            if isinstance(request, ElicitForm | ElicitURL):
                encoded[key] = {
                    "method": "elicitation/create",
                    "params": elicit_params(request, era="modern"),
                }
            elif isinstance(request, CreateMessage):
                encoded[key] = {
                    "method": "sampling/createMessage",
                    "params": sampling_params(request),
                }
            else:
                encoded[key] = {"method": "roots/list"}
        body["inputRequests"] = encoded
    if outcome.state is not None:
        body["requestState"] = outcome.state
    return body
