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
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import anyio
from pydantic import BaseModel

from fsnotes.notes.index.catalog import Catalog
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

ArgsT = TypeVar("ArgsT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)
T = TypeVar("T")


@dataclass(frozen=True)
class ToolCall:
    """One call of a notes tool, as its function sees it."""

    notes: Notes  # the principal's view for this request (its Scope, resolved once)
    deletes: DeleteFlow  # the confirmed delete (the server's sealer, replay store, clock)
    state: str | None  # the sealed state a retry echoes (None on a first call)
    answers: Mapping[str, Any] | None  # the person's answers to what the first call asked


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
            notes = service.acting_for(ctx.principal, ctx.roots)
            call = ToolCall(notes, deletes, ctx.request_state, ctx.input_responses)
            if waits is not None:
                await _indexed(ctx, lambda: waits(call, args))
            return await _run(lambda: function(call, args))

        return Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_model=self.args,
            output_model=self.result,
            annotations=self.annotations,
            handler=handler,
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


async def _run(fn: Callable[[], T]) -> T:
    """Run the synchronous function in a worker thread; its refusals become tool errors."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except (ServiceError, NotGranted, ConsentRefused) as exc:
        raise ToolError(str(exc)) from None


async def _indexed(ctx: RequestContext, find: Callable[[], Catalog | None]) -> None:
    """Before a query: give the workspace's first indexing a bounded time to finish."""
    try:
        catalog = await anyio.to_thread.run_sync(find)
    except (ServiceError, NotGranted):
        return  # the query reports the same problem as its result
    if catalog is not None:
        await until_indexed(catalog, ctx.report_progress)
