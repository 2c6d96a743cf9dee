"""A notes tool is a function: ``(call, Args) -> Result``, declared with :meth:`Toolbox.tool`.

The function's name is the tool's name; its docstring's first paragraph is the title and the
rest the description (each paragraph's lines joined with single spaces, so the docstring can
be wrapped like any other); ``Args`` (the type of its second parameter) generates
``inputSchema`` and validates the arguments, and ``Result`` (its return type, without
:class:`InputRequired`) generates ``outputSchema``. A ``{NAME}`` in the docstring is replaced
by ``facts[NAME]``, for a figure that must follow its constant (every fact must be used).

The function is synchronous and runs in a worker thread, so the protocol loop keeps serving
other requests while it does file I/O. It gets a :class:`ToolCall`: the request's view of the
notes (one :class:`~fsnotes.security.grants.Scope`, made once when the call starts) and,
for a tool that asks the person, what the host sent back. Its refusals
(:class:`ServiceError`, :class:`NotGranted`, :class:`ConsentRefused`) become tool errors.
A tool whose query needs the search index names, with ``waits``, the catalog to wait for
first (bounded, with progress; ``None``: no wait this time).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import threading
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from pydantic import BaseModel

from fsnotes.notes.index.catalog import Catalog, CatalogUnavailable
from fsnotes.notes.index.indexer import until_indexed
from fsnotes.notes.tools.confirm import DeleteFlow
from fsnotes.notes.tools.errors import ServiceError
from fsnotes.notes.tools.service import Notes, NotesService
from fsnotes.protocol.registry import (
    InputRequired,
    RequestContext,
    Tool,
    ToolAnnotations,
    ToolError,
)
from fsnotes.security.consent import ConsentRefused
from fsnotes.security.grants import NotGranted

# How often a long call's progress is reported: a status message at most this stale, and a
# few notifications a second at most.
PROGRESS_EVERY_S = 0.25

ArgsT = TypeVar("ArgsT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)
T = TypeVar("T")


def _never() -> bool:
    return False


@dataclass(frozen=True)
class ToolCall:
    """One call of a notes tool, as its function sees it."""

    notes: Notes  # the principal's view for this request (its Scope, resolved once)
    deletes: DeleteFlow  # the confirmed delete (the server's sealer, replay store, clock)
    state: str | None  # the sealed state a retry echoes (None on a first call)
    answers: Mapping[str, Any] | None  # the person's answers to what the first call asked
    # "This call will take long" (message: what it does): it becomes an MCP task when the
    # client opted in to them; whether it did. Called from the function's thread.
    long: Callable[[str], bool] = lambda message: False
    # Progress of a long step (done, total, message), reported every PROGRESS_EVERY_S.
    progress: Callable[[int, int, str], None] = lambda done, total, message: None
    # True once the call was cancelled: a long step stops at its next item.
    stopped: Callable[[], bool] = _never


ToolFunction = Callable[[ToolCall, ArgsT], ResultT | InputRequired]
# What to wait for before the function runs: a catalog, or None for no wait this call.
Waits = Callable[[ToolCall, Any], Catalog | None]


@dataclass(frozen=True)
class Declared(Generic[ArgsT, ResultT]):
    """A tool as declared: what its function says about it, not yet bound to a service."""

    name: str
    title: str
    description: str
    args: type[ArgsT]
    result: type[ResultT]
    annotations: ToolAnnotations
    function: ToolFunction[ArgsT, ResultT]
    waits: Waits | None = None

    def bound(self, service: NotesService, deletes: DeleteFlow) -> Tool[ArgsT, ResultT]:
        """The protocol's tool: each call acts as the principal its transport named, with
        its session's roots as hints (``ctx.roots``; None for a stateless request)."""
        function, waits = self.function, self.waits

        async def handler(ctx: RequestContext, args: ArgsT) -> ResultT | InputRequired:
            # One Scope per handler call: the grants consulted once, here. A legacy handler
            # called again after a person answered a live question gets a new one on
            # purpose: a grant revoked while they decided stops a delete.
            notes = service.acting_for(ctx.principal, ctx.roots, ctx.ceiling)
            call = ToolCall(notes, deletes, ctx.request_state, ctx.input_responses)
            if waits is not None:
                await _indexed(ctx, lambda: waits(call, args))
            return await _run(ctx, call, lambda call: function(call, args))

        return Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_model=self.args,
            output_model=self.result,
            annotations=self.annotations,
            handler=handler,
            # Any notes tool may become an MCP task: by measured duration, or when it says
            # it will be long (ToolCall.long, a wait for the index's first build).
            task_support="optional",
        )


class Toolbox:
    """The declared tools, in the order ``tools/list`` shows them."""

    def __init__(self) -> None:
        self.declared: list[Declared[Any, Any]] = []

    def tool(
        self,
        annotations: ToolAnnotations,
        *,
        waits: Waits | None = None,
        facts: Mapping[str, str] | None = None,
    ) -> Callable[[ToolFunction[ArgsT, ResultT]], Declared[ArgsT, ResultT]]:
        """Declare the decorated function as a tool. ``annotations`` without a title: the
        tool's title is put in. TypeError at import for a function that does not say its
        types, or a docstring without a title and a description."""

        def declare(function: ToolFunction[ArgsT, ResultT]) -> Declared[ArgsT, ResultT]:
            title, description = _title_and_description(function, facts or {})
            args, result = _models(function)
            declared = Declared(
                name=function.__name__,
                title=title,
                description=description,
                args=cast(type[ArgsT], args),
                result=cast(type[ResultT], result),
                annotations=dataclasses.replace(annotations, title=title),
                function=function,
                waits=waits,
            )
            if any(d.name == declared.name for d in self.declared):
                raise TypeError(f"tool {declared.name!r} is declared twice")
            self.declared.append(declared)
            return declared

        return declare

    def bound(self, service: NotesService, deletes: DeleteFlow) -> list[Tool[Any, Any]]:
        return [d.bound(service, deletes) for d in self.declared]


def _title_and_description(
    function: Callable[..., Any], facts: Mapping[str, str]
) -> tuple[str, str]:
    doc = inspect.cleandoc(function.__doc__ or "")
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", doc) if p.strip()]
    if len(paragraphs) < 2:
        raise TypeError(
            f"tool {function.__name__!r}: its docstring needs a title and a description"
        )
    title, description = paragraphs[0], " ".join(paragraphs[1:])
    for name, value in facts.items():
        placeholder = "{" + name + "}"
        if placeholder not in description:
            raise TypeError(f"tool {function.__name__!r}: the fact {name} is not in its docstring")
        description = description.replace(placeholder, value)
    return title, description


def _models(function: Callable[..., Any]) -> tuple[type[BaseModel], type[BaseModel]]:
    """The argument and result models, from the function's annotations."""
    hints = typing.get_type_hints(function)
    params = list(inspect.signature(function).parameters)
    args = hints.get(params[1]) if len(params) == 2 else None
    returned = hints.get("return")
    members = typing.get_args(returned) if isinstance(returned, types.UnionType) else (returned,)
    results = [m for m in members if m is not InputRequired]
    if not _is_model(args) or len(results) != 1 or not _is_model(results[0]):
        raise TypeError(
            f"tool {function.__name__!r} must be (call: ToolCall, args: Args) -> Result "
            "[| InputRequired], Args and Result pydantic models"
        )
    return args, results[0]


def _is_model(hint: Any) -> typing.TypeGuard[type[BaseModel]]:
    return isinstance(hint, type) and issubclass(hint, BaseModel)


async def _run(ctx: RequestContext, call: ToolCall, fn: Callable[[ToolCall], T]) -> T:
    """Run the synchronous function in a worker thread; its refusals become tool errors.

    The thread may say the call is long (``call.long``: the call becomes a task, if the
    client opted in) and report progress (``call.progress``: notifications/progress while
    the client waits, a task's status message), every PROGRESS_EVERY_S at most. A cancel of
    the call makes ``call.stopped()`` true, so a long step ends at its next item instead of
    running to the end unseen (a thread cannot be interrupted)."""
    reached: list[Any] = [0, 0, ""]
    stopping = threading.Event()

    def progress(done: int, total: int, message: str) -> None:
        reached[:] = [done, total, message]  # one list assignment: safe to read from the loop

    def long(message: str) -> bool:
        return bool(anyio.from_thread.run(ctx.run_as_task, message))

    async def report() -> None:
        shown = 0
        try:
            while True:
                await anyio.sleep(PROGRESS_EVERY_S)
                done, total, message = reached
                if done > shown:
                    shown = done
                    await ctx.report_progress(done, total, message)
        finally:
            stopping.set()  # cancelled: the call ended, or was cancelled

    reporting = dataclasses.replace(call, long=long, progress=progress, stopped=stopping.is_set)
    failed: list[Exception] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(report)
        try:
            result = await anyio.to_thread.run_sync(lambda: fn(reporting))
        except Exception as exc:
            # Raised below, outside the group, as itself (not in an exception group).
            failed.append(exc)
        else:
            # The cancel waited for the thread; it is raised here, so a cancelled call's
            # partial result is never reported as its result.
            await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    if failed:
        if isinstance(failed[0], ServiceError | NotGranted | ConsentRefused):
            raise ToolError(str(failed[0])) from None
        raise failed[0]
    return result


async def _indexed(ctx: RequestContext, find: Callable[[], Catalog | None]) -> None:
    """Before a query: give the workspace's first indexing a bounded time to finish. A wait
    for a build is long: the call becomes a task then (when the client opted in to them)."""

    def building() -> Catalog | None:
        """The catalog, if its first indexing is still running (one worker-thread trip:
        the usual case, an index built long ago, costs no second trip nor status read)."""
        catalog = find()
        if catalog is None:
            return None
        try:
            return None if catalog.status().complete else catalog
        except CatalogUnavailable:
            return None  # the query itself says why

    try:
        catalog = await anyio.to_thread.run_sync(building)
    except (ServiceError, NotGranted):
        return  # the query reports the same problem as its result
    if catalog is None:
        return
    await ctx.run_as_task("Waiting for the workspace's index to be built")
    await until_indexed(catalog, ctx.report_progress)
