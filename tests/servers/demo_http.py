"""The test-only demo server (tests/servers/demo_server.py) over Streamable HTTP (never part of
the product): the same core and HTTP transport as ``fsnotes serve --http``, with the demo's tools
and one more, ``hold``, that waits and leaves a mark when it is cancelled.

Run: ``python tests/servers/demo_http.py [HOST:]PORT`` with ``FSNOTES_TEST_TOKEN`` (the bearer
token accepted, for principal ``demo``; a second one for ``other`` in ``FSNOTES_TEST_TOKEN2``)
and ``FSNOTES_TEST_MARKS`` (a folder where ``hold`` writes ``cancelled-<id>`` when cancelled
and ``finished-<id>`` when it ran to the end).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fsnotes.protocol import RequestContext, ToolResult
from fsnotes.protocol.registry import InputRequired
from fsnotes.security.tokens import BearerTokens, TokenEntry, digest_of
from fsnotes.transport.http_server import bind, run_http
from fsnotes.transport.http_settings import HttpSettings, parse_listen
from tests.servers.demo_server import _tool, build_app


class HoldArgs(BaseModel):
    id: str = Field(description="A name for the marks this call leaves")
    seconds: float = Field(default=30.0, ge=0, le=120)
    progress: bool = Field(default=False, description="Report progress first (an SSE answer)")


async def hold(ctx: RequestContext, args: BaseModel) -> ToolResult | InputRequired:
    assert isinstance(args, HoldArgs)
    marks = Path(os.environ["FSNOTES_TEST_MARKS"])
    if args.progress:
        await ctx.report_progress(1, 2, "holding")
    try:
        await anyio.sleep(args.seconds)
    except anyio.get_cancelled_exc_class():
        (marks / f"cancelled-{args.id}").write_text("cancelled\n")
        raise
    (marks / f"finished-{args.id}").write_text("finished\n")
    return ToolResult(text=f"held {args.id}")


def main() -> None:
    host, port = parse_listen(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:0")
    app = build_app()
    app.tools = [*app.tools, _tool("hold", hold, HoldArgs)]
    entries = [TokenEntry("demo", digest_of(os.environ["FSNOTES_TEST_TOKEN"]))]
    if os.environ.get("FSNOTES_TEST_TOKEN2"):
        entries.append(TokenEntry("other", digest_of(os.environ["FSNOTES_TEST_TOKEN2"])))
    settings = HttpSettings(host=host, port=port)
    run_http(app, settings, BearerTokens(entries, None), bind(host, port))


if __name__ == "__main__":
    main()
