"""Streamable HTTP's rules on headers, statuses and framing, as pure functions (no I/O, no HTTP
stack): what the endpoint (:mod:`fsnotes.transport.http`) checks and how it frames what it
sends. Spec pages: ``docs/specification/2026-07-28/basic/transports/streamable-http.mdx`` and
``docs/specification/2025-11-25/basic/transports.mdx`` (modelcontextprotocol, b0f60ba5).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from fsnotes.protocol import limits
from fsnotes.protocol.tool_schema import ParamHeader
from fsnotes.protocol.wire import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    Fault,
)

# 2026-07-28 HeaderMismatch (streamable-http "Server Validation"): HTTP only.
HEADER_MISMATCH = -32020

PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
SESSION_HEADER = "mcp-session-id"

# Largest request body, in bytes: the same bound as a stdio line (limits.MAX_LINE_BYTES, whose
# comment gives the reasons: a 4 MiB note, JSON-escaped). A larger one gets 413 unread.
MAX_BODY_BYTES = limits.MAX_LINE_BYTES

# Most bytes of request headers (names, values and their separators): h11's default buffer,
# and node's default max header size (16 KiB). More is answered 431.
MAX_HEADER_BYTES = 16 * 1024

# The body member each method's Mcp-Name mirrors (streamable-http "Standard Request Headers").
NAME_SOURCES = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # The Tasks extension's requests name their task (SEP-2663 "Streamable HTTP: Routing
    # Headers").
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

# The Base64 sentinel form of a header value (streamable-http "Value Encoding"): markers are
# case-sensitive and must appear exactly so.
_B64_PREFIX = "=?base64?"
_B64_SUFFIX = "?="

# HTTP status of a JSON-RPC error of the 2026-07-28 era (streamable-http: 400 for header
# mismatches and unsupported versions, 404 for unknown methods; "modern servers also use 400
# for ... MissingRequiredClientCapabilityError"; 400 for a missing _meta field, as the
# conformance suite's stateless scenario checks). Other errors (a tool's own, internal ones)
# travel in a 200 answer, as the official SDKs send them.
_MODERN_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def status_of(code: int | None) -> int:
    """The HTTP status of a 2026-07-28 answer whose error has ``code`` (``None``: a result)."""
    return 200 if code is None else _MODERN_STATUS.get(code, 200)


def modern_status(message: dict[str, Any]) -> int:
    """The HTTP status of a 2026-07-28 answer: 200, or its error's mapped status."""
    error = message.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return status_of(code if isinstance(code, int) else None)


def media_type(value: str | None) -> str:
    """The media type of a Content-Type or Accept member, lower-cased, parameters dropped."""
    return (value or "").split(";", 1)[0].strip().lower()


def accepts(value: str | None) -> tuple[bool, bool]:
    """Does an Accept header take (application/json, text/event-stream)? Wildcards count
    (RFC 9110 12.5.1); a member with ``q=0`` is refused, so it does not."""
    json_ok = sse_ok = False
    for member in (value or "").split(","):
        kind, *params = (part.strip() for part in member.split(";"))
        kind = kind.lower()
        if any(p.replace(" ", "").lower() in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params):
            continue
        if kind in ("*/*", "application/*", "application/json"):
            json_ok = True
        if kind in ("*/*", "text/*", "text/event-stream"):
            sse_ok = True
    return json_ok, sse_ok


def decode_header_value(value: str) -> str | None:
    """A mirrored header's value as the body would hold it: surrounding whitespace dropped
    (RFC 9110 5.5, OWS), the Base64 sentinel form decoded (strict Base64 of UTF-8); ``None``
    when the sentinel form does not decode, or a plain value holds a character outside visible
    ASCII, space and tab (streamable-http "Value Encoding": such values MUST be encoded)."""
    text = value.strip(" \t")
    if text.startswith(_B64_PREFIX) and text.endswith(_B64_SUFFIX) and len(text) >= 11:
        encoded = text[len(_B64_PREFIX) : -len(_B64_SUFFIX)]
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
    if any(not (c == "\t" or " " <= c <= "~") for c in text):
        return None
    return text


def single(headers: Sequence[tuple[bytes, bytes]], name: str) -> tuple[str | None, bool]:
    """The value of header ``name`` (lower-case) and whether it was sent more than once.

    Values are decoded as Latin-1 (RFC 9110 5.5: anything else is opaque), so a non-ASCII byte
    survives to be refused by :func:`decode_header_value` instead of crashing a decoder.
    """
    key = name.encode("ascii")
    values = [v for k, v in headers if k == key]
    if not values:
        return None, False
    return values[0].decode("latin-1"), len(values) > 1


def mismatch(message: str) -> Fault:
    return Fault(HEADER_MISMATCH, f"Header mismatch: {message}")


def check_mirrored_headers(
    headers: Sequence[tuple[bytes, bytes]], method: str, params: dict[str, Any], version: Any
) -> Fault | None:
    """The 2026-07-28 request's mirrored headers against its body (streamable-http "Server
    Validation"): ``MCP-Protocol-Version`` equal to the ``_meta`` version, ``Mcp-Method`` to
    ``method``, ``Mcp-Name`` (for ``tools/call``, ``resources/read``, ``prompts/get``) to the
    named body value after decoding. A missing, repeated or malformed header is a mismatch too;
    values are compared case-sensitively ("Header values ... are case-sensitive")."""
    for name in (PROTOCOL_VERSION_HEADER, METHOD_HEADER, NAME_HEADER):
        if single(headers, name)[1]:
            return mismatch(f"the {name} header appears more than once")
    sent_version, _ = single(headers, PROTOCOL_VERSION_HEADER)
    if sent_version is None:
        return mismatch("the MCP-Protocol-Version header is missing")
    if sent_version.strip(" \t") != version:
        return mismatch(
            "the MCP-Protocol-Version header does not match the request's "
            "_meta io.modelcontextprotocol/protocolVersion"
        )
    sent_method, _ = single(headers, METHOD_HEADER)
    if sent_method is None:
        return mismatch("the Mcp-Method header is missing")
    if decode_header_value(sent_method) != method:
        return mismatch("the Mcp-Method header does not match the request's method")
    source = NAME_SOURCES.get(method)
    sent_name, _ = single(headers, NAME_HEADER)
    if source is None:
        return None
    body_value = params.get(source)
    if body_value is None and sent_name is None:
        return None  # nothing to mirror: the body's own validation answers the request
    if sent_name is None:
        return mismatch(f"the Mcp-Name header is missing (the body has params.{source})")
    decoded = decode_header_value(sent_name)
    if decoded is None:
        return mismatch("the Mcp-Name header is not plain visible ASCII nor valid =?base64?...?=")
    if decoded != body_value:
        return mismatch(f"the Mcp-Name header does not match the request's params.{source}")
    return None


def check_param_headers(
    headers: Sequence[tuple[bytes, bytes]], params: Sequence[ParamHeader], arguments: Any
) -> Fault | None:
    """A 2026-07-28 ``tools/call``'s ``Mcp-Param-{Name}`` headers against its ``arguments``,
    for the tool's mirrored parameters ``params`` (streamable-http "Server Behavior for Custom
    Headers"): a value in the body needs its header, decoded (:func:`decode_header_value`: an
    invalid character or Base64 form is refused) and equal to it (integers numerically, as the
    spec suggests: ``42.0`` is ``42``; booleans as ``true``/``false``); a header whose value
    the body lacks (absent or null) is refused too, since it would say what the call does not
    do. A repeated header is a mismatch; headers of parameters not mirrored are ignored."""
    for param in params:
        sent, repeated = single(headers, param.header)
        label = f"Mcp-Param-{param.name}"
        if repeated:
            return mismatch(f"the {label} header appears more than once")
        value = _at(arguments, param.path)
        if value is None:
            if sent is not None:
                return mismatch(f"the {label} header is sent but the arguments hold no value")
            continue
        if sent is None:
            return mismatch(f"the {label} header is missing (the arguments hold a value)")
        decoded = decode_header_value(sent)
        if decoded is None:
            return mismatch(f"the {label} header is not plain visible ASCII nor valid Base64")
        if not _same(decoded, value, param.kind):
            return mismatch(f"the {label} header does not match the arguments")
    return None


def _at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _same(header: str, value: Any, kind: str) -> bool:
    """Whether ``header`` says ``value``, a body value of the declared ``kind`` (a value of
    another type matches nothing: its header could not have been made from it)."""
    if kind == "boolean":
        return isinstance(value, bool) and header == ("true" if value else "false")
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        try:
            number = Decimal(header)
        except InvalidOperation:
            return False
        return number.is_finite() and number == Decimal(value)
    return isinstance(value, str) and header == value


def sse_event(line: bytes) -> bytes:
    """One JSON-RPC message (a compact JSON line, as :func:`framing.encode_message` makes it)
    as one SSE event. The JSON holds no newline, so it is one ``data:`` line."""
    return b"event: message\ndata: " + line.rstrip(b"\n") + b"\n\n"


# An SSE comment (ignored by clients): keeps idle streams open through proxies.
SSE_KEEPALIVE = b": keep-alive\n\n"
