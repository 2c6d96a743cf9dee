"""Bearer tokens over HTTP, on a real `fsnotes serve --http`: every request needs one, a refusal
says nothing but `WWW-Authenticate: Bearer`, each token acts for its principal with exactly that
principal's grants, tokens added or revoked while serving count at once, and none is logged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fsnotes.security.tokens import digest_of
from transport.http_support import REPO, HttpServer, Raw, add_token, start_fsnotes

pytestmark = pytest.mark.timeout(120)


def _refused_alike(responses: list[object]) -> None:
    bodies = set()
    for r in responses:
        assert r.status_code == 401, r.text  # type: ignore[attr-defined]
        assert r.headers["www-authenticate"] == "Bearer"  # type: ignore[attr-defined]
        bodies.add(r.content)  # type: ignore[attr-defined]
    assert len(bodies) == 1  # missing, wrong or malformed: the same answer
    assert bodies.pop() == b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"Unauthorized"}}\n'


def test_every_request_needs_a_token_and_refusals_reveal_nothing(
    server: HttpServer, token: str
) -> None:
    responses = []
    for auth in (None, "Bearer fsn_wrong", f"Basic {token}", "Bearer", f"Bearer {token}x",
                 f"bearer  {token[:-1]}"):  # fmt: skip
        client = Raw(server, None)
        try:
            extra = {} if auth is None else {"authorization": auth}
            responses.append(client.post(client.request("tools/list"), extra))
            # GET and DELETE too, before their own checks
            responses.append(client.http.get(server.url, headers=client.headers(**extra)))
        finally:
            client.close()
    _refused_alike(responses)


def test_the_scheme_is_case_insensitive(server: HttpServer, token: str) -> None:
    client = Raw(server, None)
    try:
        ok = client.post(client.request("tools/list"), {"authorization": f"bEaReR {token}"})
        assert ok.status_code == 200
    finally:
        client.close()


def test_two_authorization_headers_are_refused_even_if_one_is_good(
    server: HttpServer, token: str
) -> None:
    client = Raw(server, token)
    try:
        body = client.request("tools/list")
        headers = [*client.headers().items(), *client.modern_headers(body).items(),
                   ("authorization", "Bearer fsn_other")]  # fmt: skip
        import json

        response = client.http.post(server.url, content=json.dumps(body), headers=headers)
        _refused_alike([response])
    finally:
        client.close()


def _serve_two_principals(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A configuration with two workspaces: ada may delete in `notes`, bob may only read
    `team`; neither is granted the other's."""
    notes, team, state = tmp_path / "notes", tmp_path / "team", tmp_path / "state"
    notes.mkdir()
    team.mkdir()
    (notes / "mine.md").write_text("# Mine\n")
    (team / "shared.md").write_text("# Shared\n")
    config = tmp_path / "fsnotes.toml"
    config.write_text(
        f'state_dir = "{state}"\n'
        f'[[workspace]]\nname = "notes"\npath = "{notes}"\n'
        f'[[workspace]]\nname = "team"\npath = "{team}"\n'
        '[[grant]]\nprincipal = "ada"\nworkspace = "notes"\naccess = "delete"\n'
        '[[grant]]\nprincipal = "bob"\nworkspace = "team"\naccess = "read"\n'
    )
    return config, notes, team


def test_each_token_acts_for_its_principal_with_exactly_its_grants(tmp_path: Path) -> None:
    config, notes, team = _serve_two_principals(tmp_path)
    ada, bob = add_token(tmp_path / "state", "ada"), add_token(tmp_path / "state", "bob")
    server = HttpServer([sys.executable, "-m", "fsnotes", "serve", "--config", str(config),
                         "--http", "127.0.0.1:0"])  # fmt: skip
    with server:
        as_ada, as_bob = Raw(server, ada), Raw(server, bob)
        try:
            listed = as_bob.call("tools/call", {"name": "workspaces_list", "arguments": {}})
            uris = [w["uri"] for w in listed["result"]["structuredContent"]["workspaces"]]
            assert uris == [team.as_uri()]
            read = as_bob.call("tools/call", {"name": "notes_read", "arguments": {
                "uri": (notes / "mine.md").as_uri()}})  # fmt: skip
            assert read["result"]["isError"] is True
            write = as_bob.call("tools/call", {"name": "notes_create", "arguments": {
                "workspaceUri": team.as_uri(), "path": "new.md", "content": "# n\n"}})  # fmt: skip
            assert write["result"]["isError"] is True and not (team / "new.md").exists()
            mine = as_ada.call("tools/call", {"name": "notes_create", "arguments": {
                "workspaceUri": notes.as_uri(), "path": "new.md", "content": "# n\n"}})  # fmt: skip
            assert mine["result"]["isError"] is False and (notes / "new.md").exists()
        finally:
            as_ada.close()
            as_bob.close()


def test_tokens_added_and_revoked_while_serving_count_at_once(
    workspace: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = add_token(state, "ada")
    with start_fsnotes(workspace, state) as server:
        later = add_token(state, "ada")
        client = Raw(server, later)
        try:
            assert client.post(client.request("tools/list")).status_code == 200
            subprocess.run(
                [sys.executable, "-m", "fsnotes", "token", "revoke", "--principal", "ada",
                 "--state-dir", str(state)], check=True, cwd=REPO, capture_output=True,
            )  # fmt: skip
            assert client.post(client.request("tools/list")).status_code == 401
            client.token = first
            assert client.post(client.request("tools/list")).status_code == 401
        finally:
            client.close()
        log = server.stderr()
    assert first not in log and later not in log


def test_a_token_from_the_configuration_file_is_accepted(tmp_path: Path, workspace: Path) -> None:
    token = "fsn_" + "k" * 43
    config = tmp_path / "fsnotes.toml"
    config.write_text(f'[[http.token]]\nprincipal = "ada"\nsha256 = "{digest_of(token).hex()}"\n')
    server = HttpServer([sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace),
                         "--state-dir", str(tmp_path / "state"), "--principal", "ada",
                         "--config", str(config), "--http", "127.0.0.1:0", "-v"])  # fmt: skip
    with server:
        client = Raw(server, token)
        try:
            assert client.post(client.request("tools/list")).status_code == 200
            client.token = "fsn_" + "j" * 43
            assert client.post(client.request("tools/list")).status_code == 401
        finally:
            client.close()
        assert token not in server.stderr()


def test_serving_http_without_any_token_is_refused_at_start(
    tmp_path: Path, workspace: Path
) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fsnotes", "serve", "--workspace", str(workspace), "--state-dir",
         str(tmp_path / "state"), "--http", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 2
    assert "fsnotes token add --principal NAME" in out.stderr


def test_token_add_prints_the_token_once_and_stores_only_its_digest(tmp_path: Path) -> None:
    state = tmp_path / "state"
    token = add_token(state, "ada")
    assert token.startswith("fsn_") and len(token) == 47
    stored = (state / "http-tokens.json").read_text()
    assert token not in stored and digest_of(token).hex() in stored
    assert (state / "http-tokens.json").stat().st_mode & 0o777 == 0o600
    listed = subprocess.run(
        [sys.executable, "-m", "fsnotes", "token", "list", "--state-dir", str(state)],
        capture_output=True, text=True, check=True, cwd=REPO,
    )  # fmt: skip
    assert digest_of(token).hex()[:12] in listed.stdout and token not in listed.stdout


def _token_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fsnotes", "token", *argv],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip


def test_token_list_shows_the_configurations_tokens_too_and_revoke_says_where_they_live(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    stored = add_token(state, "ada")
    in_config = digest_of("fsn_a-token-kept-in-the-toml-file").hex()
    config = tmp_path / "fsnotes.toml"
    config.write_text(f'[[http.token]]\nprincipal = "bob"\nsha256 = "{in_config}"\n')
    listed = _token_cli("list", "--state-dir", str(state), "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    header, *rows = [line.split() for line in listed.stdout.splitlines()]
    assert header == ["ID", "PRINCIPAL", "CREATED", "WHERE"]
    assert [r[0] for r in rows] == [digest_of(stored).hex()[:12], in_config[:12]]
    assert rows[0][1] == "ada" and rows[0][-1] == "http-tokens.json"
    assert rows[1][1] == "bob" and rows[1][-1] == str(config)
    # An id prefix of 8 digits names it too, as it does in the tokens file.
    refused = _token_cli(
        "revoke", "--id", in_config[:8], "--state-dir", str(state), "--config", str(config)
    )
    assert refused.returncode == 1
    assert "[[http.token]]" in refused.stderr and str(config) in refused.stderr
    # Removing it there is enough: no restart (tests/e2e/test_live_config_wire.py).
    assert "at their next request; no restart is needed" in refused.stderr
    assert in_config in config.read_text()  # nothing changed
    assert len(_token_cli("list", "--state-dir", str(state)).stdout.splitlines()) == 2
