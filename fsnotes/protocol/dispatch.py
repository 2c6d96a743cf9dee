"""The dispatcher: one request in, its era chosen, validated and routed; both transports use it.

:class:`Dispatcher` holds only what is derived from the :class:`App` (the tool table, server
info, capabilities, the method table). It knows no process and no transport: each request comes
with the session it belongs to (or ``None``), the principal it acts for (the transport's to
say), and, to run, a :class:`~fsnotes.protocol.calls.Channel` to the client that sent it (the
runner's, :mod:`fsnotes.runtime`). A stdio connection passes its one session; Streamable HTTP
passes the session named by ``Mcp-Session-Id``, or none for a stateless 2026-07-28 request.
:meth:`Dispatcher.route` never waits; :meth:`Dispatcher.respond` awaits the handler and
nothing else (it starts no task and keeps no timer: the runner does).

Era rules (mcp-protocol.md §2, §10): a request whose ``params._meta`` carries
``io.modelcontextprotocol/protocolVersion`` is served statelessly as 2026-07-28 ("modern"),
whatever session it arrives in; ``initialize`` opens a 2025-11-25 session ("legacy"), after
which its requests without that key are served with the negotiated version and capabilities.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from fsnotes.protocol import inbound, limits
from fsnotes.protocol.calls import Asking, Call, Channel
from fsnotes.protocol.encoding import elicit_params, result_message
from fsnotes.protocol.handlers import Handlers, ToolTable
from fsnotes.protocol.registry import (
    LOG_LEVELS,
    App,
    Ceiling,
    Era,
    InternalError,
    InvalidParams,
    JSONObject,
    MissingCapability,
    URLElicitationRequired,
    supports_elicitation,
)
from fsnotes.protocol.session import Session
from fsnotes.protocol.tasks import TASK_METHODS, TASKS_EXTENSION
from fsnotes.protocol.versions import ADVERTISED_VERSIONS, LEGACY_VERSIONS, MODERN_VERSIONS
from fsnotes.protocol.wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    Fault,
    RequestId,
    error_message,
    fault_message,
    progress_token,
)

_log = logging.getLogger("fsnotes.protocol")

# Methods whose modern requests may carry a retry's inputResponses and requestState (MRTR).
_RETRYABLE = ("tools/call", "resources/read", "prompts/get")

# Methods 2026-07-28 removed that the handlers serve in the legacy era (D26 changelog 4:
# subscriptions/listen replaces them).
_LEGACY_ONLY = ("resources/subscribe", "resources/unsubscribe")
# The Tasks extension's methods exist only in 2026-07-28 (SEP-2663); to a legacy session
# they are unknown (we advertise no 2025-11-25 tasks capability).
_MODERN_ONLY = TASK_METHODS
# Of the methods that are not tools, those that change something (may not run again).
_WRITES = ("tasks/update", "tasks/cancel")


@dataclass(frozen=True)
class Reply:
    """A request answered at once (no task): ``message`` is its response. ``opened`` is the
    session an ``initialize`` opened; the transport keeps it for the client's later requests."""

    message: JSONObject
    opened: Session | None = None


class Dispatcher:
    """Routes requests for one :class:`App`. See the module docstring."""

    def __init__(
        self,
        app: App,
        *,
        tools_page_size: int = limits.TOOLS_PAGE_SIZE,
        input_timeout: float = limits.INPUT_REQUEST_TIMEOUT_S,
        roots_timeout: float = limits.ROOTS_REQUEST_TIMEOUT_S,
        max_input_rounds: int = limits.MAX_INPUT_ROUNDS,
    ) -> None:
        self.app = app
        self.tools = ToolTable(list(app.tools), tools_page_size)
        self.asking = Asking(input_timeout, roots_timeout, max_input_rounds)
        self.handlers = Handlers(app, self.tools, self.asking)
        info: JSONObject = {"name": app.name, "version": app.version}
        if app.title:
            info["title"] = app.title
        self.server_info = info

    # --- routing -------------------------------------------------------------------------------

    def route(
        self,
        request: inbound.Request,
        *,
        session: Session | None,
        principal: str,
        ceiling: Ceiling | None = None,
    ) -> Reply | Call:
        """A request's answer, or the :class:`Call` to run for it (:meth:`respond`).

        ``session`` is the legacy session the request arrived in (``None`` if there is none);
        ``principal`` who it acts for, and ``ceiling`` the most its credentials allow
        (``None``: they set no limit; see :class:`~fsnotes.protocol.registry.RequestContext`).
        The era is the request's :attr:`~inbound.Request.tag` (read once, when it was
        classified). Nothing here waits or keeps the request.
        """
        request_id, method, params = request.id, request.method, request.params
        if params is not None and not isinstance(params, dict):
            return Reply(
                error_message(
                    request_id, INVALID_PARAMS, "Invalid params: params must be an object"
                )
            )
        params = params or {}
        try:
            # A modern-tagged request is served as 2026-07-28 whatever its method (D26
            # versioning.mdx, dual-era servers), and that revision has no initialize: such an
            # initialize is -32601 and opens no session.
            if request.tag is not None or method == "server/discover":
                return self._modern(request_id, method, params, request.tag, principal, ceiling)
            if method == "initialize":
                return self._initialize(request_id, params, session)
            if method == "ping":
                # Legacy ping is allowed even before initialize (2025-11-25 lifecycle).
                return Reply({"jsonrpc": "2.0", "id": request_id, "result": {}})
            if session is not None:
                return self._legacy(request_id, method, params, session, principal, ceiling)
            raise Fault(
                INVALID_PARAMS,
                f"Missing _meta[{META_PROTOCOL_VERSION!r}]: send it with clientCapabilities on "
                "every request (2026-07-28), or call initialize first (2025-11-25)",
            )
        except Fault as fault:
            return Reply(fault_message(request_id, fault))

    def _initialize(
        self, request_id: RequestId, params: JSONObject, session: Session | None
    ) -> Reply:
        if session is not None:
            # 2025-11-25 lifecycle: "The initialization phase MUST be the first interaction
            # between client and server." Once it succeeded, the negotiated version and
            # capabilities hold for the session; a second initialize cannot change them (nor
            # switch a session into 2025-03-26 batch handling).
            raise Fault(
                INVALID_REQUEST,
                f"Invalid request: already initialized (protocol {session.version}); "
                "initialize is sent once per connection",
            )
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise Fault(INVALID_PARAMS, "Invalid params: initialize needs a protocolVersion string")
        capabilities = params.get("capabilities", {})
        if not isinstance(capabilities, dict):
            raise Fault(INVALID_PARAMS, "Invalid params: capabilities must be an object")
        client_info = params.get("clientInfo")
        version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        opened = Session(
            version=version,
            capabilities=capabilities,
            client_info=client_info if isinstance(client_info, dict) else None,
        )
        result: JSONObject = {
            "protocolVersion": version,
            "capabilities": self.capabilities(modern=False),
            "serverInfo": self.server_info,
        }
        if self.app.instructions:
            result["instructions"] = self.app.instructions
        return Reply({"jsonrpc": "2.0", "id": request_id, "result": result}, opened)

    def capabilities(self, *, modern: bool) -> JSONObject:
        """The server capabilities advertised in ``modern`` or legacy shape."""
        caps: JSONObject = {"tools": {} if modern else {"listChanged": False}, "logging": {}}
        if self.app.resources is not None:
            subscribe = self.app.subscriptions is not None
            caps["resources"] = {} if modern else {"subscribe": subscribe, "listChanged": False}
        if self.app.prompts is not None:
            caps["prompts"] = {} if modern else {"listChanged": False}
        if self.app.resources is not None or self.app.prompts is not None:
            caps["completions"] = {}  # template arguments, prompt arguments
        if modern and self.app.tasks is not None:
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    def _modern(
        self,
        request_id: RequestId,
        method: str,
        params: JSONObject,
        tag: inbound.EraTag | None,
        principal: str,
        ceiling: Ceiling | None,
    ) -> Reply | Call:
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            raise Fault(INVALID_PARAMS, "Invalid params: params._meta is required (2026-07-28)")
        # The tag read when the request was classified (a server/discover may have none).
        version = tag.version if tag is not None else None
        if not isinstance(version, str):
            raise Fault(
                INVALID_PARAMS, f"Invalid params: _meta[{META_PROTOCOL_VERSION!r}] must be a string"
            )
        capabilities = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise Fault(
                INVALID_PARAMS,
                f"Invalid params: _meta[{META_CLIENT_CAPABILITIES!r}] must be an object"
                " ({} for none)",
            )
        if version not in MODERN_VERSIONS:
            # data.supported and data.requested are both required (2026-07-28 versioning);
            # supported lists only versions a retry can use (see versions.py).
            raise Fault(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(ADVERTISED_VERSIONS), "requested": version},
            )
        log_level = meta.get(META_LOG_LEVEL)
        if log_level is not None and log_level not in LOG_LEVELS:
            raise Fault(INVALID_PARAMS, f"Invalid params: unknown log level {log_level!r}")
        client_info = meta.get(META_CLIENT_INFO)
        responses = state = None
        if method in _RETRYABLE:
            responses = params.get("inputResponses")
            state = params.get("requestState")
            if responses is not None and not isinstance(responses, dict):
                raise Fault(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
            # S26 InputResponses: each value is an InputResponse (ElicitResult,
            # CreateMessageResult or ListRootsResult), an object; anything else is malformed.
            for key, value in (responses or {}).items():
                if not isinstance(value, dict):
                    shown = repr(key[: limits.MAX_QUOTED_VALUE_CHARS])
                    raise Fault(
                        INVALID_PARAMS,
                        f"Invalid params: inputResponses[{shown}] must be an object (the "
                        "result of the input request sent under that key)",
                    )
            if state is not None and not isinstance(state, str):
                raise Fault(INVALID_PARAMS, "Invalid params: requestState must be a string")
        if method == "server/discover":
            result: JSONObject = {
                "supportedVersions": list(ADVERTISED_VERSIONS),
                "capabilities": self.capabilities(modern=True),
                "ttlMs": limits.DISCOVER_TTL_MS,
                "cacheScope": "public",
            }
            if self.app.instructions:
                result["instructions"] = self.app.instructions
            return Reply(self._result(request_id, "modern", result))
        return self._call(
            request_id,
            method,
            params,
            era="modern",
            version=version,
            principal=principal,
            ceiling=ceiling,
            capabilities=capabilities,
            client_info=client_info if isinstance(client_info, dict) else None,
            session=None,
            progress=progress_token(meta),
            log_level=log_level,
            responses=responses,
            state=state,
        )

    def _legacy(
        self,
        request_id: RequestId,
        method: str,
        params: JSONObject,
        session: Session,
        principal: str,
        ceiling: Ceiling | None,
    ) -> Reply | Call:
        if method == "logging/setLevel":
            level = params.get("level")
            if level not in LOG_LEVELS:
                raise Fault(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
            session.log_level = str(level)
            return Reply(self._result(request_id, "legacy", {}))
        meta = params.get("_meta")
        return self._call(
            request_id,
            method,
            params,
            era="legacy",
            version=session.version,
            principal=principal,
            ceiling=ceiling,
            capabilities=session.capabilities,
            client_info=session.client_info,
            session=session,
            progress=progress_token(meta) if isinstance(meta, dict) else None,
        )

    def _call(
        self,
        request_id: RequestId,
        method: str,
        params: JSONObject,
        *,
        era: Era,
        version: str,
        principal: str,
        ceiling: Ceiling | None,
        capabilities: JSONObject,
        client_info: JSONObject | None,
        session: Session | None,
        progress: RequestId | None,
        log_level: str | None = None,
        responses: JSONObject | None = None,
        state: str | None = None,
    ) -> Reply | Call:
        """tools/list answered at once, or the call of a method that runs as a task."""
        if method == "tools/list":
            body = self.tools.page(params.get("cursor"), modern=era == "modern")
            return Reply(self._result(request_id, era, body))
        handler = self.handlers.table.get(method)
        if (
            handler is None
            or (era == "modern" and method in _LEGACY_ONLY)
            or (era == "legacy" and method in _MODERN_ONLY)
        ):
            # Unknown, removed in this era, or a capability we did not advertise.
            raise Fault(METHOD_NOT_FOUND, f"Method not found: {method}")
        if method == "tools/call":
            name = params.get("name")
            entry = self.tools.get(name) if isinstance(name, str) else None
            reads_only = entry is not None and entry.tool.annotations.read_only
        else:
            # Resources, prompts, completion and tasks/get only read.
            reads_only = method not in _WRITES
        return Call(
            id=request_id,
            method=method,
            params=params,
            era=era,
            version=version,
            principal=principal,
            ceiling=ceiling,
            capabilities=capabilities,
            client_info=client_info,
            handler=handler,
            session=session,
            progress_token=progress,
            log_level=log_level,
            input_responses=responses,
            request_state=state,
            reads_only=reads_only,
        )

    # --- running ---------------------------------------------------------------------------------

    async def respond(self, call: Call, channel: Channel) -> JSONObject:
        """The response to ``call``: its handler's result, or the error it ended with."""
        try:
            return self._result(call.id, call.era, await call.handler(call, channel))
        except Fault as fault:
            return fault_message(call.id, fault)
        except InvalidParams as exc:
            return error_message(call.id, INVALID_PARAMS, exc.message, exc.data)
        except InternalError as exc:
            return error_message(call.id, INTERNAL_ERROR, exc.message)
        except (MissingCapability, URLElicitationRequired) as exc:
            return fault_message(call.id, self._handler_fault(call, exc))
        except Exception:
            _log.exception("internal error in %s (request %r)", call.method, call.id)
            return error_message(call.id, INTERNAL_ERROR, "Internal error")

    def _handler_fault(self, call: Call, exc: MissingCapability | URLElicitationRequired) -> Fault:
        """The error response for a handler's capability or URL-elicitation exception."""
        if isinstance(exc, MissingCapability):
            if call.era == "modern":
                return Fault(
                    MISSING_CLIENT_CAPABILITY, exc.message, {"requiredCapabilities": exc.required}
                )
            return Fault(INVALID_REQUEST, exc.message)
        if call.era == "modern":
            _log.error(
                "handler of %s raised URLElicitationRequired in a 2026-07-28 request (a bug: "
                "-32042 is retired there; return InputRequired instead)",
                call.method,
            )
            return Fault(INTERNAL_ERROR, "Internal error")
        if not supports_elicitation(call.capabilities, "url"):
            return Fault(
                INVALID_REQUEST,
                "This needs a visit to a URL (elicitation, URL mode), but the client did not "
                "declare that capability, so it cannot ask.",
            )
        return Fault(
            URL_ELICITATION_REQUIRED,
            exc.message,
            {"elicitations": [elicit_params(e, era="legacy") for e in exc.elicitations]},
        )

    def _result(self, request_id: RequestId, era: Era, body: JSONObject) -> JSONObject:
        return result_message(
            request_id, body, modern=era == "modern", server_info=self.server_info
        )

    # --- legacy notifications and roots ----------------------------------------------------------

    def notified(self, session: Session, method: str) -> bool:
        """A notification from ``session``'s client: is a roots fetch to start now?"""
        if method == "notifications/initialized":
            session.initialized = True
        elif method != "notifications/roots/list_changed":
            return False
        if not isinstance(session.capabilities.get("roots"), dict):
            return False
        return session.want_roots()

    async def refresh_roots(self, session: Session, channel: Channel) -> None:
        """Ask the client for its roots once, and keep them in ``session`` (requests read them
        as :attr:`RequestContext.roots`). Errors and timeouts are logged: roots are hints."""
        reply = await channel.ask("roots/list", None, self.asking.roots_timeout)
        result = reply.get("result") if reply else None
        roots = result.get("roots") if isinstance(result, dict) else None
        if not isinstance(roots, list):
            _log.warning("roots/list gave no usable answer; roots are hints, ignoring")
            return
        objects = [r for r in roots if isinstance(r, dict)]
        session.record_roots(objects)
