"""A host's whole OAuth journey to `fsnotes serve --http`, as docs/http.md's "What the hosts need"
describes it: the official Python MCP SDK client (`mcp`, its OAuthClientProvider) against a
real OpenID provider (panva's oidc-provider, tests/transport/oidc_support.py).

The client's first request gets 401; it reads the protected resource metadata (RFC 9728) the
challenge names, discovers the provider from it, registers itself dynamically (RFC 7591), runs
the authorization code flow with PKCE and `resource` = fsnotes' audience (RFC 8707), and then
lists the tools and reads a note with the JWT access token it got. The person at the
provider's login and consent pages (oidc-provider's development interactions) is played by
httpx2 in the redirect handler. Nothing here knows a token or a client id in advance."""

from __future__ import annotations

import re
import socket
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.transport.http_support import HttpServer
from tests.transport.oidc_support import OidcProvider, claims_of, missing

mcp = pytest.importorskip("mcp", reason="the mcp SDK (dev dependency) is not installed")
import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.auth import OAuthClientProvider  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.auth import (  # noqa: E402
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]
if (reason := missing()) is not None:
    pytest.skip(f"host OAuth flow against a real provider skipped: {reason}",
                allow_module_level=True)  # fmt: skip

ALL = "notes:read notes:write notes:delete"
# Where the host says the provider sends the person back; nothing listens there: the redirect
# handler stops at the provider's redirect and hands its query to the callback handler.
REDIRECT_URI = "http://127.0.0.1:1/callback"
# A login and a consent page, each a form post and a redirect or two; a loop means a bug.
MAX_HOPS = 12


class Memory:
    """The SDK's TokenStorage, in memory (a host keeps these in its own store)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Person:
    """Signs in as ``login`` at the provider's development pages and consents, following the
    provider's redirects with its cookies, until it redirects to REDIRECT_URI."""

    def __init__(self, login: str) -> None:
        self.login = login
        self.pages: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as browser:
            response = await browser.get(authorization_url)
            for _ in range(MAX_HOPS):
                if response.is_redirect:
                    target = urllib.parse.urljoin(str(response.url), response.headers["location"])
                    if target.startswith(REDIRECT_URI):
                        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(target).query))
                        self.result = AuthorizationCodeResult.model_validate(query)
                        return
                    response = await browser.get(target)
                    continue
                assert response.status_code == 200, response.text[:2000]
                page = response.text
                prompt = re.search(r'name="prompt" value="(\w+)"', page)
                assert prompt is not None, page[:2000]
                self.pages.append(prompt.group(1))
                form = {"prompt": prompt.group(1)}
                if prompt.group(1) == "login":
                    form.update(login=self.login, password="any")
                response = await browser.post(str(response.url), data=form)
        raise AssertionError(f"no redirect to the host after {MAX_HOPS} hops: {self.pages}")

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None, "the provider never sent the person back"
        return self.result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_an_sdk_host_registers_signs_in_and_reads_a_note(tmp_path: Path) -> None:
    port = _free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    notes, state = tmp_path / "notes", tmp_path / "state"
    notes.mkdir()
    (notes / "plan.md").write_text("# Plan\n\nThe plan.\n")
    provider = OidcProvider(tmp_path, {audience: ALL}, clients=[])
    try:
        config = tmp_path / "fsnotes.toml"
        config.write_text(
            f'state_dir = "{state}"\n'
            f'[[workspace]]\nname = "notes"\npath = "{notes}"\n'
            '[[grant]]\nprincipal = "ada"\nworkspace = "notes"\naccess = "write"\n'
            f'[http.oauth]\nissuer = "{provider.issuer}"\naudience = "{audience}"\n'
        )
        argv = ["-m", "fsnotes", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"]
        with HttpServer([sys.executable, *argv]):
            person, storage = Person("ada"), Memory()
            out = anyio.run(_host, audience, person, storage, notes)
    finally:
        provider.stop()
    # What the host saw: the challenge, our metadata, the provider's, its registration and
    # token endpoints, and then the same request again, answered.
    wire = out["wire"]
    assert wire[0] == ("POST", audience, 401)
    metadata = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
    assert wire[1] == ("GET", metadata, 200)
    issuer = provider.issuer
    assert wire[2] == ("GET", f"{issuer}/.well-known/oauth-authorization-server", 200)
    assert wire[3] == ("POST", f"{issuer}/reg", 201)
    assert wire[4] == ("POST", f"{issuer}/token", 200)
    assert wire[5] == ("POST", audience, 200)
    # The host did it all: registered with the provider, and the person signed in and agreed.
    assert provider.requests("POST", "/reg") == 1
    assert person.pages == ["login", "consent"]
    assert storage.client is not None and storage.tokens is not None
    token = claims_of(storage.tokens.access_token)
    assert token["sub"] == "ada" and token["aud"] == audience
    assert token["client_id"] == storage.client.client_id
    assert set(token["scope"].split()) == set(ALL.split())
    assert {"notes_read", "notes_create", "notes_delete"} <= set(out["tools"])
    assert out["title"] == "Plan"
    # The grant is the ceiling: write, whatever the token's scopes.
    assert out["delete_refused"] is True and (notes / "plan.md").exists()


async def _host(audience: str, person: Person, storage: Memory, notes: Path) -> dict[str, Any]:
    auth = OAuthClientProvider(
        server_url=audience,
        client_metadata=OAuthClientMetadata(
            client_name="fsnotes test host",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=person.redirect,
        callback_handler=person.callback,
    )
    out: dict[str, Any] = {"wire": []}

    async def seen(response: httpx2.Response) -> None:
        out["wire"].append((response.request.method, str(response.url), response.status_code))

    async with (
        httpx2.AsyncClient(auth=auth, timeout=30, event_hooks={"response": [seen]}) as http,
        Client(streamable_http_client(audience, http_client=http)) as client,
    ):
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        read = await client.call_tool("notes_read", {"uri": (notes / "plan.md").as_uri()})
        out["title"] = (read.structured_content or {}).get("title")
        deleted = await client.call_tool(
            "notes_delete", {"workspaceUri": notes.as_uri(), "title": "plan"}
        )
        out["delete_refused"] = deleted.is_error
    return out
