"""Protocol-layer benchmark: our stdio server beside the reference node filesystem server.

Measures, for each server in the same run and with the same minimal client (blocking pipes,
one request at a time):
  * cold start: spawn to the first ``initialize`` response (median and p99 over spawns);
  * ``tools/list`` latency, median and p99;
  * a trivial tool call: our ``echo`` of a 4 KiB string vs the node server's ``read_text_file``
    of a 4 KiB file (the figure the issue quotes).
Ours is the test-only demo server built from the protocol core (``tests/servers``). Both eras
of ours are measured (2025-11-25 after ``initialize``, and 2026-07-28 with ``_meta``); the
ratios compare the legacy figures, since the node server speaks only the handshake era.
The node server is installed with npm into ``benchmarks/.cache/`` (gitignored).

Usage: python benchmarks/bench_protocol.py [--spawns N] [--calls N]
Writes benchmarks/results/protocol.json and prints a summary. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "benchmarks" / ".cache"
RESULTS = REPO / "benchmarks" / "results" / "protocol.json"
NODE_PACKAGE = "@modelcontextprotocol/server-filesystem"
NODE_VERSION = "2026.8.31"
NODE_ENTRY = (
    CACHE / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
)
PAYLOAD = "x" * 4096
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def ensure_node_server() -> str | None:
    """Install the reference server into the cache; return why not, or None when ready."""
    if NODE_ENTRY.exists():
        return None
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "node/npm not found"
    CACHE.mkdir(parents=True, exist_ok=True)
    if not (CACHE / "package.json").exists():
        (CACHE / "package.json").write_text('{"name": "fsnotes-bench-cache", "private": true}\n')
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", f"{NODE_PACKAGE}@{NODE_VERSION}"],
        cwd=CACHE,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return None if NODE_ENTRY.exists() else "npm install did not produce the server"


class Session:
    """A spawned stdio server with a blocking line client."""

    def __init__(self, cmd: list[str]) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=-1,  # buffered reads: readline on a raw pipe reads one byte per syscall
        )
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server exited while waiting for {method}")
            reply: dict[str, Any] = json.loads(line)
            if reply.get("id") == self.next_id and "method" not in reply:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def initialize(self) -> float:
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        )
        elapsed = time.perf_counter() - self.started
        self.notify("notifications/initialized")
        return elapsed

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def stats_ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 4),
        "p99_ms": round(p99 * 1000, 4),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 4),
        "n": len(ordered),
    }


def timed(fn: Any, n: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def cold_start(cmd: list[str], spawns: int) -> dict[str, float]:
    samples = []
    for _ in range(spawns):
        session = Session(cmd)
        samples.append(session.initialize())
        session.close()
    return stats_ms(samples)


def bench_ours(spawns: int, calls: int) -> dict[str, Any]:
    cmd = [sys.executable, str(REPO / "tests" / "servers" / "demo_server.py")]
    result: dict[str, Any] = {
        "command": "python tests/servers/demo_server.py",
        "cold_start": cold_start(cmd, spawns),
    }
    session = Session(cmd)
    session.initialize()
    warm = max(20, calls // 10)
    result["tools_list"] = stats_ms(timed(lambda: session.request("tools/list"), calls, warm))
    echo = {"name": "echo", "arguments": {"text": PAYLOAD}}
    result["tool_call"] = stats_ms(timed(lambda: session.request("tools/call", echo), calls, warm))
    result["tool_call"]["tool"] = "echo (4 KiB string)"
    modern_list = {"_meta": MODERN_META}
    result["modern_tools_list"] = stats_ms(
        timed(lambda: session.request("tools/list", modern_list), calls, warm)
    )
    modern_echo = {**echo, "_meta": MODERN_META}
    result["modern_tool_call"] = stats_ms(
        timed(lambda: session.request("tools/call", modern_echo), calls, warm)
    )
    session.close()
    return result


def bench_node(spawns: int, calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.realpath(tmp)
        note = Path(root, "note.md")
        note.write_text(PAYLOAD)
        cmd = ["node", str(NODE_ENTRY), root]
        result: dict[str, Any] = {
            "command": f"node {NODE_PACKAGE}@{NODE_VERSION} <dir>",
            "cold_start": cold_start(cmd, spawns),
        }
        session = Session(cmd)
        session.initialize()
        names = [t["name"] for t in session.request("tools/list")["result"]["tools"]]
        tool = "read_text_file" if "read_text_file" in names else "read_file"
        warm = max(20, calls // 10)
        result["tools_list"] = stats_ms(timed(lambda: session.request("tools/list"), calls, warm))
        read = {"name": tool, "arguments": {"path": str(note)}}
        result["tool_call"] = stats_ms(
            timed(lambda: session.request("tools/call", read), calls, warm)
        )
        result["tool_call"]["tool"] = f"{tool} (4 KiB file)"
        session.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=15)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    report: dict[str, Any] = {
        "benchmark": "protocol",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "ours": bench_ours(args.spawns, args.calls),
    }
    why_not = ensure_node_server()
    if why_not is None:
        report["node_reference"] = bench_node(args.spawns, args.calls)
        ours, node = report["ours"], report["node_reference"]
        ratios: dict[str, float] = {}
        for part in ("cold_start", "tools_list", "tool_call"):
            for stat in ("median_ms", "p99_ms"):
                ratios[f"{part}.{stat}"] = round(ours[part][stat] / node[part][stat], 3)
        report["ratios_ours_over_node"] = ratios
        report["goals_met"] = {
            "cold_start_below_node": ratios["cold_start.median_ms"] < 1,
            "per_call_median_and_p99_at_or_below_node": all(
                ratios[f"{p}.{s}"] <= 1
                for p in ("tools_list", "tool_call")
                for s in ("median_ms", "p99_ms")
            ),
        }
    else:
        report["node_reference"] = {"skipped": why_not}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
