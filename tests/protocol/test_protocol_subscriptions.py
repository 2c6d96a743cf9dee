"""Resource subscriptions of the 2025-11-25 era (``resources/subscribe``, ``unsubscribe``,
``notifications/resources/updated``), offered only by an app that serves them, and absent from
2026-07-28, which removed both methods. Driven through the core with no I/O."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from fsnotes.protocol import RequestContext, ResourceNotFound, limits
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import Harness, meta, request, running
from tests.servers.demo_server import MemoryResources, build_app

pytestmark = pytest.mark.anyio

Notify = Callable[[], Awaitable[None]]


class Watched:
    """Subscriptions over the demo's notes: it keeps each subscriber's sender by URI."""

    def __init__(self) -> None:
        self.senders: dict[str, list[Notify]] = {}

    async def subscribe(self, ctx: RequestContext, uri: str, updated: Notify) -> None:
        if uri not in MemoryResources.NOTES:
            raise ResourceNotFound(uri)
        self.senders.setdefault(uri, []).append(updated)

    async def unsubscribe(self, ctx: RequestContext, uri: str, updated: Notify) -> None:
        self.senders[uri].remove(updated)


async def legacy(h: Harness) -> dict[str, Any]:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    result = (await h.call(request(0, "initialize", init)))["result"]
    h.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return dict(result["capabilities"])


async def test_legacy_subscribe_then_an_update_reaches_the_subscriber_until_it_unsubscribes() -> (
    None
):
    watched = Watched()
    app = replace(build_app(), subscriptions=watched)
    async with running(ServerConnection(app, principal="unit")) as h:
        caps = await legacy(h)
        assert caps["resources"] == {"subscribe": True, "listChanged": False}
        ok = await h.call(request(1, "resources/subscribe", {"uri": "note://a"}))
        assert ok["result"] == {}
        (updated,) = watched.senders["note://a"]
        await updated()
        assert h.out[-1] == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": "note://a"},
        }
        # Subscribing again keeps one subscription; unsubscribing hands back the same sender.
        await h.call(request(2, "resources/subscribe", {"uri": "note://a"}))
        assert watched.senders["note://a"] == [updated]
        assert (await h.call(request(3, "resources/unsubscribe", {"uri": "note://a"})))[
            "result"
        ] == {}
        assert watched.senders["note://a"] == []
        # Unsubscribing what is not subscribed is answered and asks the app nothing.
        assert (await h.call(request(4, "resources/unsubscribe", {"uri": "note://b"})))[
            "result"
        ] == {}


async def test_legacy_subscribe_to_an_unknown_or_malformed_uri_is_refused() -> None:
    app = replace(build_app(), subscriptions=Watched())
    async with running(ServerConnection(app, principal="unit")) as h:
        await legacy(h)
        missing = await h.call(request(1, "resources/subscribe", {"uri": "note://zzz"}))
        assert missing["error"]["code"] == -32002
        assert missing["error"]["data"] == {"uri": "note://zzz"}
        bad = await h.call(request(2, "resources/subscribe", {"uri": 7}))
        assert bad["error"]["code"] == -32602


async def test_subscriptions_per_session_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_SUBSCRIPTIONS_PER_SESSION", 5)  # the bound, made quick

    class Anything(Watched):
        async def subscribe(self, ctx: RequestContext, uri: str, updated: Notify) -> None:
            self.senders.setdefault(uri, []).append(updated)

    app = replace(build_app(), subscriptions=Anything())
    async with running(ServerConnection(app, principal="unit")) as h:
        await legacy(h)
        for i in range(limits.MAX_SUBSCRIPTIONS_PER_SESSION):
            answer = await h.call(request(i + 1, "resources/subscribe", {"uri": f"note://{i}"}))
            assert answer["result"] == {}
        over = await h.call(request("over", "resources/subscribe", {"uri": "note://more"}))
        assert over["error"]["code"] == -32602 and "unsubscribe" in over["error"]["message"]


async def test_without_subscriptions_the_methods_and_the_capability_are_absent() -> None:
    async with running(ServerConnection(build_app(), principal="unit")) as h:
        caps = await legacy(h)
        assert caps["resources"] == {"subscribe": False, "listChanged": False}
        refused = await h.call(request(1, "resources/subscribe", {"uri": "note://a"}))
        assert refused["error"]["code"] == -32601


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
async def test_modern_requests_find_no_subscribe_methods(method: str) -> None:
    # D26 changelog 4: resources/subscribe and resources/unsubscribe are replaced by
    # subscriptions/listen; 2026-07-28's resources.subscribe means resourceSubscriptions there.
    app = replace(build_app(), subscriptions=Watched())
    async with running(ServerConnection(app, principal="unit")) as h:
        answer = await h.call(request(1, method, {"uri": "note://a", "_meta": meta()}))
        assert answer["error"]["code"] == -32601
        discover = await h.call(request(2, "server/discover", {"_meta": meta()}))
        assert discover["result"]["capabilities"]["resources"] == {}
