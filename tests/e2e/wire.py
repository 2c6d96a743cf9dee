"""A raw newline-delimited JSON-RPC client for a real `fsnotes serve` child process.

Deliberately not an SDK: these tests assert exact wire shapes (error codes, data objects,
absence of a response), which SDK clients hide or normalise.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def meta(caps: dict[str, Any] | None = None, version: str = MODERN) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {} if caps is None else caps,
        "io.modelcontextprotocol/clientInfo": {"name": "wire-test", "version": "1"},
    }


def readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has something to read (or its end) within ``timeout`` seconds. poll(),
    not select(): select() refuses a descriptor of 1024 or more, which the test process
    reaches after many in-process servers (their state files are closed when the servers
    are collected), and a wire test then failed with "filedescriptor out of range"."""
    waiting = select.poll()
    waiting.register(fd, select.POLLIN)
    return bool(waiting.poll(max(0.0, timeout) * 1000))


class Wire:
    def __init__(
        self, workspace: Path, state_dir: Path, *extra: str, launcher: list[str] | None = None
    ) -> None:
        # launcher: what runs `fsnotes`'s CLI; by default the installed package.
        cmd = [
            *(launcher or [sys.executable, "-m", "fsnotes"]),
            "serve",
            "--workspace",
            str(workspace),
            "--state-dir",
            str(state_dir),
            "--principal",
            "ada",
            *extra,
        ]
        self._start(cmd)

    @classmethod
    def spawn(cls, argv: list[str]) -> Wire:
        """A client for any command that serves MCP on stdio (e.g. `docker run -i ...`)."""
        wire = cls.__new__(cls)
        wire._start(argv)
        return wire

    def _start(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._buf = b""
        self._next_id = 0
        # Every line the server wrote to stdout so far, as bytes: what the client received.
        self.received: list[bytes] = []
        self._err = b""  # stderr read so far by stderr_until (close() returns it too)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 10.0) -> dict[str, Any] | None:
        """The next message, or None when nothing arrives within ``timeout``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not readable(fd, left):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        self.received.append(line)
        return json.loads(line)

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """Send a request and return its response (notifications before it are skipped)."""
        self._next_id += 1
        rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            got = self.read(kw.get("timeout", 15.0))
            assert got is not None, f"no response to {method}"
            if got.get("id") == rid and ("result" in got or "error" in got):
                return got

    def tool(
        self,
        name: str,
        arguments: dict[str, Any],
        caps: dict[str, Any] | None = None,
        **params: Any,
    ) -> dict[str, Any]:
        return self.call(
            "tools/call", {"_meta": meta(caps), "name": name, "arguments": arguments, **params}
        )

    def stderr_until(self, text: str, timeout: float = 10.0) -> str:
        """The server's stderr so far, once it contains ``text`` (what its operator sees)."""
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        deadline = time.monotonic() + timeout
        while text.encode() not in self._err:
            left = deadline - time.monotonic()
            if not readable(fd, left):
                raise AssertionError(f"{text!r} did not appear on stderr: {self._err[-2000:]!r}")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"stderr closed without {text!r}: {self._err[-2000:]!r}")
            self._err += chunk
        return self._err.decode(errors="replace")

    def close(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stderr is not None
        err = (self._err + self.proc.stderr.read()).decode(errors="replace")
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return err
