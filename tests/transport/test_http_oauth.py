"""OAuth access tokens on a real `fsnotes serve --http`, issued by a real OpenID provider
process on loopback (tests/servers/oidc_provider.py: discovery, JWKS, signed RS256 tokens,
key rotation): a valid token acts with its subject's grants lowered to its scopes; expired,
not-yet-valid, wrong-audience, wrong-issuer, unknown-key, `alg: none` and forged tokens each
get the same 401; the protected resource metadata (RFC 9728) is served and named in the
challenge; static tokens keep working beside OAuth; rotation at the provider is followed."""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from fsnotes.security.oauth import JWKS_MIN_REFETCH_S

from .http_support import REPO, HttpServer, Raw, add_token
from .test_http_sessions import call, initialize, legacy

pytestmark = pytest.mark.timeout(120)

ALL = "notes:read notes:write notes:delete"
UNAUTHORIZED = b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"Unauthorized"}}\n'


class Provider:
    """The test OpenID provider process, stopped by its process id."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests/servers/oidc_provider.py")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            cwd=REPO,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        assert line.startswith("oidc provider at "), line
        self.issuer = line.split(" at ", 1)[1].strip()
        self.http = httpx2.Client(timeout=10)

    def token(self, sub: str, scope: str, resource: str, **knobs: Any) -> str:
        form = {"grant_type": "client_credentials", "client_id": sub, "scope": scope,
                "resource": resource, **{k: str(v) for k, v in knobs.items()}}  # fmt: skip
        answer = self.http.post(f"{self.issuer}/token", data=form)
        answer.raise_for_status()
        token: str = answer.json()["access_token"]
        return token

    def rotate(self) -> None:
        self.http.post(f"{self.issuer}/rotate").raise_for_status()

    def jwks_fetches(self) -> int:
        count: int = self.http.get(f"{self.issuer}/stats").json()["jwks_fetches"]
        return count

    def stop(self) -> None:
        self.http.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Setup:
    def __init__(self, tmp: Path, provider: Provider) -> None:
        self.notes, self.team, self.state = tmp / "notes", tmp / "team", tmp / "state"
        self.notes.mkdir()
        self.team.mkdir()
        (self.notes / "mine.md").write_text("# Mine\n")
        (self.team / "shared.md").write_text("# Shared\n")
        self.port = _free_port()
        self.audience = f"http://127.0.0.1:{self.port}/mcp"
        self.provider = provider
        self.config = tmp / "fsnotes.toml"
        self.config.write_text(
            f'state_dir = "{self.state}"\n'
            f'[[workspace]]\nname = "notes"\npath = "{self.notes}"\n'
            f'[[workspace]]\nname = "team"\npath = "{self.team}"\n'
            '[[grant]]\nprincipal = "ada"\nworkspace = "notes"\naccess = "delete"\n'
            '[[grant]]\nprincipal = "bob"\nworkspace = "team"\naccess = "delete"\n'
            f'[http.oauth]\nissuer = "{provider.issuer}"\naudience = "{self.audience}"\n'
        )
        self.static = add_token(self.state, "ada")
        listen = f"127.0.0.1:{self.port}"
        argv = ["-m", "fsnotes", "serve", "--config", str(self.config), "--http", listen]
        self.server = HttpServer([sys.executable, *argv])

    def token(self, sub: str = "ada", scope: str = ALL, **knobs: Any) -> str:
        return self.provider.token(sub, scope, knobs.pop("resource", self.audience), **knobs)


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    p = Provider()
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, provider: Provider) -> Iterator[Setup]:
    s = Setup(tmp_path_factory.mktemp("oauth"), provider)
    with s.server:
        yield s


def _call(server: HttpServer, token: str, name: str, arguments: dict[str, Any]) -> Any:
    client = Raw(server, token)
    try:
        return client.call("tools/call", {"name": name, "arguments": arguments})
    finally:
        client.close()


def _create(setup: Setup, token: str, workspace: Path, path: str) -> Any:
    arguments = {"workspaceUri": workspace.as_uri(), "path": path, "content": "# n\n"}
    return _call(setup.server, token, "notes_create", arguments)


def _list(setup: Setup, token: str) -> list[str]:
    listed = _call(setup.server, token, "workspaces_list", {})
    return [w["uri"] for w in listed["result"]["structuredContent"]["workspaces"]]


def _post(setup: Setup, token: str | None) -> httpx2.Response:
    client = Raw(setup.server, token)
    try:
        return client.post(client.request("tools/list"))
    finally:
        client.close()


def test_a_valid_token_acts_with_its_subjects_grants(setup: Setup) -> None:
    token = setup.token("ada")
    assert _list(setup, token) == [setup.notes.as_uri()]
    made = _create(setup, token, setup.notes, "by-oauth.md")
    assert made["result"]["isError"] is False and (setup.notes / "by-oauth.md").exists()


def test_one_principals_token_never_uses_anothers_grants(setup: Setup) -> None:
    bob = setup.token("bob")
    assert _list(setup, bob) == [setup.team.as_uri()]
    read = _call(setup.server, bob, "notes_read", {"uri": (setup.notes / "mine.md").as_uri()})
    assert read["result"]["isError"] is True
    wrote = _create(setup, bob, setup.notes, "bob.md")
    assert wrote["result"]["isError"] is True and not (setup.notes / "bob.md").exists()
    # A subject naming no granted principal gets nothing at all.
    assert _list(setup, setup.token("mallory")) == []


def test_the_scope_lowers_the_grant(setup: Setup) -> None:
    reader = setup.token("ada", "notes:read")
    read = _call(setup.server, reader, "notes_read", {"uri": (setup.notes / "mine.md").as_uri()})
    assert read["result"]["isError"] is False
    wrote = _create(setup, reader, setup.notes, "reader.md")
    assert wrote["result"]["isError"] is True and not (setup.notes / "reader.md").exists()
    writer = setup.token("ada", "notes:write")
    wrote = _create(setup, writer, setup.notes, "writer.md")
    assert wrote["result"]["isError"] is False and (setup.notes / "writer.md").exists()
    gone = _call(setup.server, writer, "notes_delete", {
        "uri": (setup.notes / "writer.md").as_uri()})  # fmt: skip
    assert gone["result"]["isError"] is True and (setup.notes / "writer.md").exists()


def test_a_token_without_a_notes_scope_gets_403_insufficient_scope(setup: Setup) -> None:
    response = _post(setup, setup.token("ada", "openid profile"))
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope"')
    assert f'scope="{ALL}"' in challenge


def _forged(token: str) -> str:
    """The same header and claims, signed by a key that is not the provider's."""
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwt.encode(claims, other, algorithm="RS256", headers={"kid": header["kid"]})


def _hmac_with_public_key(token: str, provider: Provider) -> str:
    """Algorithm confusion: HS256 keyed with the provider's public RSA modulus (anyone has
    it), naming the provider's kid."""
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    jwks = httpx2.get(f"{provider.issuer}/jwks", timeout=10).json()
    secret = jwks["keys"][0]["n"].encode()
    return jwt.encode(claims, secret, algorithm="HS256", headers={"kid": header["kid"]})


def _unsigned(token: str) -> str:
    claims = jwt.decode(token, options={"verify_signature": False})
    head = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    body = base64.urlsafe_b64encode(json.dumps(claims).encode())
    return f"{head.decode().rstrip('=')}.{body.decode().rstrip('=')}."


def test_bad_tokens_each_get_the_same_401_revealing_nothing(setup: Setup) -> None:
    good = setup.token("ada")
    bad = {
        "expired": setup.token("ada", expires_in=-3600),
        "not yet valid": setup.token("ada", not_before_in=3600),
        "wrong audience": setup.token("ada", resource="http://127.0.0.1:1/mcp"),
        "wrong issuer": setup.token("ada", issuer="http://127.0.0.1:1"),
        "unknown key id": setup.token("ada", kid="not-a-key-of-the-provider"),
        "alg none": _unsigned(good),
        "forged signature": _forged(good),
        "HS256 with the public key": _hmac_with_public_key(good, setup.provider),
        "garbage": "a.b.c",
    }
    answers = {why: _post(setup, token) for why, token in bad.items()}
    for why, r in answers.items():
        assert r.status_code == 401, why
        assert r.content == UNAUTHORIZED, why
    assert len({r.headers["www-authenticate"] for r in answers.values()}) == 1
    challenge = answers["expired"].headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", resource_metadata="')
    assert _post(setup, good).status_code == 200
    log = setup.server.stderr()
    for token in [good, *bad.values()]:
        assert token not in log


def test_the_challenge_names_the_protected_resource_metadata(setup: Setup) -> None:
    r = _post(setup, None)
    assert r.status_code == 401 and r.content == UNAUTHORIZED
    metadata_url = f"http://127.0.0.1:{setup.port}/.well-known/oauth-protected-resource/mcp"
    assert r.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{metadata_url}", scope="{ALL}"'
    )
    with httpx2.Client(timeout=10) as http:
        for url in (
            metadata_url,
            f"http://127.0.0.1:{setup.port}/.well-known/oauth-protected-resource",
        ):
            doc = http.get(url).json()
            assert doc["resource"] == setup.audience
            assert doc["authorization_servers"] == [setup.provider.issuer]
            assert doc["scopes_supported"] == ALL.split()
        # The Host check still comes first.
        assert http.get(metadata_url, headers={"host": "evil.example"}).status_code == 403


def test_static_tokens_keep_working_beside_oauth(setup: Setup) -> None:
    assert _list(setup, setup.static) == [setup.notes.as_uri()]


def test_key_rotation_at_the_provider_is_followed(setup: Setup) -> None:
    old = setup.token("ada")
    assert _post(setup, old).status_code == 200
    setup.provider.rotate()
    # A token with an unknown kid fetches the JWKS again, at most once per JWKS_MIN_REFETCH_S.
    time.sleep(JWKS_MIN_REFETCH_S + 0.5)
    before = setup.provider.jwks_fetches()
    new = setup.token("ada")
    assert _post(setup, new).status_code == 200
    assert setup.provider.jwks_fetches() == before + 1
    # The rotated-out key is gone from the cache with the refetch.
    assert _post(setup, old).status_code == 401
    # Made-up key ids right after do not make the server fetch again.
    for i in range(5):
        assert _post(setup, setup.token("ada", kid=f"made-up-{i}")).status_code == 401
    assert setup.provider.jwks_fetches() == before + 1


def test_a_session_is_bound_to_the_scopes_of_the_token_that_opened_it(setup: Setup) -> None:
    reader = Raw(setup.server, setup.token("ada", "notes:read"))
    writer = Raw(setup.server, setup.token("ada", ALL))
    try:
        sid = initialize(reader)
        listed = legacy(reader, sid, call("workspaces_list", {}))
        assert listed.status_code == 200
        # Same subject, other scopes: not this token's session (as another principal's is).
        assert legacy(writer, sid, call("workspaces_list", {})).status_code == 404
        made = legacy(reader, sid, call("notes_create", {
            "workspaceUri": setup.notes.as_uri(), "path": "s.md", "content": "# s\n"}))  # fmt: skip
        assert made.json()["result"]["isError"] is True and not (setup.notes / "s.md").exists()
    finally:
        reader.close()
        writer.close()


def test_oauth_alone_starts_and_a_static_token_added_while_serving_counts(
    tmp_path: Path, provider: Provider
) -> None:
    notes, state = tmp_path / "notes", tmp_path / "state"
    notes.mkdir()
    config = tmp_path / "fsnotes.toml"
    audience = "http://127.0.0.1:9/mcp"
    config.write_text(f'[http.oauth]\nissuer = "{provider.issuer}"\naudience = "{audience}"\n')
    argv = ["-m", "fsnotes", "serve", "--config", str(config), "--workspace", str(notes),
            "--principal", "ada", "--state-dir", str(state), "--http", "127.0.0.1:0"]  # fmt: skip
    with HttpServer([sys.executable, *argv]) as server:
        client = Raw(server, provider.token("ada", ALL, audience))
        try:
            assert client.post(client.request("tools/list")).status_code == 200
            client.token = add_token(state, "ada")
            assert client.post(client.request("tools/list")).status_code == 200
        finally:
            client.close()
