"""The dual-era MCP server connection: parsed lines in, actions out. Everything revolves here.

:class:`ServerConnection` holds one stdio process's protocol state (is the legacy era switched
on by ``initialize``? which version and capabilities? which client requests are in flight?
which server-to-client requests await an answer?) and turns each incoming line into
:class:`Send`, :class:`StartTask`, :class:`CancelTask` and :class:`DeliverReply` actions. It never
reads, writes, sleeps or looks at a clock: the transport performs the actions, runs each
:class:`StartTask` in its own cancel scope, and supplies a :class:`Peer` (send a message; send a
request and wait, bounded by a timeout the transport measures).

Era rules (mcp-protocol.md §2, §10): a request whose ``params._meta`` carries
``io.modelcontextprotocol/protocolVersion`` is served statelessly as 2026-07-28 ("modern");
``initialize`` switches this process's 2025-11-25 handling ("legacy") on, after which requests
without that key are served with the negotiated version and capabilities. Both may interleave.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeGuard, TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from fsnotes.protocol import limits
from fsnotes.protocol.framing import encode_message
from fsnotes.protocol.linecost import LineCost, line_cost
from fsnotes.protocol.registry import (
    LOG_LEVELS,
    App,
    ElicitForm,
    ElicitURL,
    Era,
    InputRequest,
    InputRequired,
    InternalError,
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
from fsnotes.protocol.schema import describe_validation_error, model_schema
from fsnotes.protocol.versions import ADVERTISED_VERSIONS, LEGACY_VERSIONS, MODERN_VERSIONS

_log = logging.getLogger("fsnotes.protocol")

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

# Legacy logging/setLevel default: before any setLevel the server chooses (2025-11-25 logging).
DEFAULT_LEGACY_LOG_LEVEL = "warning"

RequestId = str | int
TaskKey = tuple[str, RequestId]

# --- actions --------------------------------------------------------------------------------


class Peer(Protocol):
    """What the transport offers a running task."""

    async def send(self, message: JSONObject) -> None:
        """Write one message (a no-op once the client has gone)."""
        ...

    async def write(self, line: bytes) -> None:
        """Write one message already encoded by :func:`framing.encode_message` (a no-op once
        the client has gone). Returns once it is written, or can never be."""
        ...

    async def request(
        self, request_id: int, message: JSONObject, timeout: float
    ) -> JSONObject | None:
        """Send a server-to-client request and wait for the reply delivered by
        :class:`DeliverReply` with ``request_id``; ``None`` after ``timeout`` seconds or when the
        client has gone."""
        ...


@dataclass(frozen=True)
class Send:
    """Write ``message`` to the client."""

    message: JSONObject


@dataclass(frozen=True)
class StartTask:
    """Run ``run(peer)`` as a task in its own cancel scope, known by ``key``."""

    key: TaskKey
    run: Callable[[Peer], Awaitable[None]]


@dataclass(frozen=True)
class CancelTask:
    """Cancel the task known by ``key`` (if it still runs); it must send nothing more."""

    key: TaskKey


@dataclass(frozen=True)
class DeliverReply:
    """The client answered our request ``request_id``; wake its waiter with ``message``."""

    request_id: int
    message: JSONObject


Action = Send | StartTask | CancelTask | DeliverReply


class _Fault(Exception):
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


def _valid_id(value: Any) -> TypeGuard[RequestId]:
    # MCP request ids are strings or integers, never null (and a JSON boolean is not an integer).
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# --- per-request state ----------------------------------------------------------------------


@dataclass
class _Legacy:
    version: str
    capabilities: JSONObject
    client_info: JSONObject | None
    log_level: str = DEFAULT_LEGACY_LOG_LEVEL
    initialized: bool = False


@dataclass
class _Hold:
    """Bytes charged against the in-flight budget, given back together."""

    bytes: int = 0


@dataclass
class _Request:
    id: RequestId
    method: str
    params: JSONObject
    era: Era
    version: str
    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None
    progress_token: RequestId | None = None
    log_level: str | None = None  # modern: the request's opt-in level, else no log notifications
    input_responses: Mapping[str, Any] | None = None
    request_state: str | None = None
    last_progress: float | None = None
    active: bool = True
    charge: int = 0  # what the request's line holds once parsed (LineCost.charge)
    # May it run again if its answer is dropped? Only if it reads (a read-only tool, resources,
    # prompts, completion) and asked the client nothing (a second run would ask again).
    reads_only: bool = False
    asked: bool = False
    # Charged for the request and the answers it waits for; given back when its task ends.
    hold: _Hold = field(default_factory=_Hold)


@dataclass(frozen=True)
class _InputUnavailable:
    """The legacy adapter could not get the input (no capability, error, timeout, too many)."""

    text: str


class _Runtime:
    """The core's side of a request in flight: progress and log notifications."""

    def __init__(self, conn: ServerConnection, request: _Request, peer: Peer) -> None:
        self._conn = conn
        self._request = request
        self._peer = peer

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        req = self._request
        # Progress only for a token of a request still in flight, strictly increasing.
        if not req.active or req.progress_token is None:
            return
        if req.last_progress is not None and not progress > req.last_progress:
            _log.debug("dropped non-increasing progress %r for request %r", progress, req.id)
            return
        req.last_progress = progress
        params: JSONObject = {"progressToken": req.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._peer.send(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        )

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        req = self._request
        if not req.active:
            return
        if req.era == "modern":
            threshold = req.log_level  # 2026-07-28: never without the request's opt-in
        else:
            legacy = self._conn._legacy
            threshold = legacy.log_level if legacy is not None else None
        if threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        params: JSONObject = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._peer.send(
            {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        )

    def completion_notifier(self, elicitation_id: str) -> Callable[[], Awaitable[None]] | None:
        if self._request.era != "legacy":
            return None
        conn, peer = self._conn, self._peer
        known = conn._completion_notifiers.get(elicitation_id)
        if known is not None:
            return known  # one per id and connection, so callers can de-duplicate
        message: JSONObject = {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": elicitation_id},
        }

        async def notify() -> None:
            # Connection-scoped, not request-scoped: the out-of-band step usually ends after
            # the request that started it. Only the originating client gets it (the spec).
            if not conn._closed:
                await peer.send(message)

        conn._completion_notifiers[elicitation_id] = notify
        return notify


T = TypeVar("T")

# --- the connection -------------------------------------------------------------------------


@dataclass
class _ToolEntry:
    tool: Tool[Any, Any]
    input_schema: JSONObject
    descriptor: JSONObject


@dataclass
class ServerConnection:
    """One stdio process's MCP server state machine (both eras). See the module docstring."""

    app: App
    tools_page_size: int = limits.TOOLS_PAGE_SIZE
    max_in_flight: int = limits.MAX_IN_FLIGHT
    max_in_flight_bytes: int = limits.MAX_IN_FLIGHT_BYTES
    max_pending_answer_bytes: int = limits.MAX_PENDING_ANSWER_BYTES
    input_timeout: float = limits.INPUT_REQUEST_TIMEOUT_S
    roots_timeout: float = limits.ROOTS_REQUEST_TIMEOUT_S
    max_input_rounds: int = limits.MAX_INPUT_ROUNDS

    _legacy: _Legacy | None = field(default=None, init=False)
    _in_flight: dict[TaskKey, _Request] = field(default_factory=dict, init=False)
    # Our server-to-client requests awaiting an answer, with what the answer is charged to.
    _pending: dict[int, _Hold] = field(default_factory=dict, init=False)
    _held_bytes: int = field(default=0, init=False)
    # Encoded answers of finished requests waiting to be written, and room reserved for answers
    # being computed again (see _admit); the event is set whenever that falls.
    _answer_bytes: int = field(default=0, init=False)
    _answer_room: anyio.Event | None = field(default=None, init=False)
    _rerun_turn: anyio.Lock | None = field(default=None, init=False)
    _next_server_id: int = field(default=1, init=False)
    _closed: bool = field(default=False, init=False)
    _roots_running: bool = field(default=False, init=False)
    _roots_again: bool = field(default=False, init=False)
    _roots_runs: int = field(default=0, init=False)
    # Legacy elicitation/complete senders by elicitation id. Bounded in practice by the
    # handlers that ask (the setup flow: a few pending setups per principal).
    _completion_notifiers: dict[str, Callable[[], Awaitable[None]]] = field(
        default_factory=dict, init=False
    )

    def __post_init__(self) -> None:
        self._tools: dict[str, _ToolEntry] = {}
        for tool in self.app.tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = self._describe(tool)
        self._tool_order = list(self._tools)
        names = "\n".join(self._tool_order).encode()
        # Cursors name the tool list they page through, so a stale or forged one is rejected.
        self._tools_fingerprint = hashlib.sha256(names).hexdigest()[:12]
        info: JSONObject = {"name": self.app.name, "version": self.app.version}
        if self.app.title:
            info["title"] = self.app.title
        self._server_info = info

    # --- public surface --------------------------------------------------------------------

    @property
    def legacy_version(self) -> str | None:
        """The version negotiated by ``initialize``, or ``None`` before it."""
        return self._legacy.version if self._legacy else None

    @property
    def in_flight(self) -> int:
        """How many client requests are being handled now."""
        return len(self._in_flight)

    @property
    def in_flight_bytes(self) -> int:
        """Bytes charged for the requests whose tasks still run and the answers they wait for
        (each line's :attr:`LineCost.charge`), at most ``max_in_flight_bytes``."""
        return self._held_bytes

    @property
    def pending_answer_bytes(self) -> int:
        """Bytes of the encoded answers that finished requests hold until they are written, and
        of the room reserved for answers being computed again (see :meth:`_admit`)."""
        return self._answer_bytes

    @property
    def answers_backlogged(self) -> bool:
        """Do answers waiting to be written fill half of ``max_pending_answer_bytes`` or more?
        While they do, the transport should read no more requests (a high-water mark, as in
        node's streams): the client is not keeping up, and the other half is left for the
        answers of requests already running."""
        return self._answer_bytes * 2 >= self.max_pending_answer_bytes

    async def answers_drained(self) -> None:
        """Return once :attr:`answers_backlogged` is false (at once if it is)."""
        while self.answers_backlogged:
            await self._answer_room_changed()

    async def _answer_room_changed(self) -> None:
        if self._answer_room is None:
            self._answer_room = anyio.Event()
        await self._answer_room.wait()

    def _free_answer_bytes(self, size: int) -> None:
        self._answer_bytes -= size
        room, self._answer_room = self._answer_room, None
        if room is not None:
            room.set()

    def _fits(self, size: int) -> bool:
        """May an answer of ``size`` bytes be kept beside those already waiting?"""
        waiting = self._answer_bytes
        return (
            size <= limits.SMALL_ANSWER_BYTES
            or not waiting
            or waiting + size <= self.max_pending_answer_bytes
        )

    def receive_line(self, line: bytes) -> list[Action]:
        """Handle one line (without its newline).

        A line of more than :data:`limits.MAX_LINE_VALUES` JSON values is refused unparsed (its
        values would hold up to 25 times its size); a request whose line would take the
        requests in flight past ``max_in_flight_bytes`` is answered "busy".
        """
        cost = line_cost(line)
        if cost.values > limits.MAX_LINE_VALUES:
            return [
                Send(
                    error_message(
                        None,
                        INVALID_REQUEST,
                        f"Message too complex: more than {limits.MAX_LINE_VALUES} JSON values "
                        "in one line; it was skipped unread",
                    )
                )
            ]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return [
                Send(error_message(None, PARSE_ERROR, "Parse error: the line is not valid UTF-8"))
            ]
        try:
            message = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return [
                Send(error_message(None, PARSE_ERROR, "Parse error: the line is not valid JSON"))
            ]
        return self._receive(message, cost)

    def line_too_long(self, limit: int) -> list[Action]:
        """A line longer than ``limit`` bytes was skipped unread."""
        return [
            Send(
                error_message(
                    None,
                    INVALID_REQUEST,
                    f"Message too large: lines longer than {limit} bytes are skipped",
                )
            )
        ]

    def client_closed(self) -> None:
        """The client's input ended: nothing more can be answered by it."""
        self._closed = True

    def receive_message(self, message: Any) -> list[Action]:
        """Handle one parsed JSON value (charged as the compact JSON line it would be)."""
        return self._receive(message, None)

    def _receive(self, message: Any, cost: LineCost | None) -> list[Action]:
        """Handle one parsed value; ``cost`` is its line's, or ``None`` to measure it here."""
        if isinstance(message, list):
            if message and self._legacy is not None and self._legacy.version == "2025-03-26":
                # 2025-03-26 only: servers MUST support receiving batches. Each member is
                # handled (and answered) as if it had come on its own line, up to a cap: every
                # member costs a reply, so an uncapped batch of tiny members multiplies the line.
                if len(message) > limits.MAX_BATCH_MEMBERS:
                    return [
                        Send(
                            error_message(
                                None,
                                INVALID_REQUEST,
                                f"Batch too large: at most {limits.MAX_BATCH_MEMBERS} messages "
                                "in one batch; nothing in it was handled",
                            )
                        )
                    ]
                actions: list[Action] = []
                for item in message:
                    if isinstance(item, list):
                        item = None  # no nested batches: answered as "not a JSON object"
                    # Each member is charged for itself (measured on its own JSON): the line's
                    # charge would over-count, and a share of it could under-count the member
                    # that outlives the others.
                    actions += self._receive(item, None)
                return actions
            # JSON-RPC batches were removed in 2025-06-18; the id cannot be chosen, so omit it.
            return [
                Send(
                    error_message(
                        None,
                        INVALID_REQUEST,
                        "Batches are not supported: send one JSON-RPC message per line",
                    )
                )
            ]
        if not isinstance(message, dict):
            return [
                Send(error_message(None, INVALID_REQUEST, "Invalid request: not a JSON object"))
            ]
        if cost is None:
            cost = _cost_of(message)
        has_id = "id" in message
        raw_id = message.get("id")
        reply_id = raw_id if _valid_id(raw_id) else None
        if "method" in message:
            method = message["method"]
            if not has_id:
                # Notifications are never answered, not even malformed ones.
                if message.get("jsonrpc") == "2.0" and isinstance(method, str):
                    return self._on_notification(method, message.get("params"))
                return []
            if not _valid_id(raw_id):
                return [
                    Send(
                        error_message(
                            None, INVALID_REQUEST, "Invalid request: id must be a string or integer"
                        )
                    )
                ]
            if message.get("jsonrpc") != "2.0":
                return [
                    Send(
                        error_message(
                            reply_id, INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"'
                        )
                    )
                ]
            if not isinstance(method, str):
                return [
                    Send(
                        error_message(
                            reply_id, INVALID_REQUEST, "Invalid request: method must be a string"
                        )
                    )
                ]
            assert reply_id is not None
            return self._on_request(reply_id, method, message.get("params"), cost.charge)
        if "result" in message or "error" in message:
            # A response; an error response may omit the id. Responses are never answered.
            return self._on_response(raw_id, message, cost.charge) if has_id else []
        return [Send(error_message(reply_id, INVALID_REQUEST, 'Invalid request: no "method"'))]

    # --- notifications and responses --------------------------------------------------------

    def _on_notification(self, method: str, params: Any) -> list[Action]:
        if method == "notifications/cancelled":
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if not _valid_id(request_id):
                return []
            key: TaskKey = ("request", request_id)
            request = self._in_flight.pop(key, None)
            if request is None:
                return []  # unknown or finished: ignore (cancellation §receiver)
            request.active = False
            return [CancelTask(key)]
        if self._legacy is not None and method == "notifications/initialized":
            self._legacy.initialized = True
            return self._schedule_roots()
        if self._legacy is not None and method == "notifications/roots/list_changed":
            return self._schedule_roots()
        return []

    def _on_response(self, raw_id: Any, message: JSONObject, charge: int) -> list[Action]:
        # Only answers to our own pending requests count; anything else is ignored.
        if isinstance(raw_id, int) and not isinstance(raw_id, bool) and raw_id in self._pending:
            hold = self._pending.pop(raw_id)
            if not self._reserve(hold, charge):
                # The waiting task keeps the answer until it ends: charged like a request, and
                # dropped (the task sees an error answer) when the budget cannot take it.
                message = error_message(
                    raw_id,
                    INTERNAL_ERROR,
                    f"answer dropped: {charge} bytes would take the requests in flight past "
                    f"{self.max_in_flight_bytes}",
                )
            return [DeliverReply(raw_id, message)]
        _log.info("ignored a response to id %r, which has no pending request", raw_id)
        return []

    # --- requests: era selection and validation ----------------------------------------------

    def _on_request(
        self, request_id: RequestId, method: str, params: Any, charge: int
    ) -> list[Action]:
        if ("request", request_id) in self._in_flight:
            return [
                Send(
                    error_message(
                        request_id, INVALID_REQUEST, "Invalid request: this id is already in flight"
                    )
                )
            ]
        if params is not None and not isinstance(params, dict):
            return [
                Send(
                    error_message(
                        request_id, INVALID_PARAMS, "Invalid params: params must be an object"
                    )
                )
            ]
        params = params or {}
        meta = params.get("_meta")
        modern_tagged = isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
        try:
            if method == "initialize":
                return self._initialize(request_id, params)
            if modern_tagged or method == "server/discover":
                return self._modern(request_id, method, params, charge)
            if method == "ping":
                # Legacy ping is allowed even before initialize (2025-11-25 lifecycle).
                return [Send({"jsonrpc": "2.0", "id": request_id, "result": {}})]
            if self._legacy is not None:
                return self._legacy_request(request_id, method, params, charge)
            raise _Fault(
                INVALID_PARAMS,
                f"Missing _meta[{META_PROTOCOL_VERSION!r}]: send it with clientCapabilities on "
                "every request (2026-07-28), or call initialize first (2025-11-25)",
            )
        except _Fault as fault:
            return [Send(error_message(request_id, fault.code, fault.message, fault.data))]

    def _initialize(self, request_id: RequestId, params: JSONObject) -> list[Action]:
        if self._legacy is not None:
            # 2025-11-25 lifecycle: "The initialization phase MUST be the first interaction
            # between client and server." Once it succeeded, the negotiated version and
            # capabilities hold for the process; a second initialize cannot change them (nor
            # switch a session into 2025-03-26 batch handling).
            raise _Fault(
                INVALID_REQUEST,
                f"Invalid request: already initialized (protocol {self._legacy.version}); "
                "initialize is sent once per connection",
            )
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise _Fault(
                INVALID_PARAMS, "Invalid params: initialize needs a protocolVersion string"
            )
        capabilities = params.get("capabilities", {})
        if not isinstance(capabilities, dict):
            raise _Fault(INVALID_PARAMS, "Invalid params: capabilities must be an object")
        client_info = params.get("clientInfo")
        version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        self._legacy = _Legacy(
            version=version,
            capabilities=capabilities,
            client_info=client_info if isinstance(client_info, dict) else None,
        )
        result: JSONObject = {
            "protocolVersion": version,
            "capabilities": self._capabilities(modern=False),
            "serverInfo": self._server_info,
        }
        if self.app.instructions:
            result["instructions"] = self.app.instructions
        return [Send({"jsonrpc": "2.0", "id": request_id, "result": result})]

    def _capabilities(self, *, modern: bool) -> JSONObject:
        caps: JSONObject = {"tools": {} if modern else {"listChanged": False}, "logging": {}}
        if self.app.resources is not None:
            caps["resources"] = {} if modern else {"subscribe": False, "listChanged": False}
            caps["completions"] = {}
        if self.app.prompts is not None:
            caps["prompts"] = {} if modern else {"listChanged": False}
        return caps

    def _modern(
        self, request_id: RequestId, method: str, params: JSONObject, charge: int
    ) -> list[Action]:
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            raise _Fault(INVALID_PARAMS, "Invalid params: params._meta is required (2026-07-28)")
        version = meta.get(META_PROTOCOL_VERSION)
        if not isinstance(version, str):
            raise _Fault(
                INVALID_PARAMS, f"Invalid params: _meta[{META_PROTOCOL_VERSION!r}] must be a string"
            )
        capabilities = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise _Fault(
                INVALID_PARAMS,
                f"Invalid params: _meta[{META_CLIENT_CAPABILITIES!r}] must be an object"
                " ({} for none)",
            )
        if version not in MODERN_VERSIONS:
            # data.supported and data.requested are both required (2026-07-28 versioning);
            # supported lists only versions a retry can use (see versions.py).
            raise _Fault(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(ADVERTISED_VERSIONS), "requested": version},
            )
        log_level = meta.get(META_LOG_LEVEL)
        if log_level is not None and log_level not in LOG_LEVELS:
            raise _Fault(INVALID_PARAMS, f"Invalid params: unknown log level {log_level!r}")
        client_info = meta.get(META_CLIENT_INFO)
        request = _Request(
            id=request_id,
            method=method,
            params=params,
            era="modern",
            version=version,
            capabilities=capabilities,
            client_info=client_info if isinstance(client_info, dict) else None,
            progress_token=_progress_token(meta),
            log_level=log_level,
            charge=charge,
        )
        if method in ("tools/call", "resources/read", "prompts/get"):
            responses = params.get("inputResponses")
            state = params.get("requestState")
            if responses is not None and not isinstance(responses, dict):
                raise _Fault(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
            if state is not None and not isinstance(state, str):
                raise _Fault(INVALID_PARAMS, "Invalid params: requestState must be a string")
            request.input_responses = responses
            request.request_state = state
        if method == "server/discover":
            result: JSONObject = {
                "supportedVersions": list(ADVERTISED_VERSIONS),
                "capabilities": self._capabilities(modern=True),
                "ttlMs": limits.DISCOVER_TTL_MS,
                "cacheScope": "public",
            }
            if self.app.instructions:
                result["instructions"] = self.app.instructions
            return [Send(self._result(request, result))]
        return self._dispatch(request)

    def _legacy_request(
        self, request_id: RequestId, method: str, params: JSONObject, charge: int
    ) -> list[Action]:
        legacy = self._legacy
        assert legacy is not None
        meta = params.get("_meta")
        request = _Request(
            id=request_id,
            method=method,
            params=params,
            era="legacy",
            version=legacy.version,
            capabilities=legacy.capabilities,
            client_info=legacy.client_info,
            progress_token=_progress_token(meta) if isinstance(meta, dict) else None,
            charge=charge,
        )
        if method == "logging/setLevel":
            level = params.get("level")
            if level not in LOG_LEVELS:
                raise _Fault(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
            legacy.log_level = str(level)
            return [Send(self._result(request, {}))]
        return self._dispatch(request)

    # --- routing -------------------------------------------------------------------------------

    def _dispatch(self, request: _Request) -> list[Action]:
        method = request.method
        if method == "tools/list":
            return [Send(self._result(request, self._tools_list(request)))]
        handler: Callable[[_Request, Peer], Awaitable[JSONObject]] | None = None
        if method == "tools/call":
            handler = self._tools_call
        elif self.app.resources is not None and method == "resources/list":
            handler = self._resources_list
        elif self.app.resources is not None and method == "resources/templates/list":
            handler = self._resources_templates
        elif self.app.resources is not None and method == "resources/read":
            handler = self._resources_read
        elif self.app.resources is not None and method == "completion/complete":
            handler = self._complete
        elif self.app.prompts is not None and method == "prompts/list":
            handler = self._prompts_list
        elif self.app.prompts is not None and method == "prompts/get":
            handler = self._prompts_get
        if handler is None:
            # Unknown, removed in this era, or a capability we did not advertise.
            raise _Fault(METHOD_NOT_FOUND, f"Method not found: {method}")
        if method == "tools/call":
            name = request.params.get("name")
            entry = self._tools.get(name) if isinstance(name, str) else None
            request.reads_only = entry is not None and entry.tool.annotations.read_only
        else:
            request.reads_only = True  # resources, prompts and completion only read
        return self._start(request, handler)

    def _start(
        self, request: _Request, handler: Callable[[_Request, Peer], Awaitable[JSONObject]]
    ) -> list[Action]:
        if len(self._in_flight) >= self.max_in_flight:
            raise _Fault(
                INTERNAL_ERROR,
                f"Server busy: {self.max_in_flight} requests are already in flight; retry later",
            )
        if not self._reserve(request.hold, request.charge):
            raise _Fault(
                INTERNAL_ERROR,
                f"Server busy: this request is charged {request.charge} bytes (what its line "
                f"holds parsed), and the requests in flight already hold {self._held_bytes} of "
                f"{self.max_in_flight_bytes}; retry later",
            )
        key: TaskKey = ("request", request.id)
        self._in_flight[key] = request

        async def run(peer: Peer) -> None:
            reserved = 0
            try:
                # The answer is passed on, never named here: this frame must not keep it alive
                # while it waits to be written (only its encoding is held, and charged).
                line = self._admit(key, request, await self._outcome(request, handler, peer), 0)
                while isinstance(line, int):
                    # Dropped for want of room: run again once an answer of its size fits, with
                    # that room reserved meanwhile (turns taken in order), so a backlog is
                    # recomputed as fast as it drains and never in vain.
                    if self._rerun_turn is None:
                        self._rerun_turn = anyio.Lock()
                    async with self._rerun_turn:
                        while not self._fits(line):
                            await self._answer_room_changed()
                        reserved = line
                        self._answer_bytes += reserved
                    line = self._admit(
                        key, request, await self._outcome(request, handler, peer), reserved
                    )
                    reserved = 0
                if line:
                    await self._deliver(peer, line)
            finally:
                if reserved:
                    self._free_answer_bytes(reserved)
                if self._in_flight.get(key) is request:
                    del self._in_flight[key]
                request.active = False
                # Given back when the task ends, not when a cancel arrives: a cancelled handler
                # may still be running (in a worker thread) and holding its arguments.
                self._release(request.hold)

        return [StartTask(key, run)]

    async def _outcome(
        self,
        request: _Request,
        handler: Callable[[_Request, Peer], Awaitable[JSONObject]],
        peer: Peer,
    ) -> JSONObject:
        """The response to ``request``: its handler's result, or the error it ended with."""
        try:
            return self._result(request, await handler(request, peer))
        except _Fault as fault:
            return error_message(request.id, fault.code, fault.message, fault.data)
        except InvalidParams as exc:
            return error_message(request.id, INVALID_PARAMS, exc.message, exc.data)
        except InternalError as exc:
            return error_message(request.id, INTERNAL_ERROR, exc.message)
        except (MissingCapability, URLElicitationRequired) as exc:
            answer = self._handler_fault(request, exc)
            return error_message(request.id, answer.code, answer.message, answer.data)
        except Exception:
            _log.exception("internal error in %s (request %r)", request.method, request.id)
            return error_message(request.id, INTERNAL_ERROR, "Internal error")

    def _admit(
        self, key: TaskKey, request: _Request, message: JSONObject, reserved: int
    ) -> bytes | int:
        """Encode ``message``, the response to ``request``, and charge it to the answers waiting
        to be written (in place of the ``reserved`` room, given back here); return the line for
        :meth:`_deliver`, ``b""`` if the request was cancelled (it gets nothing more), or the
        answer's size if it was dropped and the request is to run again when that fits.

        An answer larger than :data:`limits.SMALL_ANSWER_BYTES` that would take the answers
        waiting past ``max_pending_answer_bytes`` is dropped, unless nothing else waits (so any
        one answer can be delivered): a request that only reads runs again, any other is
        answered "busy". Small answers are always kept: what writes, deletes and errors answer
        is never replaced after the work was done. Nothing keeps ``message`` once this returns
        (the caller must not name it), so a dropped answer is freed at once and a kept one is
        held once, as bytes.
        """
        if reserved:
            self._free_answer_bytes(reserved)
        # A cancelled request gets nothing more (cancellation: "send no response").
        if self._in_flight.get(key) is not request:
            return b""
        try:
            line = encode_message(message)
        except (TypeError, ValueError):
            # A result JSON cannot carry (a handler bug): encoding fails before anything is
            # written, so the client still gets exactly one answer.
            _log.exception("result of %s (request %r) is not JSON", request.method, request.id)
            line = encode_message(error_message(request.id, INTERNAL_ERROR, "Internal error"))
        size = len(line)
        if not self._fits(size):
            waiting = self._answer_bytes
            if request.reads_only and not request.asked:
                _log.debug(
                    "the %d-byte answer to request %r waits for room (%d bytes of answers "
                    "wait to be written); it will be computed again",
                    size,
                    request.id,
                    waiting,
                )
                return size
            _log.warning(
                "dropped the %d-byte answer to request %r: %d bytes of answers wait for the "
                "client to read them",
                size,
                request.id,
                waiting,
            )
            line = encode_message(
                error_message(
                    request.id,
                    INTERNAL_ERROR,
                    f"Server busy: this request was carried out, but its {size}-byte answer "
                    f"was dropped: {waiting} bytes of earlier answers are waiting for the "
                    f"client to read them (at most {self.max_pending_answer_bytes} are kept)",
                )
            )
        del self._in_flight[key]
        request.active = False
        self._answer_bytes += len(line)
        return line

    async def _deliver(self, peer: Peer, line: bytes) -> None:
        """Write an answer :meth:`_admit` charged, and give its charge back once written."""
        try:
            await peer.write(line)
        finally:
            self._free_answer_bytes(len(line))

    def _reserve(self, hold: _Hold, charge: int) -> bool:
        """Charge ``charge`` bytes to ``hold`` if the in-flight budget has room."""
        if self._held_bytes + charge > self.max_in_flight_bytes:
            return False
        hold.bytes += charge
        self._held_bytes += charge
        return True

    def _release(self, hold: _Hold) -> None:
        self._held_bytes -= hold.bytes
        hold.bytes = 0

    def _handler_fault(
        self, request: _Request, exc: MissingCapability | URLElicitationRequired
    ) -> _Fault:
        """The error response for a handler's capability or URL-elicitation exception."""
        if isinstance(exc, MissingCapability):
            if request.era == "modern":
                return _Fault(
                    MISSING_CLIENT_CAPABILITY, exc.message, {"requiredCapabilities": exc.required}
                )
            return _Fault(INVALID_REQUEST, exc.message)
        if request.era == "modern":
            _log.error(
                "handler of %s raised URLElicitationRequired in a 2026-07-28 request (a bug: "
                "-32042 is retired there; return InputRequired instead)",
                request.method,
            )
            return _Fault(INTERNAL_ERROR, "Internal error")
        declared = RequestContext(
            era=request.era,
            protocol_version=request.version,
            method=request.method,
            client_capabilities=request.capabilities,
            client_info=request.client_info,
        )
        if not declared.supports_elicitation("url"):
            return _Fault(
                INVALID_REQUEST,
                "This needs a visit to a URL (elicitation, URL mode), but the client did not "
                "declare that capability, so it cannot ask.",
            )
        return _Fault(
            URL_ELICITATION_REQUIRED,
            exc.message,
            {"elicitations": [_elicit_params(e, era="legacy") for e in exc.elicitations]},
        )

    def _result(self, request: _Request, body: JSONObject) -> JSONObject:
        if request.era == "modern":
            # 2026-07-28: resultType and serverInfo on every result.
            meta = dict(body.get("_meta") or {})
            meta[META_SERVER_INFO] = self._server_info
            body = {"resultType": "complete", **body, "_meta": meta}
        return {"jsonrpc": "2.0", "id": request.id, "result": body}

    def _context(
        self,
        request: _Request,
        peer: Peer,
        responses: Mapping[str, Any] | None,
        state: str | None,
    ) -> RequestContext:
        return RequestContext(
            era=request.era,
            protocol_version=request.version,
            method=request.method,
            client_capabilities=request.capabilities,
            client_info=request.client_info,
            input_responses=responses,
            request_state=state,
            runtime=_Runtime(self, request, peer),
        )

    # --- multi round-trip: one handler, two eras -------------------------------------------------

    async def _drive(
        self,
        request: _Request,
        peer: Peer,
        call: Callable[[RequestContext], Awaitable[T | InputRequired]],
    ) -> T | InputRequired | _InputUnavailable:
        """Call a handler until it completes (legacy: asking the client live in between).

        Modern: an InputRequired is returned for encoding (after the capability check).
        Legacy: each input request becomes a live request with our own id; the handler is then
        called again with the answers and the state it returned, at most ``max_input_rounds``.
        """
        responses = request.input_responses
        state = request.request_state
        rounds = 0
        while True:
            outcome = await call(self._context(request, peer, responses, state))
            if not isinstance(outcome, InputRequired):
                return outcome
            if not outcome.requests and outcome.state is None:
                raise ValueError("InputRequired needs at least one request or a state")
            ctx = self._context(request, peer, None, None)
            missing = [r for r in outcome.requests.values() if not ctx.supports(r)]
            if missing:
                if request.era == "modern":
                    # -32021: the capability must be declared on *this* request.
                    raise _Fault(
                        MISSING_CLIENT_CAPABILITY,
                        "Missing required client capability: "
                        + ", ".join(_describe_need(r) for r in missing),
                        {"requiredCapabilities": _required_capabilities(missing)},
                    )
                return _InputUnavailable(
                    "This needs input from the user ("
                    + ", ".join(_describe_need(r) for r in missing)
                    + "), but the client did not declare that capability, so it cannot ask. "
                    "Use a client or host that supports it."
                )
            if request.era == "modern":
                return outcome
            rounds += 1
            if rounds > self.max_input_rounds:
                return _InputUnavailable(
                    f"Gave up after {self.max_input_rounds} rounds of asking the client for input."
                )
            answers: dict[str, Any] = {}
            for key, input_request in outcome.requests.items():
                method, params = _legacy_request_of(input_request)
                timeout = self.roots_timeout if method == "roots/list" else self.input_timeout
                request.asked = True
                reply = await self._ask(peer, method, params, timeout, request.hold)
                what = _describe_need(input_request)
                if reply is None:
                    return _InputUnavailable(
                        f"The client did not answer the request for {what} within {timeout:g} s, "
                        "so nothing was done."
                    )
                error = reply.get("error")
                result = reply.get("result")
                if error is not None or not isinstance(result, dict):
                    detail = error.get("message") if isinstance(error, dict) else None
                    return _InputUnavailable(
                        f"The client could not provide {what}"
                        + (f" ({detail})" if isinstance(detail, str) else "")
                        + ", so nothing was done."
                    )
                answers[key] = result
            responses, state = answers, outcome.state

    async def _ask(
        self, peer: Peer, method: str, params: JSONObject | None, timeout: float, hold: _Hold
    ) -> JSONObject | None:
        """A legacy server-to-client request; ``None`` on timeout or when the client is gone.
        The answer is charged to ``hold`` (its owner gives it back)."""
        if self._closed:
            return None
        request_id = self._next_server_id
        self._next_server_id += 1
        message: JSONObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._pending[request_id] = hold
        try:
            reply = await peer.request(request_id, message, timeout)
        except anyio.get_cancelled_exc_class():
            if request_id in self._pending and not self._closed:
                del self._pending[request_id]
                with anyio.CancelScope(shield=True):
                    await peer.send(
                        _cancelled(request_id, "the request that needed this input was cancelled")
                    )
            raise
        if reply is None and request_id in self._pending and not self._closed:
            # Cancellation works both ways in 2025-11-25: withdraw the unanswered request.
            await peer.send(_cancelled(request_id, "no answer in time"))
        self._pending.pop(request_id, None)
        return reply

    def _schedule_roots(self) -> list[Action]:
        legacy = self._legacy
        on_roots = self.app.on_roots
        if (
            legacy is None
            or on_roots is None
            or not isinstance(legacy.capabilities.get("roots"), dict)
        ):
            return []
        if self._roots_running:
            self._roots_again = True  # the running fetch asks once more when it is done
            return []
        self._roots_running = True
        self._roots_runs += 1

        async def run(peer: Peer) -> None:
            hold = _Hold()
            try:
                while True:
                    self._roots_again = False
                    reply = await self._ask(peer, "roots/list", None, self.roots_timeout, hold)
                    result = reply.get("result") if reply else None
                    roots = result.get("roots") if isinstance(result, dict) else None
                    if isinstance(roots, list):
                        try:
                            await on_roots([r for r in roots if isinstance(r, dict)])
                        except Exception:
                            _log.exception("on_roots failed; roots are hints, ignoring")
                    else:
                        _log.warning("roots/list gave no usable answer; roots are hints, ignoring")
                    self._release(hold)
                    if not self._roots_again:
                        return
            finally:
                self._roots_running = False
                self._release(hold)

        return [StartTask(("roots", self._roots_runs), run)]

    # --- tools -------------------------------------------------------------------------------

    @staticmethod
    def _describe(tool: Tool[Any, Any]) -> _ToolEntry:
        input_schema = model_schema(tool.input_model)
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
        return _ToolEntry(tool, input_schema, descriptor)

    def _tools_list(self, request: _Request) -> JSONObject:
        start = self._decode_cursor(request.params.get("cursor"))
        end = start + self.tools_page_size
        page = [self._tools[name].descriptor for name in self._tool_order[start:end]]
        body: JSONObject = {"tools": page}
        if end < len(self._tool_order):
            body["nextCursor"] = self._encode_cursor(end)
        if request.era == "modern":
            body["ttlMs"] = limits.TOOLS_LIST_TTL_MS
            body["cacheScope"] = "public"
        return body

    def _encode_cursor(self, offset: int) -> str:
        raw = json.dumps([offset, self._tools_fingerprint]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _decode_cursor(self, cursor: Any) -> int:
        # An empty-string cursor is valid (2026-07-28 pagination); we never issue one, so it
        # means the first page.
        if cursor is None or cursor == "":
            return 0
        bad = _Fault(
            INVALID_PARAMS, "Invalid params: invalid or expired cursor; list again from the start"
        )
        if not isinstance(cursor, str) or len(cursor) > 200:
            raise bad
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            offset, fingerprint = json.loads(raw)
        except (ValueError, TypeError, binascii.Error):
            raise bad from None
        if (
            fingerprint != self._tools_fingerprint
            or not isinstance(offset, int)
            or isinstance(offset, bool)
            or not 0 < offset < len(self._tool_order)
        ):
            raise bad
        return offset

    async def _tools_call(self, request: _Request, peer: Peer) -> JSONObject:
        name = request.params.get("name")
        if not isinstance(name, str):
            raise _Fault(INVALID_PARAMS, "Invalid params: tools/call needs a tool name")
        entry = self._tools.get(name)
        if entry is None:
            raise _Fault(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = request.params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise _Fault(INVALID_PARAMS, "Invalid params: arguments must be an object")
        tool = entry.tool
        try:
            model = tool.input_model.model_validate(arguments or {})
        except ValidationError as exc:
            # Argument errors are tool errors the model can fix (SEP-1303), not -32602.
            return _text_result(
                describe_validation_error(name, exc, entry.input_schema), is_error=True
            )

        async def call(ctx: RequestContext) -> ToolResult | InputRequired:
            outcome = await tool.handler(ctx, model)
            if isinstance(outcome, BaseModel):
                return ToolResult(structured=outcome)  # the tool's result model
            return outcome

        try:
            outcome = await self._drive(request, peer, call)
        except (_Fault, InvalidParams, URLElicitationRequired):
            raise
        except MissingCapability as exc:
            if request.era == "modern":
                raise
            # 2025-11-25 has no capability error code: tools report it as a tool error.
            return _text_result(exc.message, is_error=True)
        except ResourceNotFound as exc:
            return _text_result(f"{exc}. Check the URI and try again.", is_error=True)
        except ToolError as exc:
            body = _text_result(exc.message, is_error=True)
            if exc.structured is not None:
                body["structuredContent"] = exc.structured
            return body
        except Exception:
            _log.exception("tool %s failed (request %r)", name, request.id)
            return _text_result("Internal error", is_error=True)
        if isinstance(outcome, InputRequired):
            return _encode_input_required(outcome)
        if isinstance(outcome, _InputUnavailable):
            return _text_result(outcome.text, is_error=True)
        return _tool_result(outcome)

    # --- resources, completion, prompts --------------------------------------------------------

    def _page(self, request: _Request) -> str | None:
        cursor = request.params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise _Fault(INVALID_PARAMS, "Invalid params: cursor must be a string")
        return cursor

    def _cache(self, request: _Request, body: JSONObject) -> JSONObject:
        if request.era == "modern":
            body["ttlMs"] = limits.RESOURCES_TTL_MS
            body["cacheScope"] = "private"  # note contents are the user's own data
        return body

    async def _resources_list(self, request: _Request, peer: Peer) -> JSONObject:
        assert self.app.resources is not None
        ctx = self._context(request, peer, None, None)
        resources, next_cursor = await self.app.resources.list_resources(ctx, self._page(request))
        body: JSONObject = {"resources": resources}
        if next_cursor is not None:
            body["nextCursor"] = next_cursor
        return self._cache(request, body)

    async def _resources_templates(self, request: _Request, peer: Peer) -> JSONObject:
        assert self.app.resources is not None
        if self._page(request):
            raise _Fault(
                INVALID_PARAMS, "Invalid params: invalid cursor; templates come in one page"
            )
        ctx = self._context(request, peer, None, None)
        templates = await self.app.resources.list_templates(ctx)
        return self._cache(request, {"resourceTemplates": templates})

    async def _resources_read(self, request: _Request, peer: Peer) -> JSONObject:
        provider = self.app.resources
        assert provider is not None
        uri = request.params.get("uri")
        if not isinstance(uri, str):
            raise _Fault(INVALID_PARAMS, "Invalid params: resources/read needs a uri string")

        async def call(ctx: RequestContext) -> list[JSONObject] | InputRequired:
            return await provider.read_resource(ctx, uri)

        try:
            outcome = await self._drive(request, peer, call)
        except ResourceNotFound as exc:
            # 2026-07-28 must use -32602 for a missing resource; 2025-11-25 used -32002.
            code = INVALID_PARAMS if request.era == "modern" else RESOURCE_NOT_FOUND_LEGACY
            raise _Fault(code, "Resource not found", {"uri": exc.uri}) from None
        if isinstance(outcome, InputRequired):
            return _encode_input_required(outcome)
        if isinstance(outcome, _InputUnavailable):
            raise _Fault(INTERNAL_ERROR, outcome.text)
        return self._cache(request, {"contents": outcome})

    async def _complete(self, request: _Request, peer: Peer) -> JSONObject:
        assert self.app.resources is not None
        ref = request.params.get("ref")
        argument = request.params.get("argument")
        if not isinstance(ref, dict) or ref.get("type") not in ("ref/prompt", "ref/resource"):
            raise _Fault(
                INVALID_PARAMS, "Invalid params: ref must be a ref/prompt or ref/resource object"
            )
        if (
            not isinstance(argument, dict)
            or not isinstance(argument.get("name"), str)
            or not isinstance(argument.get("value"), str)
        ):
            raise _Fault(INVALID_PARAMS, "Invalid params: argument needs string name and value")
        context = request.params.get("context")
        raw_args = context.get("arguments") if isinstance(context, dict) else None
        context_arguments = (
            {k: v for k, v in raw_args.items() if isinstance(v, str)}
            if isinstance(raw_args, dict)
            else {}
        )
        ctx = self._context(request, peer, None, None)
        values, total, has_more = await self.app.resources.complete(
            ctx, ref, argument, context_arguments
        )
        completion: JSONObject = {
            "values": values[: limits.MAX_COMPLETION_VALUES],
            "hasMore": has_more or len(values) > limits.MAX_COMPLETION_VALUES,
        }
        if total is not None:
            completion["total"] = total
        return {"completion": completion}

    async def _prompts_list(self, request: _Request, peer: Peer) -> JSONObject:
        assert self.app.prompts is not None
        ctx = self._context(request, peer, None, None)
        prompts, next_cursor = await self.app.prompts.list_prompts(ctx, self._page(request))
        body: JSONObject = {"prompts": prompts}
        if next_cursor is not None:
            body["nextCursor"] = next_cursor
        if request.era == "modern":
            body["ttlMs"] = limits.TOOLS_LIST_TTL_MS
            body["cacheScope"] = "public"
        return body

    async def _prompts_get(self, request: _Request, peer: Peer) -> JSONObject:
        provider = self.app.prompts
        assert provider is not None
        name = request.params.get("name")
        arguments = request.params.get("arguments") or {}
        if not isinstance(name, str):
            raise _Fault(INVALID_PARAMS, "Invalid params: prompts/get needs a prompt name")
        if not isinstance(arguments, dict) or not all(
            isinstance(v, str) for v in arguments.values()
        ):
            raise _Fault(
                INVALID_PARAMS, "Invalid params: prompt arguments must map names to strings"
            )

        async def call(ctx: RequestContext) -> JSONObject | InputRequired:
            return await provider.get_prompt(ctx, name, arguments)

        outcome = await self._drive(request, peer, call)
        if isinstance(outcome, InputRequired):
            return _encode_input_required(outcome)
        if isinstance(outcome, _InputUnavailable):
            raise _Fault(INTERNAL_ERROR, outcome.text)
        return outcome


# --- encoding helpers -----------------------------------------------------------------------


def _progress_token(meta: Mapping[str, Any]) -> RequestId | None:
    token = meta.get("progressToken")
    return token if _valid_id(token) else None


def _cancelled(request_id: int, reason: str) -> JSONObject:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": reason},
    }


def _cost_of(message: Any) -> LineCost:
    """The cost of ``message`` measured as the compact JSON line it would be (a batch member,
    or a message handed over already parsed)."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return LineCost(1, 0)  # not from JSON (a test's value): nothing a peer sent to count
    return line_cost(text.encode("utf-8", "surrogatepass"))


def _text_result(text: str, *, is_error: bool) -> JSONObject:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def _tool_result(result: ToolResult) -> JSONObject:
    structured: JSONObject | None
    if isinstance(result.structured, BaseModel):
        structured = result.structured.model_dump(mode="json", by_alias=True)
    else:
        structured = result.structured
    text = result.text
    if text is None:
        text = (
            ""
            if structured is None
            else json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        )
    body = _text_result(text, is_error=result.is_error)
    if structured is not None:
        body["structuredContent"] = structured
    return body


def _describe_need(request: InputRequest) -> str:
    if isinstance(request, ElicitForm):
        return "a form answer (elicitation, form mode)"
    if isinstance(request, ElicitURL):
        return "a visit to a URL (elicitation, URL mode)"
    return "the client's roots (roots/list)"


def _required_capabilities(requests: list[InputRequest]) -> JSONObject:
    required: JSONObject = {}
    for request in requests:
        if isinstance(request, ElicitForm | ElicitURL):
            mode = "form" if isinstance(request, ElicitForm) else "url"
            required.setdefault("elicitation", {})[mode] = {}
        else:
            required["roots"] = {}
    return required


def _elicit_params(
    request: ElicitForm | ElicitURL, *, era: Literal["legacy", "modern"]
) -> JSONObject:
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


def _legacy_request_of(request: InputRequest) -> tuple[str, JSONObject | None]:
    if isinstance(request, ElicitForm | ElicitURL):
        return "elicitation/create", _elicit_params(request, era="legacy")
    return "roots/list", None


def _encode_input_required(outcome: InputRequired) -> JSONObject:
    """The 2026-07-28 InputRequiredResult body (never cached: no ttlMs/cacheScope)."""
    body: JSONObject = {"resultType": "input_required"}
    if outcome.requests:
        encoded: JSONObject = {}
        for key, request in outcome.requests.items():
            if isinstance(request, ElicitForm | ElicitURL):
                encoded[key] = {
                    "method": "elicitation/create",
                    "params": _elicit_params(request, era="modern"),
                }
            else:
                encoded[key] = {"method": "roots/list"}
        body["inputRequests"] = encoded
    if outcome.state is not None:
        body["requestState"] = outcome.state
    return body
