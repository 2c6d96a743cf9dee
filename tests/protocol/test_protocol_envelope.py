"""Message-level rules of the core: parse errors, invalid requests, eras, versions, discover."""

from __future__ import annotations

from typing import Any

from fsnotes.protocol.limits import MAX_BATCH_MEMBERS
from fsnotes.protocol.wire import META_SERVER_INFO
from fsnotes.runtime.connection import Job, ServerConnection, Write
from tests.protocol.protocol_harness import MODERN, meta, request, sends
from tests.servers.demo_server import build_app

SERVER_INFO = {"name": "fsnotes-demo", "version": "0.0.1", "title": "fsnotes demo (tests only)"}


def conn() -> ServerConnection:
    return ServerConnection(build_app(), principal="unit")


def one(actions: list[Any]) -> dict[str, Any]:
    out = sends(actions)
    assert len(out) == 1, out
    return out[0]


def initialized(
    version: str = "2025-11-25", caps: dict[str, Any] | None = None
) -> ServerConnection:
    c = conn()
    params = {
        "protocolVersion": version,
        "capabilities": caps or {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    one(c.receive_message(request(0, "initialize", params)))
    return c


def test_invalid_json_gets_parse_error_without_id() -> None:
    for line in (b"garbage", b'{"jsonrpc":"2.0","id":1', b'{"a": NaN}', b"[" * 60_000):
        assert one(conn().receive_line(line)) == {
            "jsonrpc": "2.0",
            "error": {"code": -32700, "message": "Parse error: the line is not valid JSON"},
        }


def test_invalid_utf8_gets_parse_error_without_id() -> None:
    msg = one(conn().receive_line(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff\xfe"}'))
    assert msg["error"]["code"] == -32700 and "id" not in msg


def test_batch_array_is_invalid_request_without_id() -> None:
    msg = one(conn().receive_message([request(1, "ping"), request(2, "ping")]))
    assert msg["error"]["code"] == -32600 and "id" not in msg
    assert "Batches" in msg["error"]["message"]


def test_non_object_missing_jsonrpc_missing_method_and_bad_ids_are_invalid_requests() -> None:
    c = conn()
    assert one(c.receive_message(42))["error"]["code"] == -32600
    no_jsonrpc = one(c.receive_message({"id": 7, "method": "ping"}))
    assert no_jsonrpc["id"] == 7 and no_jsonrpc["error"]["code"] == -32600
    no_method = one(c.receive_message({"jsonrpc": "2.0", "id": 8}))
    assert no_method["id"] == 8 and no_method["error"]["code"] == -32600
    for bad_id in (None, True, 1.5, [1], {"a": 1}):
        msg = one(c.receive_message({"jsonrpc": "2.0", "id": bad_id, "method": "ping"}))
        assert msg["error"]["code"] == -32600 and "id" not in msg, bad_id
    method_not_string = one(c.receive_message({"jsonrpc": "2.0", "id": 9, "method": 5}))
    assert method_not_string["error"]["code"] == -32600 and method_not_string["id"] == 9


def test_notifications_are_never_answered() -> None:
    c = conn()
    for note in (
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
        {"jsonrpc": "2.0", "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "junk"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"method": "initialize"},
        {"jsonrpc": "2.0", "method": 12},
    ):
        assert c.receive_message(note) == [], note


def test_response_to_a_request_never_sent_is_ignored() -> None:
    c = conn()
    assert c.receive_message({"jsonrpc": "2.0", "id": 1, "result": {}}) == []
    assert (
        c.receive_message({"jsonrpc": "2.0", "id": "x", "error": {"code": 1, "message": "m"}}) == []
    )
    assert c.receive_message({"jsonrpc": "2.0", "id": 5, "result": {}}) == []
    assert c.runner.pending == 0


def test_request_without_meta_before_initialize_is_invalid_params() -> None:
    msg = one(conn().receive_message(request(1, "tools/list")))
    assert msg["id"] == 1 and msg["error"]["code"] == -32602
    assert "protocolVersion" in msg["error"]["message"] and "initialize" in msg["error"]["message"]


def test_modern_missing_or_mistyped_meta_fields_are_invalid_params() -> None:
    c = conn()
    pv = "io.modelcontextprotocol/protocolVersion"
    caps = "io.modelcontextprotocol/clientCapabilities"
    cases = [
        {"_meta": {pv: 20260728, caps: {}}},
        {"_meta": {pv: MODERN}},
        {"_meta": {pv: MODERN, caps: []}},
        {"_meta": {pv: MODERN, caps: "all"}},
        {"_meta": {caps: {}}},
        {"_meta": "x"},
    ]
    for i, params in enumerate(cases):
        msg = one(c.receive_message(request(i, "server/discover", params)))
        assert msg["id"] == i and msg["error"]["code"] == -32602, params
    assert one(c.receive_message(request(99, "server/discover")))["error"]["code"] == -32602


def test_unknown_modern_version_gets_32022_with_supported_and_requested() -> None:
    params = {"_meta": {**meta(), "io.modelcontextprotocol/protocolVersion": "1900-01-01"}}
    msg = one(conn().receive_message(request("d1", "tools/list", params)))
    assert msg == {
        "jsonrpc": "2.0",
        "id": "d1",
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "1900-01-01"},
        },
    }


def test_legacy_version_in_modern_meta_gets_32022() -> None:
    params = {"_meta": {**meta(), "io.modelcontextprotocol/protocolVersion": "2025-11-25"}}
    msg = one(conn().receive_message(request(1, "tools/list", params)))
    assert msg["error"]["code"] == -32022 and msg["error"]["data"]["requested"] == "2025-11-25"


def test_server_discover_exact_shape() -> None:
    msg = one(conn().receive_message(request("d1", "server/discover", {"_meta": meta()})))
    assert msg == {
        "jsonrpc": "2.0",
        "id": "d1",
        "result": {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "logging": {}, "resources": {}, "completions": {}},
            "ttlMs": 300000,
            "cacheScope": "public",
            "instructions": "Test server for the fsnotes protocol core.",
            "_meta": {META_SERVER_INFO: SERVER_INFO},
        },
    }


def test_modern_unknown_removed_and_unadvertised_methods_are_method_not_found() -> None:
    c = conn()
    for i, method in enumerate(
        [
            "nope",
            "ping",
            "logging/setLevel",
            "prompts/list",
            "prompts/get",
            "resources/subscribe",
            "subscriptions/listen",
        ]
    ):
        msg = one(c.receive_message(request(i, method, {"_meta": meta(), "level": "info"})))
        assert msg["error"]["code"] == -32601, method


def test_modern_invalid_log_level_is_invalid_params() -> None:
    params = {"_meta": meta(**{"io.modelcontextprotocol/logLevel": "loud"})}
    assert one(conn().receive_message(request(1, "tools/list", params)))["error"]["code"] == -32602


def test_modern_tools_list_has_result_type_server_info_and_cache_fields() -> None:
    msg = one(conn().receive_message(request(1, "tools/list", {"_meta": meta()})))
    result = msg["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"] == {META_SERVER_INFO: SERVER_INFO}
    assert result["ttlMs"] == 300000 and result["cacheScope"] == "public"
    assert [t["name"] for t in result["tools"]][:2] == ["echo", "add"]


def test_initialize_echoes_supported_version_and_answers_newest_otherwise() -> None:
    for requested, answered in [
        ("2025-06-18", "2025-06-18"),
        ("2024-11-05", "2024-11-05"),
        ("2099-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ]:
        c = conn()
        params = {
            "protocolVersion": requested,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        result = one(c.receive_message(request(1, "initialize", params)))["result"]
        assert result["protocolVersion"] == answered
        assert result["serverInfo"] == SERVER_INFO
        assert result["capabilities"]["tools"] == {"listChanged": False}
        assert "resultType" not in result
        assert c.legacy_version == answered


def test_initialize_without_version_is_invalid_params() -> None:
    assert one(conn().receive_message(request(1, "initialize", {})))["error"]["code"] == -32602


def test_legacy_results_carry_no_modern_fields_and_modern_still_works_after_initialize() -> None:
    c = initialized()
    legacy = one(c.receive_message(request(1, "tools/list")))["result"]
    assert "resultType" not in legacy and "_meta" not in legacy and "ttlMs" not in legacy
    modern = one(c.receive_message(request(2, "tools/list", {"_meta": meta()})))["result"]
    assert modern["resultType"] == "complete"


def test_ping_is_answered_in_legacy_even_before_initialize() -> None:
    assert one(conn().receive_message(request("p", "ping"))) == {
        "jsonrpc": "2.0",
        "id": "p",
        "result": {},
    }


def test_logging_set_level_validates_the_level() -> None:
    c = initialized()
    assert one(c.receive_message(request(1, "logging/setLevel", {"level": "info"}))) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {},
    }
    assert (
        one(c.receive_message(request(2, "logging/setLevel", {"level": "shout"})))["error"]["code"]
        == -32602
    )


def test_tools_list_pages_with_an_opaque_validated_cursor() -> None:
    c = ServerConnection(build_app(), tools_page_size=3, principal="unit")
    names: list[str] = []
    cursor = None
    for i in range(10):
        params: dict[str, Any] = {"_meta": meta()}
        if cursor is not None:
            params["cursor"] = cursor
        result = one(c.receive_message(request(i, "tools/list", params)))["result"]
        names += [t["name"] for t in result["tools"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert names == [t.name for t in build_app().tools]
    for bad in ("nope", "eyJ4IjoxfQ", 5, "W1wsICJ4Il0"):
        msg = one(c.receive_message(request("c", "tools/list", {"_meta": meta(), "cursor": bad})))
        assert msg["error"]["code"] == -32602, bad
    # A cursor minted for another tool list (different fingerprint) is rejected too.
    other = ServerConnection(build_app(), tools_page_size=3, principal="unit")
    other.dispatcher.tools.fingerprint = "000000000000"
    forged = other.dispatcher.tools.encode_cursor(3)
    assert (
        one(c.receive_message(request("f", "tools/list", {"_meta": meta(), "cursor": forged})))[
            "error"
        ]["code"]
        == -32602
    )


def test_tool_descriptors_map_annotations_and_schemas() -> None:
    tools = one(conn().receive_message(request(1, "tools/list", {"_meta": meta()})))["result"][
        "tools"
    ]
    by_name = {t["name"]: t for t in tools}
    assert by_name["whoami"]["inputSchema"] == {"type": "object", "additionalProperties": False}
    assert by_name["echo"]["outputSchema"]["type"] == "object"
    assert by_name["confirm"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    }


def test_duplicate_in_flight_id_is_rejected() -> None:
    c = initialized()
    first = c.receive_message(request(1, "tools/call", {"name": "slow"}))
    assert isinstance(first[0], Job)
    dup = one(c.receive_message(request(1, "tools/call", {"name": "slow"})))
    assert dup["error"]["code"] == -32600 and dup["id"] == 1


def test_too_many_requests_in_flight_get_a_busy_error() -> None:
    c = ServerConnection(build_app(), max_in_flight=2, principal="unit")
    for i in range(2):
        assert isinstance(
            c.receive_message(request(i, "tools/call", {"_meta": meta(), "name": "slow"}))[0],
            Job,
        )
    busy = one(c.receive_message(request(2, "tools/call", {"_meta": meta(), "name": "slow"})))
    assert (
        busy["id"] == 2 and busy["error"]["code"] == -32603 and "busy" in busy["error"]["message"]
    )
    assert c.in_flight == 2


def test_oversized_line_error_has_no_id() -> None:
    msg = one(conn().line_too_long(1024))
    assert "id" not in msg and msg["error"]["code"] == -32600 and "1024" in msg["error"]["message"]


def test_send_actions_only_for_sync_methods() -> None:
    c = initialized()
    assert all(isinstance(a, Write) for a in c.receive_message(request(1, "tools/list")))


def test_response_without_id_is_never_answered() -> None:
    # JSONRPCErrorResponse has an optional id (omitted when the peer could not read ours); a
    # response is never answered, or two peers could bounce errors at each other forever.
    c = initialized()
    error = {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
    assert c.receive_message(error) == []
    assert c.receive_message({"jsonrpc": "2.0", "result": {}}) == []


def test_2025_03_26_batches_are_received_member_by_member() -> None:
    # 2025-03-26 basic/index: implementations MUST support receiving JSON-RPC batches (removed
    # in 2025-06-18). Once that version is negotiated, each member is handled on its own.
    c = initialized("2025-03-26")
    out = sends(
        c.receive_message(
            [
                request(1, "tools/list"),
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                request(2, "ping"),
                [request(3, "ping")],
            ]
        )
    )
    assert [m.get("id") for m in out] == [1, 2, None]
    assert "tools" in out[0]["result"] and out[1]["result"] == {}
    assert out[2]["error"]["code"] == -32600
    assert one(c.receive_message([]))["error"]["code"] == -32600
    # Other versions have no batching.
    assert (
        one(initialized("2025-06-18").receive_message([request(1, "ping")]))["error"]["code"]
        == -32600
    )


def test_a_2025_03_26_batch_over_the_member_cap_gets_one_error_and_runs_nothing() -> None:
    c = initialized("2025-03-26")
    at_cap = sends(c.receive_message([request(i, "ping") for i in range(MAX_BATCH_MEMBERS)]))
    assert [m["id"] for m in at_cap] == list(range(MAX_BATCH_MEMBERS))
    over = c.receive_message(
        [request(i, "tools/call", {"name": "slow"}) for i in range(MAX_BATCH_MEMBERS + 1)]
    )
    msg = one(over)
    assert len(over) == 1 and "id" not in msg and msg["error"]["code"] == -32600
    assert str(MAX_BATCH_MEMBERS) in msg["error"]["message"]
    assert c.in_flight == 0
    # A batch of scalars (each would be answered "not a JSON object") is refused the same way.
    assert one(c.receive_line(b"[" + b"1," * MAX_BATCH_MEMBERS + b"1]"))["error"]["code"] == -32600


def test_a_second_initialize_is_refused_and_keeps_the_negotiated_session() -> None:
    # 2025-11-25 lifecycle: "The initialization phase MUST be the first interaction between
    # client and server"; a second initialize is an invalid request in this state.
    c = initialized("2025-11-25")
    params = {"protocolVersion": "2025-03-26", "capabilities": {"roots": {}}}
    again = one(c.receive_message(request(1, "initialize", params)))
    assert again["id"] == 1 and again["error"]["code"] == -32600
    assert "already initialized" in again["error"]["message"]
    assert c.legacy_version == "2025-11-25"
    # So no client can switch this process into 2025-03-26 batch handling mid-session.
    assert "Batches" in one(c.receive_message([request(2, "ping")]))["error"]["message"]


def test_a_failed_initialize_can_be_retried() -> None:
    c = conn()
    assert one(c.receive_message(request(1, "initialize", {})))["error"]["code"] == -32602
    params = {"protocolVersion": "2025-11-25", "capabilities": {}}
    assert one(c.receive_message(request(2, "initialize", params)))["result"]
    assert c.legacy_version == "2025-11-25"


def test_every_version_32022_and_discover_list_is_accepted_when_a_client_retries_with_it() -> None:
    c = conn()
    pv = "io.modelcontextprotocol/protocolVersion"
    refused = one(
        c.receive_message(request(1, "tools/list", {"_meta": {**meta(), pv: "1900-01-01"}}))
    )
    supported = refused["error"]["data"]["supported"]
    discover = one(c.receive_message(request(2, "server/discover", {"_meta": meta()})))
    assert discover["result"]["supportedVersions"] == supported
    assert supported
    for version in supported:
        retry = one(c.receive_message(request(3, "tools/list", {"_meta": {**meta(), pv: version}})))
        assert "result" in retry, (version, retry)
