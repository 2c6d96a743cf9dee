"""The JSON-RPC vocabulary the core speaks: ``_meta`` keys, error codes, error responses and
id rules.

Nothing here holds state or does I/O; every other module of the core builds on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from fsnotes.protocol.registry import JSONObject

# --- _meta keys, error codes (the versions are in versions.py) ---------------------------------

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND_LEGACY = -32002  # 2025-11-25 only; 2026-07-28 retired it for -32602
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
URL_ELICITATION_REQUIRED = -32042  # 2025-11-25 only; 2026-07-28 reserves it, never emitted

RequestId = str | int


class Fault(Exception):
    """A JSON-RPC error response for the current request."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def error_message(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> JSONObject:
    """A JSON-RPC error response; ``id`` is omitted when it could not be read (never null)."""
    error: JSONObject = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    out: JSONObject = {"jsonrpc": "2.0"}
    if request_id is not None:
        out["id"] = request_id
    out["error"] = error
    return out


def fault_message(request_id: RequestId, fault: Fault) -> JSONObject:
    """The error response that ``fault`` stands for."""
    return error_message(request_id, fault.code, fault.message, fault.data)


def valid_id(value: Any) -> TypeGuard[RequestId]:
    """Is ``value`` a usable request id? MCP ids are strings or integers, never null (and a
    JSON boolean is not an integer)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def progress_token(meta: Mapping[str, Any]) -> RequestId | None:
    """The request's ``_meta.progressToken``, if it is a usable one."""
    token = meta.get("progressToken")
    return token if valid_id(token) else None


def cancelled(request_id: int, reason: str) -> JSONObject:
    """``notifications/cancelled`` withdrawing our own request ``request_id``."""
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": reason},
    }
