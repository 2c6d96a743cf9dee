"""The HTTP transport's pure rules (fsnotes/transport/http_wire.py, http_settings.py): header
decoding, Accept, mirrored-header checks (standard and Mcp-Param-*), listen addresses and the
Host/Origin allowlists."""

from __future__ import annotations

import base64

import pytest

from fsnotes.protocol.tool_schema import ParamHeader
from fsnotes.transport import http_wire as hw
from fsnotes.transport.http_settings import HttpSettings, SettingsError, parse_listen


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


@pytest.mark.parametrize(
    ("sent", "decoded"),
    [
        ("notes_read", "notes_read"),
        ("  notes_read\t", "notes_read"),
        (b64("file:///home/ada/café.md"), "file:///home/ada/café.md"),
        (b64("=?base64?literal?="), "=?base64?literal?="),  # the spec's own example
        (b64(" padded "), " padded "),
        ("=?base64?not base64?=", None),
        ("=?base64?SGVsbG8?=", None),  # missing padding: strict Base64 refuses it
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),  # markers are case-sensitive: literal
        ("caf\xe9", None),  # a Latin-1 byte: not visible ASCII, must have been encoded
        ("a\x00b", None),
        ("=?base64?/w==?=", None),  # decodes to a byte that is not UTF-8
    ],
)
def test_header_values_are_trimmed_and_base64_decoded_strictly(
    sent: str, decoded: str | None
) -> None:
    assert hw.decode_header_value(sent) == decoded


@pytest.mark.parametrize(
    ("accept", "result"),
    [
        ("application/json, text/event-stream", (True, True)),
        ("text/event-stream, application/json;q=0.9", (True, True)),
        ("*/*", (True, True)),
        ("application/*, text/*", (True, True)),
        ("application/json", (True, False)),
        ("APPLICATION/JSON, TEXT/EVENT-STREAM", (True, True)),
        ("application/json, text/event-stream; q=0", (True, False)),
        ("", (False, False)),
        (None, (False, False)),
    ],
)
def test_accept(accept: str | None, result: tuple[bool, bool]) -> None:
    assert hw.accepts(accept) == result


def _headers(**values: str) -> list[tuple[bytes, bytes]]:
    return [(k.replace("_", "-").encode(), v.encode("latin-1")) for k, v in values.items()]


def test_mirrored_headers_match_or_say_what_does_not() -> None:
    params = {"name": "notes_read", "arguments": {}}
    ok = _headers(mcp_protocol_version="2026-07-28", mcp_method="tools/call", mcp_name="notes_read")
    assert hw.check_mirrored_headers(ok, "tools/call", params, "2026-07-28") is None
    bad = hw.check_mirrored_headers(ok, "tools/call", {"name": "x"}, "2026-07-28")
    assert bad is not None and bad.code == -32020 and "Mcp-Name" in bad.message
    # A method that mirrors no name needs no Mcp-Name.
    listing = _headers(mcp_protocol_version="2026-07-28", mcp_method="tools/list")
    assert hw.check_mirrored_headers(listing, "tools/list", {}, "2026-07-28") is None
    # A name-bearing method without the value in its body expects no header either.
    none = _headers(mcp_protocol_version="2026-07-28", mcp_method="tools/call")
    assert hw.check_mirrored_headers(none, "tools/call", {}, "2026-07-28") is None
    twice = [*ok, (b"mcp-name", b"notes_read")]
    repeated = hw.check_mirrored_headers(twice, "tools/call", params, "2026-07-28")
    assert repeated is not None and "more than once" in repeated.message


def test_modern_statuses() -> None:
    def status(code: int) -> int:
        return hw.modern_status({"error": {"code": code, "message": "m"}})

    assert [status(c) for c in (-32700, -32600, -32602, -32020, -32021, -32022)] == [400] * 6
    assert status(-32601) == 404 and status(-32603) == 200
    assert hw.modern_status({"result": {}}) == 200


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("8080", ("127.0.0.1", 8080)), ("0.0.0.0:1", ("0.0.0.0", 1)), ("[::1]:0", ("::1", 0)),
     ("127.0.0.2:65535", ("127.0.0.2", 65535))],
)  # fmt: skip
def test_listen_addresses(text: str, parsed: tuple[str, int]) -> None:
    assert parse_listen(text) == parsed


@pytest.mark.parametrize("text", ["localhost:80", "80000", "1.2.3:4", "[::1]80", "x", ":80"])
def test_bad_listen_addresses_say_why(text: str) -> None:
    with pytest.raises(SettingsError):
        parse_listen(text)


def test_allowlists_for_a_loopback_bind_and_a_specific_exposed_one() -> None:
    loop = HttpSettings(port=0)
    assert loop.allowed_hosts(8123) == {"127.0.0.1:8123", "localhost:8123", "[::1]:8123"}
    assert "http://localhost:8123" in loop.allowed_origins(8123)
    assert "null" not in loop.allowed_origins(8123)
    exposed = HttpSettings(host="10.1.2.3", port=80, expose=True, extra_hosts=("notes.example",))
    hosts = exposed.allowed_hosts(80)
    assert {"10.1.2.3:80", "10.1.2.3", "notes.example:80", "localhost"} <= hosts
    with pytest.raises(SettingsError):
        HttpSettings(host="10.1.2.3", port=80).check()
    HttpSettings(host="127.0.0.5", port=80).check()  # all of 127/8 is loopback


# --- Mcp-Param-{Name} headers (x-mcp-header) ---------------------------------------------

MIRRORED = (
    ParamHeader("Region", ("region",), "string"),
    ParamHeader("Priority", ("priority",), "integer"),
    ParamHeader("Dry", ("opts", "dry"), "boolean"),
)


def param_headers(**sent: str) -> list[tuple[bytes, bytes]]:
    return [(f"mcp-param-{k.lower()}".encode(), v.encode("latin-1")) for k, v in sent.items()]


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ({"region": "us-west1", "priority": 3}, {"Region": "us-west1", "Priority": "3"}),
        ({"region": "Hello", "priority": 1}, {"Region": b64("Hello"), "Priority": " 1 "}),
        ({"region": "SGVsbG8=", "priority": 0}, {"Region": "SGVsbG8=", "Priority": "0"}),
        (
            {"region": "=?base64?SGVsbG8=", "priority": 0},
            {"Region": "=?base64?SGVsbG8=", "Priority": "0"},
        ),
        (
            {"region": "Hello, 世界", "priority": 42},
            {"Region": b64("Hello, 世界"), "Priority": "42.0"},
        ),
        (
            {"region": "r", "priority": 1, "opts": {"dry": True}},
            {"Region": "r", "Priority": "1", "Dry": "true"},
        ),
        ({"region": "r", "priority": 1, "opts": {"dry": None}}, {"Region": "r", "Priority": "1"}),
        ({"priority": 1, "other": "x"}, {"Priority": "1", "Unrelated": "x"}),
    ],
)
def test_param_headers_matching_the_arguments_pass(
    arguments: dict[str, object], sent: dict[str, str]
) -> None:
    assert hw.check_param_headers(param_headers(**sent), MIRRORED, arguments) is None


@pytest.mark.parametrize(
    ("arguments", "sent", "why"),
    [
        ({"region": "Hello"}, {}, "Mcp-Param-Region header is missing"),
        ({"region": "Hello"}, {"Region": "=?base64?SGVsbG8?="}, "not plain visible ASCII"),
        ({"region": "Hello"}, {"Region": "=?base64?SGVs!!!bG8=?="}, "not plain visible ASCII"),
        ({"region": "Hello"}, {"Region": "hello"}, "does not match"),
        ({"region": "Hello"}, {"Region": "caf\xe9"}, "not plain visible ASCII"),
        ({"region": " padded "}, {"Region": " padded "}, "does not match"),  # must be Base64
        ({"priority": 42}, {"Priority": "43"}, "does not match"),
        ({"priority": 42}, {"Priority": "forty-two"}, "does not match"),
        ({"priority": 42}, {"Priority": "NaN"}, "does not match"),
        ({"opts": {"dry": False}}, {"Dry": "False"}, "does not match"),
        ({"region": 7}, {"Region": "7"}, "does not match"),  # the body's type is wrong
        ({}, {"Region": "us-west1"}, "arguments hold no value"),
        ({"region": None}, {"Region": "us-west1"}, "arguments hold no value"),
    ],
)
def test_param_headers_missing_malformed_or_different_are_a_mismatch(
    arguments: dict[str, object], sent: dict[str, str], why: str
) -> None:
    fault = hw.check_param_headers(param_headers(**sent), MIRRORED, arguments)
    assert fault is not None and fault.code == hw.HEADER_MISMATCH
    assert why in fault.message


def test_a_repeated_param_header_is_a_mismatch() -> None:
    sent = param_headers(Region="a") + param_headers(Region="a")
    fault = hw.check_param_headers(sent, MIRRORED, {"region": "a"})
    assert fault is not None and "more than once" in fault.message
