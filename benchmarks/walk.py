"""Which files one request runs through: a `notes_delete {uri}` and a `notes_search`, walked.

    .venv/bin/python benchmarks/walk.py [--json FILE]

Starts a real, jailed `fsnotes serve` (over stdio, then over `--http`) on a small temporary
vault under a profiler (`sys.setprofile` and `threading.setprofile`, installed before fsnotes
is imported), and records every Python function of `fsnotes/` and `sandbox/` that is called
while one request is being served: from just before the client writes it until its answer
has been read. A window is opened and closed by the client through one shared byte (an mmap
of a file made before the jail), so the server's own start-up and idle time are outside it;
the watcher is off and the rescan interval an hour, so no background work falls inside.

Printed per walk: the files whose functions ran (a file counts once however often it is
entered), and how often the steps the architecture page counts were called: authorizations
(`Grants.authorize_workspace_uri`, `authorize_note_uri`, `default_for`, `granted`), catalog
refreshes (`Catalogs.fresh`) and run-time scope syncs (`RuntimeScope.sync`). A 2026-07-28
delete is two requests (the ask and the confirmed retry) and is shown per round; a
2025-11-25 delete is one request with a live elicitation inside it.

Not a timed benchmark: nothing here is measured in seconds (the profiler slows everything).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Steps the walk counts by name: (file below the repository, function name) -> label.
COUNTED = {
    ("fsnotes/security/grants.py", "authorize_workspace_uri"): "authorize",
    ("fsnotes/security/grants.py", "authorize_note_uri"): "authorize",
    ("fsnotes/security/grants.py", "default_for"): "authorize",
    ("fsnotes/security/grants.py", "granted"): "granted",
    ("fsnotes/notes/index/indexer.py", "fresh"): "catalog refresh",
    ("fsnotes/setup/runtime.py", "sync"): "runtime sync",
}
# Idle between windows so nothing of the previous request is still running when one opens.
SETTLE_S = 0.3


def child(control: str, dump: str, argv: list[str]) -> int:
    """The server side: profile, then run the real command line with ``argv``."""
    ctl_fd = os.open(control, os.O_RDONLY)
    flag = mmap.mmap(ctl_fd, 1, access=mmap.ACCESS_READ)
    out_fd = os.open(dump, os.O_WRONLY | os.O_TRUNC)  # opened before the jail
    prefixes = (str(ROOT / "fsnotes") + os.sep, str(ROOT / "sandbox") + os.sep)
    calls: dict[int, Counter[tuple[str, str]]] = {}
    state = {"last": 0}

    def write_dump() -> None:
        data = {
            str(window): [[f, n, c] for (f, n), c in sorted(counter.items())]
            for window, counter in calls.items()
        }
        os.ftruncate(out_fd, 0)
        os.pwrite(out_fd, json.dumps(data).encode(), 0)

    def profile(frame: Any, event: str, _arg: Any) -> None:
        window = flag[0]
        if window != state["last"]:
            state["last"] = window
            if window == 255:  # the client asks for what was recorded so far
                write_dump()
        if event != "call" or window in (0, 255):
            return
        filename = frame.f_code.co_filename
        if filename.startswith(prefixes):
            rel = os.path.relpath(filename, ROOT)
            calls.setdefault(window, Counter())[(rel, frame.f_code.co_name)] += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    from fsnotes.app.cli import main  # imported under the profiler on purpose

    try:
        return main(argv)
    finally:
        sys.setprofile(None)
        write_dump()


class Windows:
    """The client side of the shared byte, and what the server recorded in each window."""

    def __init__(self, tmp: Path) -> None:
        self.control = tmp / "walk-control"
        self.control.write_bytes(b"\0")
        self.dump = tmp / "walk-dump.json"
        self.dump.write_text("{}")
        self._fd = os.open(self.control, os.O_RDWR)
        self._flag = mmap.mmap(self._fd, 1)
        self._next = 1
        self.names: dict[int, str] = {}

    def launcher(self) -> list[str]:
        return [sys.executable, str(Path(__file__)), "--child", str(self.control), str(self.dump)]

    def open(self, name: str) -> None:
        time.sleep(SETTLE_S)
        self.names[self._next] = name
        self._flag[0] = self._next
        self._next += 1

    def close(self) -> None:
        self._flag[0] = 0
        time.sleep(SETTLE_S)

    def collect(self, poke: Any) -> dict[str, Counter[tuple[str, str]]]:
        """What the server recorded: ``poke()`` makes it run (so it sees the dump request)."""
        self._flag[0] = 255
        before = self.dump.stat().st_mtime_ns
        deadline = time.monotonic() + 10
        while self.dump.stat().st_mtime_ns == before and time.monotonic() < deadline:
            poke()
            time.sleep(0.2)
        self._flag[0] = 0
        raw = json.loads(self.dump.read_text())
        return {
            self.names[int(w)]: Counter({(f, n): c for f, n, c in rows}) for w, rows in raw.items()
        }


def vault(tmp: Path) -> Path:
    ws = tmp / "notes"
    (ws / "garden").mkdir(parents=True)
    (ws / "groceries.md").write_text("# Groceries\n\nkettle, copper pan\n")
    (ws / "garden" / "plan.md").write_text("# Garden plan\n\ncopper kettle by the shed\n")
    (ws / "journal.md").write_text("# Journal\n\nSee [[groceries]].\n")
    return ws


SERVE_FLAGS = ("--principal", "ada")
ENV = {"FSNOTES_NO_WATCH": "1", "FSNOTES_RESCAN_INTERVAL": "3600"}


def delete_answer(request: dict[str, Any]) -> dict[str, Any]:
    fields = request["params"]["requestedSchema"]["properties"]
    options = fields.get("note_id", {}).get("oneOf")
    return {"confirm": True, **({"note_id": options[0]["const"]} if options else {})}


FORM = {"elicitation": {"form": {}}}


def walk_stdio(tmp: Path) -> dict[str, Counter[tuple[str, str]]]:
    from e2e.wire import LEGACY, Wire

    ws, state = vault(tmp / "stdio"), tmp / "stdio" / "state"
    windows = Windows(tmp / "stdio")
    os.environ.update(ENV)
    modern = Wire(ws, state, launcher=windows.launcher())
    try:
        ws_uri = ws.as_uri()
        # The first build done before any window opens.
        assert modern.tool("notes_list", {"workspaceUri": ws_uri})["result"]["structuredContent"]
        search = {"workspaceUri": ws_uri, "query": "copper kettle"}
        modern.tool("notes_search", search)  # warm: first-call imports stay outside
        windows.open("stdio 2026-07-28 notes_search")
        hits = modern.tool("notes_search", search)["result"]["structuredContent"]
        windows.close()
        assert hits["total"] == 2, hits
        args = {"uri": (ws / "groceries.md").as_uri()}
        windows.open("stdio 2026-07-28 notes_delete round 1")
        first = modern.tool("notes_delete", args, FORM)["result"]
        windows.close()
        ((key, request),) = first["inputRequests"].items()
        windows.open("stdio 2026-07-28 notes_delete round 2")
        done = modern.tool(
            "notes_delete",
            args,
            FORM,
            inputResponses={key: {"action": "accept", "content": delete_answer(request)}},
            requestState=first["requestState"],
        )["result"]
        windows.close()
        assert done["structuredContent"]["deleted"] is True, done
        by_title = {"workspaceUri": ws_uri, "title": "Journal"}
        windows.open("stdio 2026-07-28 notes_delete by title, round 1")
        asked = modern.tool("notes_delete", by_title, FORM)["result"]
        windows.close()
        assert asked["resultType"] == "input_required", asked
        recorded = windows.collect(lambda: modern.tool("workspaces_list", {}))
    finally:
        modern.close()

    # 2025-11-25 on a fresh server (and vault): initialize, then a live elicitation.
    ws, state = vault(tmp / "stdio-legacy"), tmp / "stdio-legacy" / "state"
    windows = Windows(tmp / "stdio-legacy")
    legacy = Wire(ws, state, launcher=windows.launcher())
    try:
        init = legacy.call(
            "initialize",
            {"protocolVersion": LEGACY, "capabilities": FORM, "clientInfo": {"name": "walk"}},
        )
        assert init["result"]["protocolVersion"] == LEGACY
        legacy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ws_uri = ws.as_uri()
        call = {"name": "notes_search", "arguments": {"workspaceUri": ws_uri, "query": "copper"}}
        legacy.call("tools/call", call)
        windows.open("stdio 2025-11-25 notes_search")
        legacy.call("tools/call", call)
        windows.close()
        windows.open("stdio 2025-11-25 notes_delete (live elicitation)")
        legacy.send(
            {
                "jsonrpc": "2.0",
                "id": 900,
                "method": "tools/call",
                "params": {
                    "name": "notes_delete",
                    "arguments": {"uri": (ws / "groceries.md").as_uri()},
                },
            }
        )
        while True:
            got = legacy.read(15)
            assert got is not None, "no elicitation"
            if got.get("method") == "elicitation/create":
                break
        legacy.send(
            {
                "jsonrpc": "2.0",
                "id": got["id"],
                "result": {"action": "accept", "content": delete_answer(got)},
            }
        )
        while True:
            done = legacy.read(15)
            assert done is not None, "no answer"
            if done.get("id") == 900:
                break
        windows.close()
        assert done["result"]["structuredContent"]["deleted"] is True, done
        recorded |= windows.collect(lambda: legacy.call("tools/list", {}))
    finally:
        legacy.close()
    return recorded


def walk_http(tmp: Path) -> dict[str, Counter[tuple[str, str]]]:
    import socket

    from transport.http_support import LEGACY, HttpServer, Raw, add_token, request_head

    base = tmp / "http"
    ws, state = vault(base), base / "state"
    token = add_token(state, "ada")
    windows = Windows(base)
    argv = [*windows.launcher(), "serve", "--workspace", str(ws), "--state-dir", str(state)]
    argv += [*SERVE_FLAGS, "--http", "127.0.0.1:0"]
    server = HttpServer(argv, env=ENV)
    raw = Raw(server, token)
    try:
        ws_uri = ws.as_uri()
        raw.call("tools/call", {"name": "notes_list", "arguments": {"workspaceUri": ws_uri}})
        search = {"name": "notes_search", "arguments": {"workspaceUri": ws_uri, "query": "copper"}}
        raw.call("tools/call", search)
        windows.open("http 2026-07-28 notes_search")
        raw.call("tools/call", search)
        windows.close()
        args = {"uri": (ws / "groceries.md").as_uri()}
        windows.open("http 2026-07-28 notes_delete round 1")
        first = raw.call("tools/call", {"name": "notes_delete", "arguments": args}, caps=FORM)
        windows.close()
        result = first["result"]
        ((key, request),) = result["inputRequests"].items()
        windows.open("http 2026-07-28 notes_delete round 2")
        answer = {key: {"action": "accept", "content": delete_answer(request)}}
        done = raw.call(
            "tools/call",
            {
                "name": "notes_delete",
                "arguments": args,
                "requestState": result["requestState"],
                "inputResponses": answer,
            },
            caps=FORM,
        )
        windows.close()
        assert done["result"]["structuredContent"]["deleted"] is True, done

        # 2025-11-25: a session, then a live elicitation on the POST's stream.
        init = raw.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": FORM,
                    "clientInfo": {"name": "walk"},
                },
            },
            modern=False,
        )
        session = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
        raw.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session, modern=False)

        def legacy_call(rid: int, params: dict[str, Any]) -> Any:
            body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
            return raw.post(body, session, modern=False)

        legacy_search = {
            "name": "notes_search",
            "arguments": {"workspaceUri": ws_uri, "query": "kettle"},
        }
        legacy_call(1, legacy_search)
        windows.open("http 2025-11-25 notes_search")
        legacy_call(2, legacy_search)
        windows.close()
        target = {"name": "notes_delete", "arguments": {"uri": (ws / "garden/plan.md").as_uri()}}
        body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": target})
        windows.open("http 2025-11-25 notes_delete (live elicitation)")
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(
                request_head(server, token, body.encode(), list(session.items())) + body.encode()
            )
            received = b""
            while b"elicitation/create" not in received:
                received += sock.recv(65536)
            (asked,) = [m for m in sse(received) if m.get("method")]
            posted = raw.post(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"action": "accept", "content": delete_answer(asked)},
                },
                session,
                modern=False,
            )
            assert posted.status_code == 202
            while not any(m.get("id") == 5 for m in sse(received)):
                chunk = sock.recv(65536)
                assert chunk, received
                received += chunk
        windows.close()
        (final,) = [m for m in sse(received) if m.get("id") == 5]
        assert final["result"]["structuredContent"]["deleted"] is True, final
        return windows.collect(lambda: raw.call("tools/list", {}))
    finally:
        raw.close()
        server.stop()


def sse(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in data.split(b"\n") if line.startswith(b"data:")]


def summarise(recorded: dict[str, Counter[tuple[str, str]]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, counter in recorded.items():
        files = sorted({f for f, _ in counter})
        steps: Counter[str] = Counter()
        for key, label in COUNTED.items():
            steps[label] += counter.get(key, 0)
        out[name] = {"files": files, "count": len(files), "steps": dict(steps)}
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3], sys.argv[4:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the walks here as JSON")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    with tempfile.TemporaryDirectory() as tmp:
        recorded = walk_stdio(Path(tmp))
        recorded |= walk_http(Path(tmp))
    walks = summarise(recorded)
    for name, walk in walks.items():
        steps = ", ".join(f"{k} {v}" for k, v in walk["steps"].items())
        print(f"\n{name}: {walk['count']} files ({steps})")
        for f in walk["files"]:
            print(f"  {f}")
    if args.json:
        args.json.write_text(json.dumps(walks, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
