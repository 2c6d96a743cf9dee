"""TEST ONLY: the conformance fixture's part for the Tasks extension (SEP-2663).

The suite's ``tasks-*`` scenarios (``src/scenarios/server/tasks/*.ts``) call tools of fixed
names and check how they become tasks: ``greet`` (never a task), ``slow_compute`` (a task
when it will take a while), ``failing_job`` and ``protocol_error_job`` (tasks ending in a tool
error and a protocol error), ``confirm_delete`` and ``multi_input`` (tasks that wait for one
and two answers), ``test_tool_with_task`` (MRTR first, then a task). They run on the
product's own task host (:class:`fsnotes.runtime.tasks.TaskHost`) and task store (the state
directory's SQLite, :mod:`fsnotes.state.tasks`), as the product's tools do.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel

from fsnotes.protocol import (
    App,
    ElicitForm,
    InputRequired,
    RequestContext,
    Tool,
    ToolAnnotations,
    ToolError,
    ToolResult,
    limits,
)
from fsnotes.protocol.wire import INTERNAL_ERROR, Fault
from fsnotes.runtime.tasks import STOPPED, TaskHost
from fsnotes.state.shared import SharedState
from fsnotes.state.tasks import open_tasks

# How long failing_job works before its error ("after ~1s", the scenario says).
FAILING_AFTER_S = 1.0


class NoArgs(BaseModel):
    pass


class GreetArgs(BaseModel):
    name: str = "World"


class ComputeArgs(BaseModel):
    seconds: float = 1.0
    label: str = ""


class DeleteArgs(BaseModel):
    filename: str = "file.txt"


def text(value: str, *, is_error: bool = False) -> ToolResult:
    return ToolResult(text=value, is_error=is_error)


def confirm_form(message: str) -> ElicitForm:
    schema = {
        "type": "object",
        "properties": {"confirm": {"type": "boolean"}, "name": {"type": "string"}},
    }
    return ElicitForm(message, schema)


def accepted(ctx: RequestContext, key: str) -> bool:
    answer = (ctx.input_responses or {}).get(key)
    return isinstance(answer, dict) and answer.get("action") == "accept"


async def greet(ctx: RequestContext, args: GreetArgs) -> ToolResult:
    return text(f"Hello, {args.name}!")


async def slow_compute(ctx: RequestContext, args: ComputeArgs) -> ToolResult:
    if args.seconds > 0:
        # It knows it will take that long: a task from the start (when the client opted in).
        await ctx.run_as_task(f"computing {args.label or 'a result'}")
    steps = max(1, int(args.seconds * 10))
    for done in range(1, steps + 1):
        await anyio.sleep(args.seconds / steps)
        await ctx.report_progress(done, steps, f"step {done} of {steps}")
    return text(f"Computed {args.label or 'a result'} in {args.seconds:g} s")


async def failing_job(ctx: RequestContext, args: NoArgs) -> ToolResult:
    await ctx.run_as_task("working on a job that will fail")
    await anyio.sleep(FAILING_AFTER_S)
    raise ToolError("The job failed: its input was rejected")


async def protocol_error_job(ctx: RequestContext, args: NoArgs) -> ToolResult:
    await ctx.run_as_task("working on a job that will break")
    await anyio.sleep(0.2)
    raise Fault(INTERNAL_ERROR, "Internal error: the job's worker crashed")


async def confirm_delete(ctx: RequestContext, args: DeleteArgs) -> ToolResult | InputRequired:
    if ctx.input_responses is None:
        await ctx.run_as_task(f"waiting for confirmation to delete {args.filename}")
        return InputRequired({"confirm": confirm_form(f"Delete {args.filename}?")})
    if accepted(ctx, "confirm"):
        return text(f"Deleted {args.filename}")
    return text(f"Kept {args.filename}")


async def multi_input(ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
    if ctx.input_responses is None:
        await ctx.run_as_task("waiting for two answers")
        return InputRequired(
            {
                "first": confirm_form("First question: confirm?"),
                "second": confirm_form("Second question: confirm?"),
            }
        )
    answered = sorted(k for k in ("first", "second") if accepted(ctx, k))
    return text(f"Answered: {', '.join(answered) or 'none'}")


async def tool_with_task(ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
    answer = (ctx.input_responses or {}).get("user_name")
    content = answer.get("content") if isinstance(answer, dict) else None
    name = content.get("name") if isinstance(content, dict) else None
    if not isinstance(name, str):
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        }
        ask = ElicitForm("What is your name?", schema)
        return InputRequired({"user_name": ask})
    # The input is gathered: the rest of the work is long, so it goes on as a task.
    await ctx.run_as_task(f"greeting {name}")
    await anyio.sleep(0.3)
    return text(f"Hello, {name}! (finished as a task)")


TaskSupport = Literal["forbidden", "optional", "required"]

TABLE: tuple[tuple[str, str, Any, type[BaseModel], TaskSupport], ...] = (
    ("greet", "Says hello at once (never a task)", greet, GreetArgs, "forbidden"),
    ("slow_compute", "Works `seconds` seconds (a task)", slow_compute, ComputeArgs, "optional"),
    ("failing_job", "Ends in a tool error (a task)", failing_job, NoArgs, "required"),
    ("protocol_error_job", "Ends in a protocol error", protocol_error_job, NoArgs, "optional"),
    ("confirm_delete", "Waits for a confirmation", confirm_delete, DeleteArgs, "optional"),
    ("multi_input", "Waits for two answers at once", multi_input, NoArgs, "optional"),
    ("test_tool_with_task", "MRTR, then a task", tool_with_task, NoArgs, "required"),
)


def tools() -> list[Tool[Any, Any]]:
    return [
        Tool(
            name=name,
            title=name,
            description=description,
            input_model=model,
            output_model=None,
            annotations=ToolAnnotations(read_only=True, destructive=False),
            handler=handler,
            task_support=support,
        )
        for name, description, handler, model, support in TABLE
    ]


def with_tasks(app: App, state_dir: Path) -> App:
    """``app`` with these tools and a task host over ``state_dir``'s SQLite task store."""
    store = open_tasks(
        SharedState(state_dir), clock=time.time, stale_after=limits.TASK_STALE_S, lost=STOPPED
    )
    host = TaskHost(store)
    return dataclasses.replace(app, tools=[*app.tools, *tools()], tasks=host, lifespan=host.serving)
