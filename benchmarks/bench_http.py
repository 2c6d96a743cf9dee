"""`notes_read` over Streamable HTTP: `fsnotes serve --http` beside the official Python SDK's
own Streamable HTTP server (`mcp` 2.3.0, MCPServer) serving a tool that reads the same file.

Same run, same client, same 4 KiB Markdown file, both at 2026-07-28 (one stateless POST per
request, JSON answers): ours does layers 1-3, the bearer token check, Host/Origin checks, etag,
frontmatter, tags and links; the SDK's tool is a plain ``open(path).read()`` behind its DNS
rebinding check and no authentication. The client is a minimal keep-alive HTTP/1.1 client on
asyncio (so that it costs little beside either server), in this process; the servers are
separate processes. Measured: p50 and p99 per request, and requests per second, with one client
and with 16 concurrent clients (each its own connection); the two servers alternate round by
round so that the machine's noise falls on both. Reported as ratios ours/SDK.

Usage: python benchmarks/bench_http.py [--calls N] [--rounds N]
Writes benchmarks/results/http.json. Not a timed test: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "http.json"
NOTE = ("# Benchmark note\n\n" + "Some prose with a [[Link]] and a #tag.\n" * 120)[:4096]
MODERN = "2026-07-28"
CONCURRENT = 16


# --- the SDK's server (run as a child of this script) -------------------------------------------


def sdk_server(note: str) -> None:
    """Serve MCPServer's Streamable HTTP app with one tool, ``read_note``, on a free port."""
    import anyio
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("sdk-bench", log_level="WARNING")

    @server.tool()
    def read_note(path: str) -> str:
        """Read a note."""
        with open(path, encoding="utf-8") as f:
            return f.read()

    app = server.streamable_http_app(host="127.0.0.1")
    # As uvicorn binds by itself (through getaddrinfo): protocol TCP, so Nagle is off.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"serving at 127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    anyio.run(uvicorn.Server(config).serve, [sock])
    _ = note


# --- the client ---------------------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection sending prepared POSTs; answers must carry
    Content-Length (both servers answer these requests with JSON)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, request: bytes) -> bytes:
        assert self.reader is not None and self.writer is not None
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if status != b"200" or length is None:
            raise RuntimeError(f"unexpected answer: {head[:300]!r}")
        return await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


def prepared(host: str, token: str | None, tool: str, args: dict[str, Any]) -> list[bytes]:
    """Requests with ids 1..n cycled: the same POST but its id (bodies pre-encoded)."""
    out = []
    for rid in range(1, 65):
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
            "name": tool, "arguments": args, "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}}},
            separators=(",", ":")).encode()  # fmt: skip
        head = [
            "POST /mcp HTTP/1.1",
            f"Host: {host}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"MCP-Protocol-Version: {MODERN}",
            "Mcp-Method: tools/call",
            f"Mcp-Name: {tool}",
            f"Content-Length: {len(body)}",
        ]
        if token:
            head.append(f"Authorization: Bearer {token}")
        out.append(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    return out


async def measure(
    host: str, port: int, requests: list[bytes], clients: int, calls: int, check: bytes
) -> tuple[list[float], float]:
    """``calls`` requests from each of ``clients`` connections at once: latencies (s) and the
    wall time of the whole batch."""
    conns = [Connection(host, port) for _ in range(clients)]
    for c in conns:
        await c.open()
        for r in requests[:3]:  # warm the connection and the server
            assert check in await c.post(r)
    latencies: list[float] = []

    async def run(conn: Connection) -> None:
        for i in range(calls):
            started = time.perf_counter()
            answer = await conn.post(requests[i % len(requests)])
            latencies.append(time.perf_counter() - started)
            if i == 0:
                assert check in answer

    started = time.perf_counter()
    await asyncio.gather(*(run(c) for c in conns))
    wall = time.perf_counter() - started
    for c in conns:
        await c.close()
    return latencies, wall


def stats(latencies: list[float], wall: float) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
        "requests_per_s": round(len(latencies) / wall, 1),
        "samples": len(latencies),
    }


# --- the servers --------------------------------------------------------------------------------


class Served:
    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})}, cwd=REPO,
        )  # fmt: skip
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        self.port = 0
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode()
            if not line:
                break
            for marker in ("serving MCP over HTTP at http://127.0.0.1:", "serving at 127.0.0.1:"):
                if marker in line:
                    self.port = int(line.split(marker, 1)[1].split("/")[0].split()[0])
            if self.port:
                break
        if not self.port:
            self.proc.kill()
            raise RuntimeError(f"{argv[:4]} did not start")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run(calls: int, rounds: int) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "http",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "calls_per_client_per_round": calls,
        "rounds": rounds,
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(os.path.realpath(tmp))
        notes, state = root / "notes", root / "state"
        notes.mkdir()
        note = notes / "note.md"
        note.write_text(NOTE)
        token = subprocess.run(
            [sys.executable, "-m", "fsnotes", "token", "add", "--principal", "bench",
             "--state-dir", str(state)], capture_output=True, text=True, check=True, cwd=REPO,
        ).stdout.strip()  # fmt: skip
        ours = Served([sys.executable, "-m", "fsnotes", "serve", "--workspace", str(notes),
                       "--state-dir", str(state), "--principal", "bench",
                       "--http", "127.0.0.1:0"])  # fmt: skip
        sdk = Served([sys.executable, str(Path(__file__).resolve()), "--sdk-server", str(note)])
        try:
            servers = {
                "ours": (ours.port, prepared(f"127.0.0.1:{ours.port}", token, "notes_read",
                                             {"uri": note.as_uri()}), b"Benchmark note"),
                "sdk": (sdk.port, prepared(f"127.0.0.1:{sdk.port}", None, "read_note",
                                           {"path": str(note)}), b"Benchmark note"),
            }  # fmt: skip
            samples: dict[str, dict[int, tuple[list[float], float]]] = {
                name: {1: ([], 0.0), CONCURRENT: ([], 0.0)} for name in servers
            }
            for _ in range(rounds):
                for clients in (1, CONCURRENT):
                    per_client = calls if clients == 1 else max(10, calls // CONCURRENT * 2)
                    for name, (port, requests, check) in servers.items():
                        lat, wall = asyncio.run(
                            measure("127.0.0.1", port, requests, clients, per_client, check)
                        )
                        got, total = samples[name][clients]
                        samples[name][clients] = (got + lat, total + wall)
            for name in servers:
                report[name] = {
                    f"clients_{clients}": stats(*samples[name][clients])
                    for clients in (1, CONCURRENT)
                }
        finally:
            ours.close()
            sdk.close()
    report["ratios_ours_over_sdk"] = {
        f"clients_{c}.{k}": round(report["ours"][f"clients_{c}"][k] / report["sdk"][
            f"clients_{c}"][k], 3)
        for c in (1, CONCURRENT)
        for k in ("p50_ms", "p99_ms", "requests_per_s")
    }  # fmt: skip
    return report


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--sdk-server":
        sdk_server(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    report = run(args.calls, args.rounds)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'notes_read over HTTP':<24}{'p50':>9}{'p99':>9}{'req/s':>9}")
    for name in ("ours", "sdk"):
        for clients in (1, CONCURRENT):
            s = report[name][f"clients_{clients}"]
            label = f"{name}, {clients} client{'s' if clients > 1 else ''}"
            print(f"{label:<24}{s['p50_ms']:>7.2f}ms{s['p99_ms']:>7.2f}ms"
                  f"{s['requests_per_s']:>9.0f}")  # fmt: skip
    print("ratios ours/sdk:", json.dumps(report["ratios_ours_over_sdk"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
