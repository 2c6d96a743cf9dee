"""Mcp-Param-{Name} headers over real HTTP: a tool whose parameters carry x-mcp-header (the
conformance fixture's test_mirrored_headers, served by the product's transport in its own
process) is called only when the headers match the arguments; otherwise 400 with -32020."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from fsnotes.security.tokens import new_token
from tests.servers.conformance_server import TOKEN_ENV
from transport.http_support import HttpServer, Raw

TOOL = "test_mirrored_headers"


@pytest.fixture(scope="module")
def fixture_token() -> str:
    return new_token()


@pytest.fixture(scope="module")
def fixture_server(fixture_token: str) -> Iterator[HttpServer]:
    argv = [sys.executable, "-m", "tests.servers.conformance_server", "--port", "0"]
    with HttpServer(argv, {TOKEN_ENV: fixture_token}) as server:
        yield server


@pytest.fixture
def client(fixture_server: HttpServer, fixture_token: str) -> Iterator[Raw]:
    raw = Raw(fixture_server, fixture_token)
    yield raw
    raw.close()


def call(client: Raw, arguments: dict[str, Any], **params: str | None) -> Any:
    body = client.request("tools/call", {"name": TOOL, "arguments": arguments})
    headers = {f"mcp-param-{k.lower()}": v for k, v in params.items()}
    return client.post(body, headers)  # type: ignore[arg-type]


def test_the_tool_lists_its_mirrored_parameters(client: Raw) -> None:
    tools = client.call("tools/list")["result"]["tools"]
    [schema] = [t["inputSchema"] for t in tools if t["name"] == TOOL]
    assert schema["properties"]["region"]["x-mcp-header"] == "Region"
    assert "x-mcp-header" not in schema["properties"]["query"]


@pytest.mark.parametrize(
    ("region", "sent"),
    [
        ("us-west1", "us-west1"),
        ("Hello", "=?base64?SGVsbG8=?="),
        ("SGVsbG8=", "SGVsbG8="),  # no sentinel: a literal
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),  # no closing marker: a literal
    ],
)
def test_headers_matching_the_arguments_run_the_call(client: Raw, region: str, sent: str) -> None:
    response = call(
        client, {"region": region, "priority": 2, "query": "q"}, Region=sent, Priority="2"
    )
    assert response.status_code == 200, response.text
    text = response.json()["result"]["content"][0]["text"]
    assert text == f"region={region} priority=2 query=q"


@pytest.mark.parametrize(
    ("case", "headers"),
    [
        ("header missing", {"Region": None}),
        ("Base64 without its padding", {"Region": "=?base64?SGVsbG8?="}),
        ("Base64 with foreign characters", {"Region": "=?base64?SGVs!!!bG8=?="}),
        ("another value", {"Region": "Hellp"}),
        ("integer differs", {"Priority": "3"}),
        ("header for a value the body lacks", {"Verbose": "true"}),
    ],
)
def test_headers_missing_malformed_or_different_are_400_with_32020(
    client: Raw, case: str, headers: dict[str, str | None]
) -> None:
    sent = {"Region": "=?base64?SGVsbG8=?=", "Priority": "2", **headers}
    response = call(client, {"region": "Hello", "priority": 2, "query": "q"}, **sent)
    assert response.status_code == 400, case
    assert response.json()["error"]["code"] == -32020, response.text


def test_a_tool_without_mirrored_parameters_ignores_param_headers(client: Raw) -> None:
    body = client.request("tools/call", {"name": "test_simple_text", "arguments": {}})
    response = client.post(body, {"mcp-param-region": "anything"})
    assert response.status_code == 200 and "result" in response.json()
