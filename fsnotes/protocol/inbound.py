"""One message's bytes in, its parsed JSON value and cost out (or the error to answer instead),
and what a JSON object is as a JSON-RPC message (:func:`classify`).

Both transports parse here: stdio one line at a time (through
:meth:`~fsnotes.runtime.connection.ServerConnection.receive_line`), Streamable HTTP one POST
body at a time. The checks run in the order that bounds what a peer can make the server hold:
the JSON values are counted on the bytes (in C, before anything is built), then the bytes are
decoded, then parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fsnotes.protocol import limits
from fsnotes.protocol.linecost import LineCost, line_cost
from fsnotes.protocol.registry import JSONObject
from fsnotes.protocol.wire import (
    INVALID_REQUEST,
    META_PROTOCOL_VERSION,
    PARSE_ERROR,
    RequestId,
    error_message,
    valid_id,
)


@dataclass(frozen=True)
class Parsed:
    """A JSON value read from one message, and what its bytes cost (see :mod:`linecost`)."""

    message: Any
    cost: LineCost


@dataclass(frozen=True)
class Rejected:
    """Bytes that are not one usable JSON value: ``error`` is the response to send (no id)."""

    error: JSONObject


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(data: bytes, *, unit: str = "message") -> Parsed | Rejected:
    """Parse one message's bytes (a stdio line without its newline, or an HTTP body);
    ``unit`` names them in the error messages ("line", "message").

    More than :data:`limits.MAX_LINE_VALUES` JSON values is refused unparsed (its values would
    hold up to 25 times its size); so are bytes that are not UTF-8 and text that is not JSON
    (``NaN`` and ``Infinity`` included). Nothing here limits the length: the caller reads at
    most its own limit.
    """
    cost = line_cost(data)
    if cost.values > limits.MAX_LINE_VALUES:
        return Rejected(
            error_message(
                None,
                INVALID_REQUEST,
                f"Message too complex: more than {limits.MAX_LINE_VALUES} JSON values "
                f"in one {unit}; it was skipped unread",
            )
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Rejected(
            error_message(None, PARSE_ERROR, f"Parse error: the {unit} is not valid UTF-8")
        )
    try:
        message = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return Rejected(
            error_message(None, PARSE_ERROR, f"Parse error: the {unit} is not valid JSON")
        )
    return Parsed(message, cost)


# --- what one JSON object is (JSON-RPC 2.0 section 4 and 5) ------------------------------------


@dataclass(frozen=True)
class EraTag:
    """A message's ``params._meta`` ``io.modelcontextprotocol/protocolVersion`` as sent (any
    JSON value, ``null`` included: the dispatcher checks it)."""

    version: Any


def era_tag(params: Any) -> EraTag | None:
    """The message's era tag, or ``None`` when ``_meta`` has no protocol version.

    The one place that reads it (through :attr:`Request.tag`). A tagged message is 2026-07-28,
    whatever session it arrives in (D26 versioning.mdx, dual-era servers); an untagged one is
    served by its session (or, over HTTP, by its ``MCP-Protocol-Version`` header).
    """
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and META_PROTOCOL_VERSION in meta:
        return EraTag(meta[META_PROTOCOL_VERSION])
    return None


@dataclass(frozen=True)
class Request:
    """A request: it gets exactly one answer. ``tag`` is read from ``params`` once, here."""

    id: RequestId
    method: str
    params: Any
    tag: EraTag | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tag", era_tag(self.params))

    @property
    def modern(self) -> bool:
        """Is it tagged 2026-07-28 (``_meta`` names a protocol version)?"""
        return self.tag is not None


@dataclass(frozen=True)
class Notification:
    """A notification: never answered, not even with an error. ``tag`` as a request's."""

    method: str
    params: Any
    tag: EraTag | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tag", era_tag(self.params))

    @property
    def modern(self) -> bool:
        return self.tag is not None


@dataclass(frozen=True)
class Response:
    """A response to one of our server-to-client requests (``id`` as sent, unchecked)."""

    id: Any
    message: JSONObject


@dataclass(frozen=True)
class Ignored:
    """Something that gets no answer: a malformed notification, or a response without id."""


@dataclass(frozen=True)
class Invalid:
    """Not a usable JSON-RPC message: ``error`` is the answer (with the id when readable)."""

    error: JSONObject


Envelope = Request | Notification | Response | Ignored | Invalid


def classify(message: JSONObject) -> Envelope:
    """What the JSON object ``message`` is, by its members (batches are the caller's)."""
    has_id = "id" in message
    raw_id = message.get("id")
    reply_id = raw_id if valid_id(raw_id) else None
    if "method" in message:
        method = message["method"]
        if not has_id:
            # Notifications are never answered, not even malformed ones.
            if message.get("jsonrpc") == "2.0" and isinstance(method, str):
                return Notification(method, message.get("params"))
            return Ignored()
        if not valid_id(raw_id):
            return Invalid(
                error_message(
                    None, INVALID_REQUEST, "Invalid request: id must be a string or integer"
                )
            )
        if message.get("jsonrpc") != "2.0":
            return Invalid(
                error_message(reply_id, INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"')
            )
        if not isinstance(method, str):
            return Invalid(
                error_message(reply_id, INVALID_REQUEST, "Invalid request: method must be a string")
            )
        return Request(raw_id, method, message.get("params"))
    if "result" in message or "error" in message:
        # A response; an error response may omit the id. Responses are never answered.
        return Response(raw_id, message) if has_id else Ignored()
    return Invalid(error_message(reply_id, INVALID_REQUEST, 'Invalid request: no "method"'))
