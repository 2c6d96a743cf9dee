"""A test-only server built from the fsnotes protocol core (never part of the product).

Run: ``python -m tests.servers.demo_server`` or ``python tests/servers/demo_server.py``.
Tools: ``echo``, ``add``, ``confirm`` (form elicitation round trip), ``visit`` (URL
elicitation), ``slow`` (progress, logs, cancellable), ``roots_seen`` (the legacy session's
roots, or a roots input request), ``whoami`` (era, principal, capabilities), ``fail``
(ToolError / crash). It also serves a tiny in-memory
resource provider so resources/* and completion/complete can be driven.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from fsnotes.protocol import (
    App,
    ElicitForm,
    ElicitURL,
    InputRequired,
    InvalidParams,
    JSONObject,
    ListRoots,
    RequestContext,
    ResourceNotFound,
    Tool,
    ToolAnnotations,
    ToolError,
    ToolResult,
)
from fsnotes.transport.stdio import run_stdio


class EchoArgs(BaseModel):
    text: str = Field(description="Text to send back")


class EchoOut(BaseModel):
    text: str


class AddArgs(BaseModel):
    a: int = Field(description="First addend")
    b: int = Field(ge=0, le=1000, description="Second addend, 0..1000")


class NoArgs(BaseModel):
    pass


class ConfirmArgs(BaseModel):
    title: str = Field(description="The note to pretend to delete")


class SlowArgs(BaseModel):
    steps: int = Field(default=3, ge=1, le=100)
    delay: float = Field(default=0.05, ge=0, le=10)


class FailArgs(BaseModel):
    kind: Literal["tool", "crash", "invalid", "print"] = "tool"


async def echo(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    assert isinstance(args, EchoArgs)
    return ToolResult(structured=EchoOut(text=args.text))


async def add(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    assert isinstance(args, AddArgs)
    return ToolResult(structured={"sum": args.a + args.b})


async def confirm(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    assert isinstance(args, ConfirmArgs)
    answers = ctx.input_responses or {}
    answer = answers.get("confirm")
    if not isinstance(answer, Mapping) or ctx.request_state != f"confirm:{args.title}":
        return InputRequired(
            requests={
                "confirm": ElicitForm(
                    message=f"Delete note {args.title!r}?",
                    requested_schema={
                        "type": "object",
                        "properties": {"ok": {"type": "boolean", "title": "Delete it"}},
                        "required": ["ok"],
                    },
                )
            },
            state=f"confirm:{args.title}",
        )
    action = answer.get("action")
    content = answer.get("content") or {}
    if action == "accept" and content.get("ok") is True:
        return ToolResult(text=f"deleted {args.title!r}", structured={"deleted": True})
    return ToolResult(text=f"kept {args.title!r} ({action})", structured={"deleted": False})


async def visit(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    answer = (ctx.input_responses or {}).get("visit")
    if not isinstance(answer, Mapping):
        return InputRequired(
            requests={
                "visit": ElicitURL(
                    message="Authorize the demo",
                    url="https://example.invalid/authorize",
                    elicitation_id="demo-1",
                )
            },
            state="visit",
        )
    return ToolResult(text=f"url {answer.get('action')}")


async def slow(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    assert isinstance(args, SlowArgs)
    for i in range(1, args.steps + 1):
        await anyio.sleep(args.delay)
        await ctx.report_progress(i, args.steps, f"step {i}")
        await ctx.log("info", {"step": i})
    return ToolResult(text=f"done {args.steps}")


async def roots_seen(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    roots: Any = ctx.roots  # the session's (legacy); None without one (modern)
    if roots is None:
        answer = (ctx.input_responses or {}).get("roots")
        if not isinstance(answer, Mapping):
            return InputRequired(requests={"roots": ListRoots()})
        roots = answer.get("roots") or []
    uris = [r.get("uri") for r in roots if isinstance(r, Mapping)]
    return ToolResult(structured={"roots": uris})


async def whoami(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    return ToolResult(
        structured={
            "era": ctx.era,
            "principal": ctx.principal,
            "hinted": ctx.hinted,
            "asksLive": ctx.asks_live,
            "protocolVersion": ctx.protocol_version,
            "capabilities": dict(ctx.client_capabilities),
        }
    )


async def fail(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    assert isinstance(args, FailArgs)
    if args.kind == "tool":
        raise ToolError("The demo failed on purpose; call it with kind='crash' for more.")
    if args.kind == "print":
        print("a stray print from a careless handler")
        return ToolResult(text="printed")
    if args.kind == "invalid":
        raise InvalidParams("bad on purpose", data={"field": "kind"})
    raise RuntimeError("secret internal detail /home/someone/.ssh")


def _tool(
    name: str,
    handler: Any,
    model: type[BaseModel],
    output: type[BaseModel] | None = None,
    *,
    read_only: bool = True,
) -> Tool:
    return Tool(
        name=name,
        title=name.replace("_", " ").title(),
        description=f"Demo tool {name}.",
        input_model=model,
        output_model=output,
        annotations=ToolAnnotations(read_only=read_only, destructive=not read_only),
        handler=handler,
    )


class MemoryResources:
    """Two in-memory notes, paged one per page, to drive resources/* and completion."""

    NOTES = {"note://a": "alpha", "note://b": "beta"}

    async def list_resources(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        uris = sorted(self.NOTES)
        start = 0 if not cursor else {"p2": 1}.get(cursor, -1)
        if start < 0:
            raise InvalidParams("Invalid cursor", data={"cursor": cursor})
        page = [{"uri": u, "name": u[len("note://") :], "mimeType": "text/plain"} for u in uris]
        return page[start : start + 1], ("p2" if start == 0 else None)

    async def list_templates(self, ctx: RequestContext) -> list[JSONObject]:
        return [{"uriTemplate": "note://{name}", "name": "note"}]

    async def read_resource(
        self, ctx: RequestContext, uri: str
    ) -> list[JSONObject] | InputRequired:
        if uri == "note://secret":
            if not (ctx.input_responses or {}).get("ok"):
                return InputRequired(
                    requests={
                        "ok": ElicitForm("Reveal the secret?", {"type": "object", "properties": {}})
                    }
                )
            return [{"uri": uri, "mimeType": "text/plain", "text": "s3cret"}]
        if uri not in self.NOTES:
            raise ResourceNotFound(uri)
        return [{"uri": uri, "mimeType": "text/plain", "text": self.NOTES[uri]}]

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        names = [u[len("note://") :] for u in sorted(self.NOTES)]
        values = [n for n in names if n.startswith(str(argument.get("value", "")))]
        return values, len(values), False


def build_app() -> App:
    return App(
        name="fsnotes-demo",
        version="0.0.1",
        title="fsnotes demo (tests only)",
        instructions="Test server for the fsnotes protocol core.",
        tools=[
            _tool("echo", echo, EchoArgs, EchoOut),
            _tool("add", add, AddArgs),
            _tool("confirm", confirm, ConfirmArgs, read_only=False),
            _tool("visit", visit, NoArgs),
            _tool("slow", slow, SlowArgs),
            _tool("roots_seen", roots_seen, NoArgs),
            _tool("whoami", whoami, NoArgs),
            _tool("fail", fail, FailArgs),
        ],
        resources=MemoryResources(),
    )


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# Who the demo serves: stdio has no MCP authentication, so the transport is configured with it
# (the product takes it from its configuration).
PRINCIPAL = "demo"

if __name__ == "__main__":
    run_stdio(build_app(), principal=PRINCIPAL)
