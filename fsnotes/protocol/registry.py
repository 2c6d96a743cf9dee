"""The interface between the protocol core and the things it serves (tools, resources, prompts).

Tools and providers are written once against these types and serve both protocol eras:
the core turns a handler's :class:`ToolResult` or :class:`InputRequired` into the wire shape of
the request's era (2025-11-25 with an ``initialize`` handshake, or 2026-07-28 with ``_meta`` on
every request). Nothing here does I/O.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

JSONObject = dict[str, Any]
Era = Literal["legacy", "modern"]
# The most a request's credentials allow, as an access level's name (an OAuth token's scopes
# set one); ``None`` where they set no limit. The grants decide the rest.
Ceiling = Literal["read", "write", "delete"]

# Logging levels of MCP (RFC 5424 order), lowest first.
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_PY_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

_log = logging.getLogger("fsnotes.protocol")


# --- errors a handler may raise ------------------------------------------------------------


class ToolError(Exception):
    """A failure the model can act on: becomes an ``isError: true`` tool result.

    ``str(exc)`` is the text shown to the model, so write an actionable sentence.
    ``structured`` (optional) becomes the result's ``structuredContent``.
    """

    def __init__(self, message: str, *, structured: JSONObject | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.structured = structured

    def __str__(self) -> str:
        return self.message


class InvalidParams(Exception):
    """A request the handler cannot accept as sent: JSON-RPC ``-32602`` with this message/data."""

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return self.message


class InternalError(Exception):
    """A request the server could not complete, with a message the client may see:
    JSON-RPC ``-32603``. For failures that are not the caller's (a busy or rebuilding
    index), so that they are reported as errors instead of as empty results."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ResourceNotFound(Exception):
    """``resources/read`` of a URI that names nothing.

    Legacy era: ``-32002``; modern era: ``-32602`` (the spec retired ``-32002``); both with
    ``data {"uri": uri}``.
    """

    def __init__(self, uri: str) -> None:
        super().__init__(f"Resource not found: {uri}")
        self.uri = uri


class MissingCapability(Exception):
    """The request needs a client capability it did not declare.

    Modern era: JSON-RPC ``-32021`` with ``data.requiredCapabilities`` (``required``, e.g.
    ``{"elicitation": {"url": {}}}``). Legacy era: an ``isError`` tool result (an error
    response for other methods) with ``message``. Unlike the core's own check of an
    :class:`InputRequired`, the handler chooses the message, so it can say what the person
    can do instead.
    """

    def __init__(self, message: str, *, required: JSONObject) -> None:
        super().__init__(message)
        self.message = message
        self.required = required

    def __str__(self) -> str:
        return self.message


# --- input requests (multi round-trip) -----------------------------------------------------


@dataclass(frozen=True)
class ElicitForm:
    """Ask the user to fill a flat form (elicitation mode ``form``).

    ``unavailable`` is what to tell the caller when its host cannot show this form. In the
    legacy era, a request whose client did not declare form elicitation then gets it as an
    ``isError`` tool result (an error response for other methods) instead of the core's
    generic sentence; the modern era answers ``-32021`` either way (the capability must be
    declared on the request, so the client can retry with it).
    """

    message: str
    requested_schema: JSONObject
    unavailable: str | None = None


@dataclass(frozen=True)
class ElicitURL:
    """Ask the user to open a URL out of band (elicitation mode ``url``).

    ``elicitation_id`` is sent only in the legacy era (2026-07-28 removed it).
    """

    message: str
    url: str
    elicitation_id: str


class URLElicitationRequired(Exception):
    """2025-11-25 only: answer with ``-32042`` (URLElicitationRequiredError) instead of a result.

    For a request that cannot proceed until the person finishes out-of-band steps and that
    should not be held open meanwhile: the client shows the URL(s), waits for
    ``notifications/elicitation/complete`` (see
    :meth:`RequestContext.elicitation_complete_notifier`) and retries. The core sends it only
    when the client declared ``elicitation.url``; without it, the legacy caller gets an error
    that says so. 2026-07-28 retired the code: raising this in a modern request is a handler
    bug, answered with ``-32603``.
    """

    def __init__(
        self,
        elicitations: Sequence[ElicitURL],
        message: str = "This request requires more information.",
    ) -> None:
        if not elicitations:
            raise ValueError("URLElicitationRequired needs at least one URL elicitation")
        super().__init__(message)
        self.elicitations = tuple(elicitations)
        self.message = message


@dataclass(frozen=True)
class ListRoots:
    """Ask the client for its roots (``roots/list``)."""


@dataclass(frozen=True)
class CreateMessage:
    """Ask the client's model for a completion (``sampling/createMessage``; needs the client's
    ``sampling`` capability).

    ``messages`` are SamplingMessage objects (``{"role", "content"}``) sent as given;
    ``max_tokens`` is the most the model may produce. The answer is a CreateMessageResult
    (``role``, ``content``, ``model``, ``stopReason``), written by the client or its model:
    untrusted text. Sampling is deprecated in 2026-07-28 but still served.
    """

    messages: tuple[JSONObject, ...]
    max_tokens: int
    system_prompt: str | None = None


InputRequest = ElicitForm | ElicitURL | ListRoots | CreateMessage


@dataclass(frozen=True)
class InputRequired:
    """A handler's answer meaning "ask the client for this, then call me again".

    ``requests`` maps server-chosen keys to input requests; the answers come back in
    :attr:`RequestContext.input_responses` under the same keys. ``state`` is an opaque string the
    client echoes (modern) or the core hands back (legacy); it is attacker-controlled in the
    modern era, so a caller that relies on it must seal it.
    """

    requests: Mapping[str, InputRequest]
    state: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """A complete tool result.

    ``structured`` becomes ``structuredContent`` (a model is dumped in JSON mode by alias);
    ``text`` is the text block, by default the compact JSON of ``structured``. ``content``
    instead gives the result's ContentBlocks (text, image, audio, resource_link, resource)
    as sent, for a tool whose answer is not text alone; each must be an object with a string
    ``type``, and the handler is then the one to add a text block carrying ``structured``'s
    JSON if it sends both (the spec's SHOULD for older clients).
    """

    structured: BaseModel | JSONObject | None = None
    text: str | None = None
    is_error: bool = False
    content: Sequence[JSONObject] | None = None

    def __post_init__(self) -> None:
        if self.content is None:
            return
        if self.text is not None:
            raise ValueError("a ToolResult gives text or content blocks, not both")
        for block in self.content:
            if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
                raise ValueError(f"content block without a string type: {block!r}")


# --- the per-request context ---------------------------------------------------------------


def supports_elicitation(capabilities: Mapping[str, Any], mode: Literal["form", "url"]) -> bool:
    """Whether ``capabilities`` declare elicitation in ``mode`` (an empty ``{}`` means form
    only)."""
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, Mapping):
        return False
    if not elicitation:
        return mode == "form"
    return isinstance(elicitation.get(mode), Mapping)


class RequestRuntime(Protocol):
    """The core's side of a request in flight (implemented in ``calls.py``)."""

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None: ...

    async def log(self, level: str, data: Any, logger: str | None) -> None: ...

    def completion_notifier(self, elicitation_id: str) -> Callable[[], Awaitable[None]] | None: ...

    async def run_as_task(self, message: str | None) -> bool: ...


class RequestContext:
    """What a handler knows about the request it serves, and what it may send while in flight.

    ``principal`` is who the request acts for, supplied by the transport with each request
    (configuration for stdio; a token's subject over HTTP): authorize against it, never against
    something stored at build time. ``ceiling`` is the most its credentials allow (an OAuth
    token's scopes), supplied with it: ``None`` when they set no limit (stdio, a static
    token). It is a field of its own: the principal is a plain name and carries nothing else.

    ``client_capabilities`` are the ones declared for *this* request in the modern era (never
    reused from another request) and the ones from ``initialize`` in the legacy era.

    ``roots`` are the roots the request's legacy session last reported (``roots/list``), as
    the client sent them: ``()`` until it reports any, ``None`` when the request belongs to no
    session (the modern era is stateless). They are hints only: they may choose among what the
    principal is already granted, never grant anything, and they come from one session, so one
    client's roots never reach another client's requests.
    """

    def __init__(
        self,
        *,
        era: Era,
        protocol_version: str,
        method: str,
        principal: str,
        client_capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any] | None,
        ceiling: Ceiling | None = None,
        roots: tuple[JSONObject, ...] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        runtime: RequestRuntime | None = None,
    ) -> None:
        self.era: Era = era
        self.protocol_version = protocol_version
        self.method = method
        self.principal = principal
        self.ceiling: Ceiling | None = ceiling
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.roots = roots
        self.input_responses = input_responses
        self.request_state = request_state
        self._runtime = runtime

    @property
    def hinted(self) -> bool:
        """May the session's :attr:`roots` pick a default workspace? True exactly when the
        request belongs to a session (``roots is not None``: the legacy era), even before the
        client reported any roots. A flag for handlers, so that they need not look at the era."""
        return self.roots is not None

    @property
    def asks_live(self) -> bool:
        """Is an :class:`InputRequired` this handler returns asked of the client live, while
        this call waits, the handler then being called again within the same request (the
        legacy adapter)? False in the modern era: the client gets the InputRequiredResult and
        retries with a new request. Only where this is true may a handler raise
        :class:`URLElicitationRequired` instead. A flag, so that handlers need not look at the
        era."""
        return self.era == "legacy"

    def supports_elicitation(self, mode: Literal["form", "url"]) -> bool:
        """Whether the client declared elicitation in ``mode`` (an empty ``{}`` means form only)."""
        return supports_elicitation(self.client_capabilities, mode)

    def supports_roots(self) -> bool:
        """Whether the client declared the ``roots`` capability."""
        return isinstance(self.client_capabilities.get("roots"), Mapping)

    def supports_sampling(self) -> bool:
        """Whether the client declared the ``sampling`` capability."""
        return isinstance(self.client_capabilities.get("sampling"), Mapping)

    def supports(self, request: InputRequest) -> bool:
        """Whether this request's declared capabilities allow asking for ``request``."""
        if isinstance(request, ElicitForm):
            return self.supports_elicitation("form")
        if isinstance(request, ElicitURL):
            return self.supports_elicitation("url")
        if isinstance(request, CreateMessage):
            return self.supports_sampling()
        return self.supports_roots()

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` for this request.

        A no-op when the request carried no ``progressToken``, once the request has finished or
        been cancelled, and for a value not strictly greater than the last one sent (the spec
        requires progress to increase).
        """
        if self._runtime is not None:
            await self._runtime.report_progress(progress, total, message)

    def elicitation_complete_notifier(
        self, elicitation_id: str
    ) -> Callable[[], Awaitable[None]] | None:
        """Legacy era: a callable that sends ``notifications/elicitation/complete`` for
        ``elicitation_id`` to the client this request came from; ``None`` in the modern era
        (2026-07-28 removed the notification) or without a runtime.

        It stays usable after this request has finished (the out-of-band step usually ends
        later) and becomes a no-op once the client has gone.
        """
        if self._runtime is None or self.era != "legacy":
            return None
        return self._runtime.completion_notifier(elicitation_id)

    async def run_as_task(self, message: str | None = None) -> bool:
        """Say this call's work will take long (a rewrite of many notes, a wait for an index
        build): if the request opted in to the Tasks extension and the tool supports tasks,
        the client is answered with a task handle now, ``message`` is the task's first
        status message, and this handler goes on in the background, its result becoming the
        task's. Returns whether the call is now a task; otherwise nothing changed and the
        client waits for the result as usual. Once a task, progress reported with
        :meth:`report_progress` is also the task's status message."""
        if self._runtime is None:
            return False
        return await self._runtime.run_as_task(message)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Log ``data`` at ``level``: always to stderr; to the client when it asked for it.

        Legacy era: sent as ``notifications/message`` at or above the ``logging/setLevel`` level
        (default ``warning``). Modern era: only when this request carried
        ``_meta["io.modelcontextprotocol/logLevel"]``, at or above it, while in flight.
        """
        if level not in _PY_LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        _log.log(_PY_LOG_LEVELS[level], "%s%s", f"[{logger}] " if logger else "", data)
        if self._runtime is not None:
            await self._runtime.log(level, data, logger)


# --- tools ---------------------------------------------------------------------------------

ArgsT = TypeVar("ArgsT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)

# A handler receives the validated argument model (never a raw mapping) and answers with its
# result model (the core sends it as structuredContent, and the same JSON as text), a
# ToolResult when it needs to shape the answer itself, or InputRequired.
ToolHandler = Callable[[RequestContext, ArgsT], Awaitable[ResultT | ToolResult | InputRequired]]


@dataclass(frozen=True)
class ToolAnnotations:
    """Untrusted hints for the host (mapped to ``readOnlyHint`` etc. on the wire)."""

    title: str | None = None
    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = False


@dataclass(frozen=True)
class Tool(Generic[ArgsT, ResultT]):
    """A tool: its argument model validates ``arguments`` and generates ``inputSchema``;
    its result model generates ``outputSchema``. ``Tool[Args, Result]`` types the handler.

    ``input_schema``, when given, is listed instead of the generated schema, as written (see
    :func:`~fsnotes.protocol.tool_schema.declared_schema`): for a schema a model cannot say,
    such as 2020-12 conditionals. The model still validates the arguments, so the two must
    agree; the schema is checked when the tool list is built, not run."""

    name: str
    title: str
    description: str
    input_model: type[ArgsT]
    output_model: type[ResultT] | None
    annotations: ToolAnnotations
    handler: Callable[[RequestContext, ArgsT], Awaitable[ResultT | ToolResult | InputRequired]]
    input_schema: JSONObject | None = None
    # The Tasks extension (2026-07-28): "forbidden", never a task; "optional", a task when
    # the client opted in and the call proves long (its handler says so with
    # RequestContext.run_as_task, or it is still running after limits.TASK_AFTER_S);
    # "required", only as a task (-32021 to a request that did not opt in).
    task_support: Literal["forbidden", "optional", "required"] = "forbidden"


# --- resources and prompts -----------------------------------------------------------------


class ResourceProvider(Protocol):
    """Serves ``resources/*`` and ``completion/complete``."""

    async def list_resources(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        """One page of Resource objects and the next cursor; :class:`InvalidParams` on a bad one."""
        ...

    async def list_templates(self, ctx: RequestContext) -> list[JSONObject]:
        """All ResourceTemplate objects."""
        ...

    async def read_resource(
        self, ctx: RequestContext, uri: str
    ) -> list[JSONObject] | InputRequired:
        """The contents items of ``uri``; :class:`ResourceNotFound` when it names nothing."""
        ...

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        """Completion values (best first), the total if known, and whether there are more."""
        ...


class ResourceSubscriptions(Protocol):
    """Serves the 2025-11-25 ``resources/subscribe`` and ``resources/unsubscribe`` (optional;
    ``resources.subscribe`` is advertised only when present). 2026-07-28 removed both methods
    (its subscriptions/listen is not served here).

    The core keeps each session's subscriptions (one per URI, at most
    ``limits.MAX_SUBSCRIPTIONS_PER_SESSION``) and hands the app, with each, ``updated``: an
    awaitable that sends ``notifications/resources/updated`` for that URI to the subscribing
    client (a no-op once it has gone). The app calls it when the resource changes, for as long
    as it holds it; :meth:`unsubscribe` hands back the same callable to drop.
    """

    async def subscribe(
        self, ctx: RequestContext, uri: str, updated: Callable[[], Awaitable[None]]
    ) -> None:
        """Start sending ``updated`` changes of ``uri``; :class:`ResourceNotFound` when it names
        nothing (nothing is subscribed then)."""
        ...

    async def unsubscribe(
        self, ctx: RequestContext, uri: str, updated: Callable[[], Awaitable[None]]
    ) -> None:
        """Stop: ``updated`` is the callable :meth:`subscribe` was given for ``uri``."""
        ...


class PromptProvider(Protocol):
    """Serves ``prompts/list`` and ``prompts/get`` (optional; not advertised when absent)."""

    async def list_prompts(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        """One page of Prompt objects and the next cursor; :class:`InvalidParams` on a bad one."""
        ...

    async def get_prompt(
        self, ctx: RequestContext, name: str, arguments: Mapping[str, str]
    ) -> JSONObject | InputRequired:
        """A GetPromptResult body (``messages``, optional ``description``)."""
        ...

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        """``completion/complete`` for a ``ref/prompt`` (a prompt's argument), as
        :meth:`ResourceProvider.complete` answers for a ``ref/resource``."""
        ...


@dataclass
class App:
    """Everything the protocol core serves, in one value."""

    name: str
    version: str
    title: str | None
    instructions: str | None
    tools: Sequence[Tool[Any, Any]]
    resources: ResourceProvider | None = None
    prompts: PromptProvider | None = None
    # Legacy resource subscriptions; only with ``resources`` (ignored without it).
    subscriptions: ResourceSubscriptions | None = None
    # Entered by the transport around serving and left when it stops: for background
    # services that live as long as the server (e.g. the setup page). Its failure on entry
    # stops the server before it reads a message.
    lifespan: Callable[[], contextlib.AbstractAsyncContextManager[None]] | None = None
    # Who runs MCP tasks (a fsnotes.protocol.tasks.TaskService; typed loosely here, where
    # that module cannot be imported without a circle): None, and the Tasks extension is
    # neither advertised nor served.
    tasks: Any = None
