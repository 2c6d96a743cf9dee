"""Real HTTP servers for the transport tests, and a raw client that shows exact statuses.

Deliberately not an SDK client: these tests assert statuses, headers and wire shapes that SDK
clients hide. Servers are real processes: ``python -m fsnotes serve --http 127.0.0.1:0`` (its
token made with the real ``fsnotes token add``), or the test-only demo app over the same
transport (``tests/servers/demo_http.py``); the port is read from the line the server prints.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2

REPO = Path(__file__).resolve().parents[2]
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
NAME_SOURCES = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
ACCEPT = "application/json, text/event-stream"
_SERVING = re.compile(r"serving MCP over HTTP at (http://(\S+?)/mcp)")

NOTES = {
    "groceries.md": "# Groceries\n\nmilk, eggs #shopping\n",
    "garden/groceries-list.md": "---\ntitle: Garden groceries\n---\nseeds\n",
    "plan.md": "# Plan\n\nThe plan.\n",
    "café.md": "# Café\n\ncroissants\n",
}


def meta(caps: dict[str, Any] | None = None, version: str = MODERN) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {} if caps is None else caps,
        "io.modelcontextprotocol/clientInfo": {"name": "http-test", "version": "1"},
    }


def header_value(text: str) -> str:
    """A mirrored value as a client must send it (plain, or the Base64 sentinel form)."""
    if all(" " <= c <= "~" for c in text) and text == text.strip() and not text.startswith("=?"):
        return text
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


class HttpServer:
    """A server process that serves HTTP; its stderr is collected while it runs."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=REPO,
        )
        self._lines: list[str] = []
        self._ready = threading.Event()
        self.url = ""
        self.host = ""
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(30) or not self.url:
            self.stop()
            raise RuntimeError(f"the server did not start:\n{self.stderr()}")
        self.port = int(self.host.rsplit(":", 1)[1])

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            self._lines.append(line)
            found = _SERVING.search(line)
            if found and not self.url:
                self.url, self.host = found.group(1), found.group(2)
                self._ready.set()
        self._ready.set()

    def stderr(self) -> str:
        return "".join(self._lines)

    def logged(self, text: str, timeout: float = 10) -> bool:
        """Whether ``text`` appears on the server's stderr within ``timeout`` seconds: a line
        the server writes after its response reaches the reader thread a moment later."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                return text in self.stderr()
            time.sleep(0.02)
        return True

    def stop(self, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make_workspace(root: Path) -> Path:
    ws = root / "notes"
    for rel, text in NOTES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return ws


def add_token(state: Path, principal: str) -> str:
    """A token made by the real ``fsnotes token add`` (printed once on stdout)."""
    out = subprocess.run(
        [sys.executable, "-m", "fsnotes", "token", "add", "--principal", principal,
         "--state-dir", str(state)],
        capture_output=True, text=True, check=True, cwd=REPO,
    )  # fmt: skip
    return out.stdout.strip()


def start_fsnotes(
    workspace: Path, state: Path, *extra: str, listen: str = "127.0.0.1:0"
) -> HttpServer:
    return HttpServer(
        [sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace),
         "--state-dir", str(state), "--principal", "ada", "--http", listen, *extra]
    )  # fmt: skip


def start_demo(marks: Path, token: str, token2: str | None = None) -> HttpServer:
    env = {"FSNOTES_TEST_TOKEN": token, "FSNOTES_TEST_MARKS": str(marks)}
    if token2:
        env["FSNOTES_TEST_TOKEN2"] = token2
    return HttpServer([sys.executable, str(REPO / "tests/servers/demo_http.py")], env)


class Raw:
    """A raw HTTP client of one server and token (synchronous; one connection pool)."""

    def __init__(self, server: HttpServer, token: str | None, timeout: float = 30) -> None:
        self.server = server
        self.token = token
        self.http = httpx2.Client(timeout=timeout)
        self._ids = iter(range(1, 1 << 30))

    def close(self) -> None:
        self.http.close()

    def headers(self, **extra: str | None) -> dict[str, str]:
        out = {"content-type": "application/json", "accept": ACCEPT}
        if self.token is not None:
            out["authorization"] = f"Bearer {self.token}"
        for key, value in extra.items():
            name = key.replace("_", "-")
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value
        return out

    def modern_headers(self, body: dict[str, Any]) -> dict[str, str]:
        """The mirrored headers a conforming 2026-07-28 client sends for ``body``."""
        out = {"mcp-protocol-version": MODERN, "mcp-method": body["method"]}
        source = NAME_SOURCES.get(body["method"])
        value = (body.get("params") or {}).get(source) if source else None
        if isinstance(value, str):
            out["mcp-name"] = header_value(value)
        return out

    def request(
        self, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A 2026-07-28 request body (with _meta)."""
        return {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": {**(params or {}), "_meta": meta(caps)},
        }

    def post(
        self, body: Any, headers: dict[str, str] | None = None, *, modern: bool = True
    ) -> httpx2.Response:
        h = self.headers()
        if modern and isinstance(body, dict) and "method" in body:
            h.update(self.modern_headers(body))
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.http.post(self.server.url, content=content, headers=h)

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        """A 2026-07-28 request; its answer (from JSON or the SSE stream's last message)."""
        response = self.post(self.request(method, params, kw.get("caps")))
        return answer_of(response)


def events(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE response, in order."""
    out = []
    for line in response.text.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data:
                out.append(json.loads(data))
    return out


def answer_of(response: httpx2.Response) -> Any:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = [m for m in events(response) if "result" in m or "error" in m]
        return found[-1] if found else None
    return response.json()


def wait_for(path: Path, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.02)
    return path.exists()


def raw_exchange(server: HttpServer, head: bytes, body: bytes = b"", timeout: float = 10) -> bytes:
    """Send bytes as they are (no client library normalising them) and return the whole answer
    of one request (the connection is closed after it)."""
    import socket

    host, port = server.host.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head + body)  # the head says Connection: close; the server ends it
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def request_head(
    server: HttpServer,
    token: str | None,
    body: bytes,
    extra: list[tuple[str, str]] | None = None,
    *,
    accept: str | None = ACCEPT,
) -> bytes:
    lines = [
        b"POST /mcp HTTP/1.1",
        b"Host: " + server.host.encode(),
        b"Connection: close",
        b"Content-Type: application/json",
        b"Content-Length: " + str(len(body)).encode(),
    ]
    if accept is not None:
        lines.append(b"Accept: " + accept.encode())  # fmt: skip
    if token is not None:
        lines.append(b"Authorization: Bearer " + token.encode())
    lines += [f"{k}: {v}".encode() for k, v in extra or []]
    return b"\r\n".join(lines) + b"\r\n\r\n"
