"""The main job: a scripted MCP session against a copy of the bundled example vault.

The official Python SDK client (``mcp``, in the ``demo`` extra, which ``dev`` includes)
plays the desktop host: it spawns ``fsnotes serve`` over stdio exactly as Claude Desktop
would, and a scripted "person" answers the confirmation form. Every step checks its outcome;
the exit status is non-zero if anything did not behave as described. Without the extra
(a plain ``pip install fsnotes``) it says in one line how to get it and exits with status 2.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXAMPLE_VAULT = Path(__file__).parent.parent / "examples" / "vault"
WIDTH = 96


class DemoFailure(Exception):
    pass


def _say(text: str = "", indent: int = 0) -> None:
    pad = " " * indent
    for line in text.splitlines() or [""]:
        print(
            textwrap.fill(line, WIDTH, initial_indent=pad, subsequent_indent=pad + "  ")
            if line
            else ""
        )
    sys.stdout.flush()


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise DemoFailure(what)


def main() -> int:
    try:
        import anyio
        import mcp  # noqa: F401 - the host side of the demo
        import starlette  # noqa: F401 - the setup page its third session opens
        import uvicorn  # noqa: F401
    except ImportError as exc:
        print(
            f"fsnotes demo: the demo needs its extra ({exc.name or 'a module'} is missing: "
            "the official MCP Python SDK plays the host); install it with: "
            "pip install 'fsnotes[demo]' (make demo does this)",
            file=sys.stderr,
        )
        return 2
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="fsnotes-demo-") as tmp:
        base = Path(tmp)
        vault = base / "notes"
        shutil.copytree(EXAMPLE_VAULT, vault)
        (base / "outside-secret.md").write_text("# Not yours\nThe neighbour's diary.\n")
        try:
            anyio.run(_session, vault, base)
        except DemoFailure as exc:
            _say(f"\nDEMO FAILED: {exc}")
            return 1
    _say("\nAll steps behaved as described.")
    return 0


async def _session(vault: Path, base: Path) -> None:
    # The server's own stderr (start-up and Landlock notes) would interleave with the
    # transcript; `fsnotes serve` run by hand shows it.
    with open(os.devnull, "w") as devnull:
        await _scripted(vault, base, devnull)


async def _scripted(vault: Path, base: Path, devnull: Any) -> None:
    import mcp.types as types
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.client import ClientRequestContext

    person_answers: list[dict[str, Any]] = []

    # Named as in the SDK's ElicitationFnT protocol, which type checkers match by name.
    async def person(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        _say("┌─ the host shows the person a form ─────────────────────────────", 4)
        _say(f"│ {params.message}", 4)
        if isinstance(params, types.ElicitRequestFormParams):
            for option in params.requested_schema["properties"]["note_id"]["oneOf"]:
                _say(f"│   ( ) {option['title']}", 4)
            _say(f"│   [ ] {params.requested_schema['properties']['confirm']['title']}", 4)
        answer = person_answers.pop(0)
        _say(f"└─ the person answers: {json.dumps(answer)}", 4)
        return types.ElicitResult(**answer)

    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "fsnotes",
            "serve",
            "--workspace",
            str(vault),
            "--state-dir",
            str(base / "state"),
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    _say("fsnotes demo: a scripted MCP session on the bundled example vault")
    _say(f"host: the official MCP Python SDK client; server: fsnotes serve --workspace {vault}")

    async with (
        stdio_client(server, errlog=devnull) as (r, w),
        ClientSession(r, w, elicitation_callback=person) as s,
    ):
        init = await s.initialize()
        _say(
            f"\n== Session 1: protocol {init.protocol_version} (the handshake today's desktop "
            "hosts use)"
        )

        async def call(name: str, args: dict[str, Any]) -> types.CallToolResult:
            _say(f"\n> {name} {json.dumps(args, ensure_ascii=False)}")
            return await s.call_tool(name, args)

        def shown(
            result: types.CallToolResult, render: Callable[[dict[str, Any]], str]
        ) -> dict[str, Any]:
            data = result.structured_content or {}
            if result.is_error:
                block = result.content[0]
                _say(f"! refused: {getattr(block, 'text', '')}", 2)
            else:
                _say(render(data), 2)
            return data

        res = await call("workspaces_list", {})
        data = shown(
            res,
            lambda d: "\n".join(
                f"{w['name']}: {w['uri']} ({w['access']})" for w in d["workspaces"]
            ),
        )
        _check(len(data["workspaces"]) == 1, "one workspace")

        res = await call("notes_list", {"limit": 20})
        data = shown(
            res,
            lambda d: "\n".join(
                f"{n['path']:<28} {n['title']:<16} tags={','.join(n['tags']) or '-'}"
                for n in d["notes"]
            ),
        )
        _check(len(data["notes"]) == 8, "eight notes in the example vault")

        res = await call("notes_search", {"query": "shed"})
        data = shown(
            res,
            lambda d: "\n".join(
                f"{h['score']:>6}  {h['path']:<26} line {h['snippets'][0]['line']}: "
                f"{h['snippets'][0]['text']}"
                for h in d["results"]
            ),
        )
        _check(data["results"][0]["path"] == "projects/garden-shed.md", "shed note ranks first")

        shed = (vault / "projects" / "garden-shed.md").as_uri()
        res = await call("notes_read", {"uri": shed, "startLine": 6, "endLine": 8})
        data = shown(
            res,
            lambda d: (
                f"title={d['title']!r} tags={d['tags']} "
                f"links={[x['target'] for x in d['links']]}\n"
                f"etag={d['etag'][:16]}… lines {d['startLine']}-{d['endLine']}"
                f" of {d['totalLines']}:\n{d['content']}"
            ),
        )
        etag = data["etag"]

        res = await call(
            "notes_create",
            {
                "path": "journal/2026-11-29.md",
                "content": "# Sunday\n\nBought the timber. #garden\n",
            },
        )
        shown(res, lambda d: f"created {d['path']} etag={d['etag'][:16]}…")
        _check(not res.is_error, "create works")
        res = await call("notes_create", {"path": "inbox.md", "content": "overwrite?"})
        shown(res, lambda d: "")
        _check(bool(res.is_error), "create never overwrites")

        _say("\n(meanwhile the person edits the shed note in their editor)")
        with open(vault / "projects" / "garden-shed.md", "a", encoding="utf-8") as f:
            f.write("\nBought a padlock.\n")
        res = await call(
            "notes_update",
            {
                "uri": shed,
                "etag": etag,
                "edits": [{"oldText": "Budget: 400 EUR", "newText": "Budget: 450 EUR"}],
            },
        )
        shown(res, lambda d: "")
        _check(
            bool(res.is_error) and "padlock" in (vault / "projects" / "garden-shed.md").read_text(),
            "a stale etag is a conflict and the person's edit survives",
        )
        res = await call("notes_read", {"uri": shed})
        fresh = shown(res, lambda d: f"re-read: etag={d['etag'][:16]}…")["etag"]
        res = await call(
            "notes_update",
            {
                "uri": shed,
                "etag": fresh,
                "edits": [{"oldText": "Budget: 400 EUR", "newText": "Budget: 450 EUR"}],
            },
        )
        shown(res, lambda d: f"updated, new etag={d['etag'][:16]}…")
        _check(not res.is_error, "update with the current etag works")

        person_answers.append(
            {"action": "accept", "content": {"note_id": "recipes/groceries.md", "confirm": True}}
        )
        res = await call("notes_delete", {"title": "groceries"})
        shown(res, lambda d: d["message"])
        _check(not (vault / "recipes" / "groceries.md").exists(), "confirmed delete happened")

        _say("\n== Escape attempts (each must be refused and reveal nothing)")
        os.symlink(base / "outside-secret.md", vault / "shortcut.md")
        attempts = [
            "file:///etc/passwd",
            vault.as_uri() + "/../outside-secret.md",
            vault.as_uri() + "/%2e%2e/outside-secret.md",
            vault.as_uri() + "-evil/loot.md",
            vault.as_uri() + "/shortcut.md",
        ]
        for uri in attempts:
            res = await call("notes_read", {"uri": uri})
            shown(res, lambda d: "READ SUCCEEDED")
            text = getattr(res.content[0], "text", "")
            _check(
                bool(res.is_error) and "diary" not in text and "root:" not in text,
                f"escape via {uri} refused",
            )

    session2 = StdioServerParameters(command=server.command, args=server.args, env=server.env)
    async with (
        stdio_client(session2, errlog=devnull) as (r, w),
        ClientSession(r, w, elicitation_callback=person) as s,
    ):
        await s.discover()
        _say(
            f"\n== Session 2: protocol {s.protocol_version} (stateless; the confirmation "
            "travels as a sealed requestState)"
        )
        args = {"uri": (vault / "ideas.txt").as_uri()}
        _say(f"\n> notes_delete {json.dumps(args)}")
        result = await s.call_tool("notes_delete", args, allow_input_required=True)
        while isinstance(result, types.InputRequiredResult):
            _say(f"  input required; requestState={str(result.request_state)[:32]}…", 2)
            person_answers.append({"action": "decline"})
            responses: types.InputResponses = {}
            for k, req in (result.input_requests or {}).items():
                answer = await s.dispatch_input_request(
                    ClientRequestContext(session=s, request_id=k), req
                )
                if isinstance(answer, types.ErrorData):
                    raise DemoFailure(f"the host could not answer input request {k}: {answer}")
                responses[k] = answer
            result = await s.call_tool(
                "notes_delete",
                args,
                input_responses=responses,
                request_state=result.request_state,
                allow_input_required=True,
            )
        _say((result.structured_content or {}).get("message", ""), 2)
        _check((vault / "ideas.txt").exists(), "a declined delete keeps the note")

    await _setup_session(vault, base, devnull)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _person_on_the_page(url: str, code: str) -> str:
    """What the person does in their browser: open the page, type the code, approve.

    Plain HTTP with the headers a browser sends (Host, Origin, the page's cookie and form
    token); returns the heading of the page they end on.
    """
    import http.client
    import re
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    host = parts.netloc

    def fetch(method: str, body: str | None, headers: dict[str, str]) -> tuple[str, list[str]]:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        try:
            conn.request(method, parts.path, body=body, headers={"Host": host, **headers})
            resp = conn.getresponse()
            cookies = [
                v.split(";", 1)[0] for k, v in resp.getheaders() if k.lower() == "set-cookie"
            ]
            return resp.read().decode("utf-8", "replace"), cookies
        finally:
            conn.close()

    page, cookies = fetch("GET", None, {})
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    if token is None:
        raise DemoFailure("the setup page offered no form")
    form = urllib.parse.urlencode({"csrf": token.group(1), "code": code, "action": "approve"})
    done, _ = fetch(
        "POST",
        form,
        {
            "Origin": f"http://{host}",
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": "; ".join(cookies),
        },
    )
    heading = re.search(r"<h1[^>]*>(.*?)</h1>", done, re.S)
    return re.sub(r"<[^>]+>", "", heading.group(1)).strip() if heading else "(no heading)"


async def _setup_session(vault: Path, base: Path, devnull: Any) -> None:
    import threading
    import time

    import mcp.types as types
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.client import ClientRequestContext

    shared = base / "shared"
    (shared / "garden-club").mkdir(parents=True)
    (shared / "garden-club" / "minutes.md").write_text(
        "# Garden club minutes\n\nSeed swap on Saturday. #garden\n"
    )
    state = base / "state"
    port = _free_port()
    approvals: list[Any] = []

    async def host(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        if not isinstance(params, types.ElicitRequestURLParams):
            raise DemoFailure("expected a URL-mode request")
        _say("┌─ the host asks the person to open a page ──────────────────────", 4)
        _say(f"│ {params.message}", 4)
        _say(f"│ {params.url}", 4)
        _say("└─ the person agrees; their browser opens it (the model never sees the page)", 4)
        code = (state / "setup-code").read_text().strip()

        def later() -> None:
            # The person, not the host: they act in their browser after the host answered.
            time.sleep(0.3)
            heading = _person_on_the_page(params.url, code)
            _say(f"   (on the page, the person types the setup code and approves: {heading!r})")
            approvals.append(heading)

        threading.Thread(target=later, daemon=True).start()
        return types.ElicitResult(action="accept")

    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "fsnotes",
            "serve",
            "--workspace",
            str(vault),
            "--state-dir",
            str(state),
            "--setup-allow",
            str(shared),
            "--setup-port",
            str(port),
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    async with (
        stdio_client(server, errlog=devnull) as (r, w),
        ClientSession(r, w, elicitation_callback=host) as s,
    ):
        init = await s.initialize()
        _say(
            f"\n== Session 3: protocol {init.protocol_version}; connecting a folder out of band "
            f"(fsnotes serve ... --setup-allow {shared})"
        )
        outside = {"workspaceUri": (base / "outside-secret.md").as_uri(), "access": "read"}
        _say(f"\n> notes_setup {json.dumps(outside)}")
        res = await s.call_tool("notes_setup", outside)
        _say(f"! refused: {getattr(res.content[0], 'text', '')}", 2)
        _check(bool(res.is_error), "a folder outside the allowlist cannot even be asked for")

        args = {"workspaceUri": (shared / "garden-club").as_uri(), "access": "read"}
        _say(f"\n> notes_setup {json.dumps(args)}")
        res = await s.call_tool("notes_setup", args)
        data = res.structured_content or {}
        _say(str(data.get("message", "")), 2)
        _check(data.get("status") == "granted" and len(approvals) == 1, "approved on the page")

        _say('\n> notes_search {"workspaceUri": …garden-club, "query": "seed"}')
        res = await s.call_tool(
            "notes_search", {"workspaceUri": args["workspaceUri"], "query": "seed"}
        )
        hits = (res.structured_content or {}).get("results", [])
        for h in hits:
            _say(f"{h['path']}: {h['snippets'][0]['text']}", 2)
        _check(bool(hits) and not res.is_error, "the granted folder is searchable")
