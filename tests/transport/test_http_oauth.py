"""OAuth access tokens on a real `fsnotes serve --http`, issued by a real OpenID provider on
loopback: panva's oidc-provider (tests/transport/oidc_support.py), with client_credentials and
RFC 8707 resource indicators issuing RFC 9068 JWT access tokens.

A real token acts with its subject's grants lowered to its scopes, and never with another
subject's; the server finds the provider's keys through its OpenID metadata and follows a key
rotation at the provider (restarted with new keys) without fetching on every unknown kid.
Tokens the provider will not issue (expired, not yet valid, wrong issuer, unknown kid,
`alg: none`, a forged signature, HS256 keyed with the public key) are crafted from a real one,
signed with the provider's own key where a valid signature is needed, so only the one claim
under test is wrong; a real token for another resource the provider serves is the wrong
audience. Each gets the same 401. The protected resource metadata (RFC 9728) is served and
named in the challenge; static tokens keep working beside OAuth."""

from __future__ import annotations

import base64
import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest

from fsnotes.security.oauth import JWKS_MIN_REFETCH_S
from transport.http_support import HttpServer, Raw, add_token
from transport.oidc_support import OidcProvider, SigningKey, claims_of, missing
from transport.test_http_sessions import call, initialize, legacy

pytestmark = pytest.mark.timeout(120)
if (reason := missing()) is not None:
    pytest.skip(f"OAuth tests against a real provider skipped: {reason}", allow_module_level=True)

ALL = "notes:read notes:write notes:delete"
UNAUTHORIZED = b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"Unauthorized"}}\n'
# The audience of test_oauth_alone_starts...: nothing listens there, only the token names it.
ALONE_AUDIENCE = "http://127.0.0.1:9/mcp"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Setup:
    def __init__(self, tmp: Path, provider: OidcProvider, port: int) -> None:
        self.notes, self.team, self.state = tmp / "notes", tmp / "team", tmp / "state"
        self.notes.mkdir()
        self.team.mkdir()
        (self.notes / "mine.md").write_text("# Mine\n")
        (self.team / "shared.md").write_text("# Shared\n")
        self.port = port
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

    def token(self, sub: str = "ada", scope: str = ALL, resource: str | None = None) -> str:
        return self.provider.token(sub, scope, resource or self.audience)

    def crafted(self, token: str, *, kid: str | None = None, **claims: Any) -> str:
        """A real token's claims with ``claims`` changed, signed with the provider's key."""
        return self.provider.key.sign({**claims_of(token), **claims}, kid=kid)


@pytest.fixture(scope="module")
def fsnotes_port() -> int:
    return _free_port()


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory, fsnotes_port: int) -> Iterator[OidcProvider]:
    audience = f"http://127.0.0.1:{fsnotes_port}/mcp"
    resources = {
        audience: ALL,
        ALONE_AUDIENCE: ALL,
        # Another resource server the provider serves, with the same scopes: its tokens differ
        # from fsnotes' only in aud.
        f"http://127.0.0.1:{fsnotes_port}/other": ALL,
    }
    p = OidcProvider(tmp_path_factory.mktemp("oidc"), resources, ["ada", "bob", "mallory"])
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory, provider: OidcProvider, fsnotes_port: int
) -> Iterator[Setup]:
    s = Setup(tmp_path_factory.mktemp("oauth"), provider, fsnotes_port)
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


def test_the_keys_are_found_through_the_issuers_metadata(setup: Setup) -> None:
    # No jwks_uri configured: at start-up the server read the provider's RFC 8414 metadata
    # (oidc-provider serves it beside OpenID discovery's) and the JWKS it names.
    p = setup.provider
    assert p.requests("GET", "/.well-known/oauth-authorization-server") >= 1
    assert p.metadata()["jwks_uri"] == f"{p.issuer}/jwks"
    assert p.requests("GET", "/jwks") >= 1


def test_a_valid_token_acts_with_its_subjects_grants(setup: Setup) -> None:
    token = setup.token("ada")
    assert claims_of(token)["sub"] == "ada"
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
    assert claims_of(reader)["scope"] == "notes:read"
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
    # The provider drops scopes the resource does not accept: this token has no scope at all.
    token = setup.token("ada", "openid profile")
    assert "scope" not in claims_of(token)
    response = _post(setup, token)
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope"')
    assert f'scope="{ALL}"' in challenge


def _forged(token: str) -> str:
    """The same header and claims, signed by a key that is not the provider's."""
    return SigningKey(kid=jwt.get_unverified_header(token)["kid"]).sign(claims_of(token))


def _hmac_with_public_key(token: str, provider: OidcProvider) -> str:
    """Algorithm confusion: HS256 keyed with the provider's public RSA modulus (anyone can
    fetch it from the JWKS), naming the provider's kid."""
    kid = jwt.get_unverified_header(token)["kid"]
    jwks = httpx2.get(provider.metadata()["jwks_uri"], timeout=10).json()
    secret = next(k for k in jwks["keys"] if k["kid"] == kid)["n"].encode()
    return jwt.encode(claims_of(token), secret, algorithm="HS256", headers={"kid": kid})


def _unsigned(token: str) -> str:
    head = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "at+jwt"}).encode())
    body = base64.urlsafe_b64encode(json.dumps(claims_of(token)).encode())
    return f"{head.decode().rstrip('=')}.{body.decode().rstrip('=')}."


def test_bad_tokens_each_get_the_same_401_revealing_nothing(setup: Setup) -> None:
    good = setup.token("ada")
    now = int(time.time())
    wrong_audience = setup.token("ada", resource=f"http://127.0.0.1:{setup.port}/other")
    assert claims_of(wrong_audience)["scope"] == ALL  # a real token; only aud differs
    bad = {
        # Past the 60 s leeway either way.
        "expired": setup.crafted(good, exp=now - 3600),
        "not yet valid": setup.crafted(good, nbf=now + 3600),
        "wrong audience": wrong_audience,
        "wrong issuer": setup.crafted(good, iss="http://127.0.0.1:1"),
        "unknown key id": setup.crafted(good, kid="not-a-key-of-the-provider"),
        "alg none": _unsigned(good),
        "forged signature": _forged(good),
        "HS256 with the public key": _hmac_with_public_key(good, setup.provider),
        "garbage": "a.b.c",
    }
    # The crafted ones are otherwise good: the same claims, re-signed, are accepted.
    assert _post(setup, setup.crafted(good)).status_code == 200
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
    p = setup.provider
    old_key = p.key
    old = setup.token("ada")
    assert _post(setup, old).status_code == 200
    # The provider publishes a new key first and keeps the old one: tokens of both verify.
    new_key = SigningKey()
    p.rotate([new_key, old_key])
    # A token with an unknown kid fetches the JWKS again, at most once per JWKS_MIN_REFETCH_S.
    time.sleep(JWKS_MIN_REFETCH_S + 0.5)
    before = p.requests("GET", "/jwks")
    new = setup.token("ada")
    assert jwt.get_unverified_header(new)["kid"] == new_key.kid
    assert _post(setup, new).status_code == 200
    assert _post(setup, old).status_code == 200
    assert p.requests("GET", "/jwks") == before + 1
    # Then it retires both for a third: their tokens stop working with the refetch its
    # first token makes.
    newest_key = SigningKey()
    p.rotate([newest_key])
    time.sleep(JWKS_MIN_REFETCH_S + 0.5)
    newest = setup.token("ada")
    assert jwt.get_unverified_header(newest)["kid"] == newest_key.kid
    assert _post(setup, newest).status_code == 200
    assert p.requests("GET", "/jwks") == before + 2
    assert _post(setup, old).status_code == 401
    assert _post(setup, new).status_code == 401
    # Made-up key ids right after (signed with the provider's key) make no fetch.
    for i in range(5):
        assert _post(setup, setup.crafted(newest, kid=f"made-up-{i}")).status_code == 401
    assert p.requests("GET", "/jwks") == before + 2


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
    tmp_path: Path, provider: OidcProvider
) -> None:
    notes, state = tmp_path / "notes", tmp_path / "state"
    notes.mkdir()
    config = tmp_path / "fsnotes.toml"
    config.write_text(
        f'[http.oauth]\nissuer = "{provider.issuer}"\naudience = "{ALONE_AUDIENCE}"\n'
    )
    argv = ["-m", "fsnotes", "serve", "--config", str(config), "--workspace", str(notes),
            "--principal", "ada", "--state-dir", str(state), "--http", "127.0.0.1:0"]  # fmt: skip
    with HttpServer([sys.executable, *argv]) as server:
        client = Raw(server, provider.token("ada", ALL, ALONE_AUDIENCE))
        try:
            assert client.post(client.request("tools/list")).status_code == 200
            client.token = add_token(state, "ada")
            assert client.post(client.request("tools/list")).status_code == 200
        finally:
            client.close()


def test_a_key_removed_at_the_issuer_stops_verifying_within_the_jwks_max_age(
    tmp_path: Path, provider: OidcProvider
) -> None:
    """No token with a new kid has to arrive: once the cached keys are older than
    ``[http.oauth] jwks_max_age``, the next token makes one fetch, and a key the issuer
    removed (a leaked signing key) no longer verifies anything."""
    max_age = JWKS_MIN_REFETCH_S + 1
    notes, state = tmp_path / "notes", tmp_path / "state"
    notes.mkdir()
    config = tmp_path / "fsnotes.toml"
    config.write_text(
        f'[http.oauth]\nissuer = "{provider.issuer}"\naudience = "{ALONE_AUDIENCE}"\n'
        f"jwks_max_age = {max_age}\n"
    )
    argv = ["-m", "fsnotes", "serve", "--config", str(config), "--workspace", str(notes),
            "--principal", "ada", "--state-dir", str(state), "--http", "127.0.0.1:0"]  # fmt: skip
    with HttpServer([sys.executable, *argv]) as server:
        leaked = provider.token("ada", ALL, ALONE_AUDIENCE)
        client = Raw(server, leaked)
        try:
            assert client.post(client.request("tools/list")).status_code == 200
            provider.rotate([SigningKey()])  # the leaked key is gone from the JWKS
            before = provider.requests("GET", "/jwks")
            # Still within the max age: the cached key verifies (no fetch per token).
            assert client.post(client.request("tools/list")).status_code == 200
            assert provider.requests("GET", "/jwks") == before
            time.sleep(max_age + 0.5)
            assert client.post(client.request("tools/list")).status_code == 401
            assert provider.requests("GET", "/jwks") == before + 1
            client.token = provider.token("ada", ALL, ALONE_AUDIENCE)  # the new key's
            assert client.post(client.request("tools/list")).status_code == 200
        finally:
            client.close()
