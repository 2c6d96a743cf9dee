"""A new user's first HTTP hour: the README's "Over HTTP" example run as printed, by an OS user
who is not the principal it names, and what fsnotes says when a token's principal has no grant.

Before issue 24 the example made a token for ``ada`` and served ``--workspace`` for the OS
user: every call answered "no workspace", with nothing saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from setup.person import free_port

from transport.http_support import REPO, HttpServer, Raw, add_token, make_workspace

README = REPO / "README.md"
DOCS = REPO / "docs"
HTTP_EXAMPLE_MARKER = "<!-- http-example:"
# Not the principal the README names: the example must work for any OS user.
OS_USER = "bob"


def marked_block(marker: str) -> str:
    """The ```sh block after ``marker`` in the README or the docs pages, as printed."""
    for page in [README, *sorted(DOCS.rglob("*.md"))] if DOCS.exists() else [README]:
        text = page.read_text()
        if marker in text:
            after = text[text.index(marker) :]
            start = after.index("```sh\n") + len("```sh\n")
            return after[start : after.index("\n```", start)]
    raise AssertionError(f"no block marked {marker!r} in the README or docs/")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSNOTES_", "XDG_"))}
    return {**env, "HOME": str(home), "USER": OS_USER, "LOGNAME": OS_USER}


def test_the_readme_http_example_serves_the_notes_to_an_os_user_of_another_name(
    tmp_path: Path,
) -> None:
    block = marked_block(HTTP_EXAMPLE_MARKER)
    token_line, serve_line, claude_line = block.splitlines()
    manual = DOCS / "http.md"
    if manual.exists():  # the manual's copy of the example is the same
        assert block in manual.read_text()
    assert "8080" in serve_line and "8080" in claude_line
    port = str(free_port())  # the printed port may be taken on a shared machine
    home = tmp_path / "home"
    make_workspace(home)
    recorded = tmp_path / "claude-args"
    # A person's shell: their HOME, fsnotes on PATH, and `claude` recording what it was given
    # (the test then connects with exactly that URL and header). The host's command runs
    # before the server's, which then takes the shell's place (`exec`) to be stopped by pid.
    script = "\n".join(
        [
            f'export PATH="{Path(sys.executable).parent}:$PATH"',
            f"claude() {{ printf '%s\\n' \"$@\" > {recorded}; }}",
            token_line,
            claude_line.replace("8080", port),
            "exec " + serve_line.replace("8080", port),
        ]
    )
    server = HttpServer(["bash", "-c", script], env=_env(home))
    try:
        args = recorded.read_text().splitlines()
        assert args[:5] == ["mcp", "add", "--transport", "http", "notes"]
        url, header = args[5], args[7]
        assert url == server.url and header.startswith("Authorization: Bearer fsn_")
        client = Raw(server, header.removeprefix("Authorization: Bearer "))
        try:
            answer = client.post(client.request("tools/call", {"name": "workspaces_list"}))
            listed = answer.json()["result"]["structuredContent"]["workspaces"]
            assert [ws["access"] for ws in listed] == ["delete"], listed
            assert listed[0]["uri"] == (home / "notes").as_uri()
        finally:
            client.close()
    finally:
        server.stop()
    err = server.stderr()
    assert "no workspace is granted" not in err and "Traceback" not in err


def test_serve_warns_at_start_when_a_tokens_principal_has_no_grant(tmp_path: Path) -> None:
    state = tmp_path / "state"
    add_token(state, "ada")
    home = tmp_path / "home"
    workspace = make_workspace(home)
    # What the README said before: the token for ada, the workspace for the OS user.
    with HttpServer(
        [sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace),
         "--state-dir", str(state), "--http", "127.0.0.1:0"],
        env=_env(home),
    ) as server:  # fmt: skip
        assert server.logged("for principal(s) 'ada'")
        err = server.stderr()
    assert "WARNING" in err and "no workspace is granted to 'ada'" in err, err
    assert f"the principal served, {OS_USER!r}" in err and "--principal ada" in err
    # Granted: no warning, and the start-up line names the principals served.
    with HttpServer(
        [sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace),
         "--state-dir", str(state), "--principal", "ada", "--http", "127.0.0.1:0"],
        env=_env(home),
    ) as server:  # fmt: skip
        assert server.logged(f"over HTTP at {server.url} for principal(s) 'ada'")
    assert "no workspace is granted" not in server.stderr()


def _doctor(*argv: str, home: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "fsnotes", "doctor", "--json", *argv],
        capture_output=True, text=True, timeout=60, env=_env(home), cwd=REPO, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_doctor_names_the_principal_served_and_the_token_principals_without_a_grant(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    add_token(state, "ada")
    home = tmp_path / "home"
    workspace = make_workspace(home)
    common = ["--state-dir", str(state), "--http", "8123", "--workspace", str(workspace)]
    report = _doctor(*common, home=home)
    http = report["http"]
    assert isinstance(http, dict) and isinstance(report["warnings"], list)
    assert http["served_principal"] == OS_USER and http["ungranted_principals"] == ["ada"]
    assert any("no workspace is granted to 'ada'" in w for w in report["warnings"])
    granted = _doctor(*common, "--principal", "ada", home=home)
    assert granted["http"]["served_principal"] == "ada"  # type: ignore[index]
    assert granted["http"]["ungranted_principals"] == []  # type: ignore[index]
    assert not any("no workspace is granted" in w for w in granted["warnings"])  # type: ignore[attr-defined]
    text = subprocess.run(
        [sys.executable, "-m", "fsnotes", "doctor", *common],
        capture_output=True, text=True, timeout=60, env=_env(home), cwd=REPO, check=True,
    ).stdout  # fmt: skip
    assert f"Serves principal {OS_USER!r}" in text and "WARNING: no workspace is granted" in text


def test_a_run_time_grant_counts_for_doctor(tmp_path: Path) -> None:
    state = tmp_path / "state"
    add_token(state, "ada")
    home = tmp_path / "home"
    shared = home / "shared"
    (shared / "proj").mkdir(parents=True)
    subprocess.run(
        [sys.executable, "-m", "fsnotes", "grant", "--state-dir", str(state), "--setup-allow",
         str(shared), "--workspace", str(shared / "proj"), "--principal", "ada",
         "--access", "read"],
        capture_output=True, text=True, timeout=60, env=_env(home), cwd=REPO, check=True,
    )  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "fsnotes", "doctor", "--json", "--state-dir", str(state),
         "--http", "8123"],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=True,
        env={**_env(home), "FSNOTES_SETUP_ALLOW": str(shared)},
    )  # fmt: skip
    assert json.loads(out.stdout)["http"]["ungranted_principals"] == []
    # Grants follow the current allowlist: without it, the stored grant is not honoured.
    assert _doctor("--state-dir", str(state), "--http", "8123", home=home)["http"][  # type: ignore[index]
        "ungranted_principals"
    ] == ["ada"]


def test_token_add_help_is_its_own_and_token_list_has_a_header(tmp_path: Path) -> None:
    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fsnotes", *argv],
            capture_output=True, text=True, timeout=60, cwd=REPO,
        )  # fmt: skip

    add_help = cli("token", "add", "--help")
    assert add_help.returncode == 0
    assert add_help.stdout.startswith("usage: fsnotes token add")
    assert "a principal the server grants" in add_help.stdout
    state = tmp_path / "state"
    add_token(state, "ada")
    listed = cli("token", "list", "--state-dir", str(state)).stdout.splitlines()
    assert listed[0].split() == ["ID", "PRINCIPAL", "CREATED", "WHERE"] and len(listed) == 2
    serve_help = cli("serve", "--help").stdout
    assert "Serve the Markdown notes" in serve_help
    for held in ("sealing", "replay", "audit", "tokens", "history", "search index", "default"):
        assert held in " ".join(serve_help.split()), held
