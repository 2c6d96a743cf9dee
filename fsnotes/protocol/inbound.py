"""One message's bytes in, its parsed JSON value and cost out (or the error to answer instead),
and what a JSON object is as a JSON-RPC message (:func:`classify`).

Both transports parse here: stdio one line at a time (through
:meth:`~fsnotes.protocol.connection.ServerConnection.receive_line`), Streamable HTTP one POST
body at a time. The checks run in the order that bounds what a peer can make the server hold:
the JSON values are counted on the bytes (in C, before anything is built), then the bytes are
decoded, then parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fsnotes.protocol import limits
from fsnotes.protocol.linecost import LineCost, line_cost
from fsnotes.protocol.registry import JSONObject
from fsnotes.protocol.wire import INVALID_REQUEST, PARSE_ERROR, RequestId, error_message, valid_id


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
class Request:
    """A request: it gets exactly one answer."""

    id: RequestId
    method: str
    params: Any


@dataclass(frozen=True)
class Notification:
    """A notification: never answered, not even with an error."""

    method: str
    params: Any


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
