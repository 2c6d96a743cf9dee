"""The dispatcher on its own: a request in, its era chosen from the tag read when it was
classified, routed to an answer at once or to a call that runs over any channel; no process,
no transport, no session unless one is given."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from fsnotes.protocol import inbound
from fsnotes.protocol.calls import Call
from fsnotes.protocol.dispatch import Dispatcher, Reply
from fsnotes.protocol.inbound import Request
from fsnotes.protocol.registry import JSONObject
from tests.protocol.protocol_harness import MODERN, meta, request
from tests.servers.demo_server import build_app

pytestmark = pytest.mark.anyio


def initialize(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return request(
        0,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": caps or {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )


class RecordingChannel:
    """A channel that only records: what a stateless transport offers (it never asks)."""

    def __init__(self) -> None:
        self.sent: list[JSONObject] = []

    @property
    def closed(self) -> bool:
        return False

    async def send(self, message: JSONObject) -> None:
        self.sent.append(message)

    async def ask(
        self, method: str, params: JSONObject | None, timeout: float
    ) -> JSONObject | None:
        raise AssertionError(f"a stateless request asked the client live ({method})")


async def test_the_dispatcher_serves_a_modern_request_with_no_session() -> None:
    dispatcher = Dispatcher(build_app())
    params = {
        "name": "slow",
        "arguments": {"steps": 2, "delay": 0},
        "_meta": meta(None, progressToken="p", **{"io.modelcontextprotocol/logLevel": "info"}),
    }
    routed = dispatcher.route(Request(7, "tools/call", params), session=None, principal="carol")
    assert isinstance(routed, Call) and routed.session is None and routed.principal == "carol"
    channel = RecordingChannel()
    with anyio.fail_after(5):
        response = await dispatcher.respond(routed, channel)
    assert response["id"] == 7 and response["result"]["content"][0]["text"] == "done 2"
    assert response["result"]["resultType"] == "complete"
    assert [m["method"] for m in channel.sent] == [
        "notifications/progress",
        "notifications/message",
    ] * 2

    who = dispatcher.route(
        Request(8, "tools/call", {"name": "whoami", "_meta": meta()}),
        session=None,
        principal="carol",
    )
    assert isinstance(who, Call)
    body = (await dispatcher.respond(who, RecordingChannel()))["result"]["structuredContent"]
    assert (body["era"], body["principal"], body["hinted"]) == ("modern", "carol", False)
    assert body["asksLive"] is False

    # Answered at once, no call and no session: tools/list and server/discover.
    listed = dispatcher.route(
        Request(9, "tools/list", {"_meta": meta()}), session=None, principal="carol"
    )
    assert isinstance(listed, Reply) and listed.opened is None
    assert listed.message["result"]["tools"][0]["name"] == "echo"
    discover = dispatcher.route(
        Request(10, "server/discover", {"_meta": meta()}), session=None, principal="carol"
    )
    assert isinstance(discover, Reply) and MODERN in discover.message["result"]["supportedVersions"]


async def test_without_a_session_a_legacy_request_is_refused_and_initialize_opens_one() -> None:
    dispatcher = Dispatcher(build_app())
    refused = dispatcher.route(
        Request(1, "tools/call", {"name": "whoami"}), session=None, principal="d"
    )
    assert isinstance(refused, Reply) and refused.message["error"]["code"] == -32602
    opened = dispatcher.route(
        Request(2, "initialize", initialize()["params"]), session=None, principal="d"
    )
    assert isinstance(opened, Reply) and opened.opened is not None
    assert opened.opened.version == "2025-11-25"
    served = dispatcher.route(
        Request(3, "tools/call", {"name": "whoami"}), session=opened.opened, principal="d"
    )
    assert isinstance(served, Call) and served.session is opened.opened
    body = (await dispatcher.respond(served, RecordingChannel()))["result"]["structuredContent"]
    assert (body["era"], body["principal"], body["hinted"]) == ("legacy", "d", True)
    assert body["asksLive"] is True


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel"])
def test_a_method_2026_removed_is_method_not_found_when_the_request_is_modern(method: str) -> None:
    # D26 versioning.mdx: "A request carrying modern per-request _meta is served statelessly
    # according to this revision", and the revision removed initialize, ping and
    # logging/setLevel (D26 changelog 2, 5). So a modern-tagged initialize opens no session.
    dispatcher = Dispatcher(build_app())
    params = {**initialize()["params"], "level": "info", "_meta": meta()}
    answer = dispatcher.route(Request(5, method, params), session=None, principal="d")
    assert isinstance(answer, Reply) and answer.opened is None
    assert answer.message["id"] == 5 and answer.message["error"]["code"] == -32601


def test_the_era_tag_is_read_once_when_a_request_is_classified_and_routed_by() -> None:
    params: dict[str, Any] = {"_meta": meta()}
    tagged = inbound.classify(request(1, "tools/list", params))
    assert isinstance(tagged, inbound.Request) and tagged.tag == inbound.EraTag(MODERN)
    # The dispatcher routes by the tag read at classify, not by reading _meta again.
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = "1999-01-01"
    routed = Dispatcher(build_app()).route(tagged, session=None, principal="unit")
    assert isinstance(routed, Reply) and "tools" in routed.message["result"]
    untagged = inbound.classify(request(2, "tools/list", {"_meta": {}}))
    assert isinstance(untagged, inbound.Request) and untagged.tag is None
    # A tag of JSON null is a tag (2026-07-28), and a wrong one.
    null = inbound.classify(
        request(3, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": None}})
    )
    assert isinstance(null, inbound.Request) and null.modern
    refused = Dispatcher(build_app()).route(null, session=None, principal="unit")
    assert isinstance(refused, Reply) and "must be a string" in refused.message["error"]["message"]
