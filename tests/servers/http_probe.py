"""TEST ONLY: `fsnotes serve` with one extra tool, ``net_probe``, that tries the network from
inside the server process, so a test can see what the jail lets a served process do.

``net_probe {connectPort, bindPort?}`` tries to connect to 127.0.0.1:connectPort, to bind a
kernel-chosen port (and ``bindPort`` when given), and reports ``"ok"`` or the errno name of each.
Reachable only by running this file (``python tests/servers/http_probe.py serve ...``): nothing
under ``fsnotes/`` imports it.
"""

from __future__ import annotations

import errno
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fsnotes.app import cli, server
from fsnotes.protocol import RequestContext, Tool, ToolAnnotations, ToolResult


class ProbeArgs(BaseModel):
    connectPort: int = Field(ge=1, le=65535)
    bindPort: int | None = Field(default=None, ge=1, le=65535)


def _attempt(fn: Callable[[], Any]) -> str:
    try:
        fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return "ok"


def _bind(port: int) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def _connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


async def net_probe(ctx: RequestContext, args: BaseModel) -> ToolResult:
    assert isinstance(args, ProbeArgs)
    out = {"connect": _attempt(lambda: _connect(args.connectPort)), "bind_any": _attempt(
        lambda: _bind(0))}  # fmt: skip
    if args.bindPort is not None:
        port = args.bindPort
        out["bind_port"] = _attempt(lambda: _bind(port))
    return ToolResult(structured=out)


def main() -> int:
    real_build = server.build

    def build(*a: Any, **kw: Any) -> server.Server:
        built = real_build(*a, **kw)
        probe = Tool(
            name="net_probe",
            title="Net probe",
            description="Test only: try connect and bind from inside the server.",
            input_model=ProbeArgs,
            output_model=None,
            annotations=ToolAnnotations(read_only=True, destructive=False),
            handler=net_probe,
        )
        built.app.tools = [*built.app.tools, probe]
        return built

    server.build = build  # type: ignore[assignment]
    return cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
