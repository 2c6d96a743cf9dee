"""Prompts in the core: prompts/list and prompts/get in both eras, and completion/complete
routed by its ref (a prompt's argument to the prompts, a template's to the resources)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from fsnotes.protocol import InputRequired, InvalidParams, JSONObject, RequestContext
from fsnotes.runtime.connection import ServerConnection
from tests.protocol.protocol_harness import Harness, meta, request, running
from tests.servers.demo_server import build_app

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"


class Greetings:
    """One prompt, ``greet {who}``, with completion of ``who``; remembers who asked."""

    def __init__(self) -> None:
        self.principals: list[str] = []

    async def list_prompts(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        if cursor:
            raise InvalidParams("Invalid cursor")
        return [{"name": "greet", "arguments": [{"name": "who", "required": True}]}], None

    async def get_prompt(
        self, ctx: RequestContext, name: str, arguments: Mapping[str, str]
    ) -> JSONObject | InputRequired:
        self.principals.append(ctx.principal)
        if name != "greet" or "who" not in arguments:
            raise InvalidParams(f"Unknown prompt or missing argument: {name}")
        text = f"Say hello to {arguments['who']}."
        return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        names = ["ada", "alan", "grace"]
        values = [n for n in names if n.startswith(str(argument["value"]))]
        return values, len(values), False


async def _legacy(h: Harness) -> JSONObject:
    init = await h.call(
        request(
            0,
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "u", "version": "1"},
            },
        )
    )
    h.feed({"jsonrpc": "2.0", "method": "notifications/initialized"})
    result: JSONObject = init["result"]
    return result


async def test_prompts_are_listed_and_got_in_both_eras_for_the_requests_principal() -> None:
    prompts = Greetings()
    app = replace(build_app(), prompts=prompts)
    async with running(ServerConnection(app, principal="ada")) as h:
        modern = (await h.call(request(1, "prompts/list", {"_meta": meta()})))["result"]
        assert [p["name"] for p in modern["prompts"]] == ["greet"]
        assert modern["resultType"] == "complete" and modern["cacheScope"] == "public"
        got = await h.call(
            request(
                2, "prompts/get", {"_meta": meta(), "name": "greet", "arguments": {"who": "Al"}}
            )
        )
        assert got["result"]["messages"][0]["content"]["text"] == "Say hello to Al."
        missing = await h.call(request(3, "prompts/get", {"_meta": meta(), "name": "nope"}))
        assert missing["error"]["code"] == -32602
        bad = await h.call(
            request(4, "prompts/get", {"_meta": meta(), "name": "greet", "arguments": {"who": 1}})
        )
        assert bad["error"]["code"] == -32602
        caps = (await _legacy(h))["capabilities"]
        assert caps["prompts"] == {"listChanged": False} and caps["completions"] == {}
        legacy = (await h.call(request(5, "prompts/list", {})))["result"]
        assert legacy == {"prompts": modern["prompts"]}
        got = await h.call(request(6, "prompts/get", {"name": "greet", "arguments": {"who": "G"}}))
        assert got["result"]["messages"][0]["content"]["text"] == "Say hello to G."
    assert prompts.principals == ["ada", "ada", "ada"]  # request 4 never reached it


async def test_completion_goes_to_the_provider_its_ref_names() -> None:
    app = replace(build_app(), prompts=Greetings())
    async with running(ServerConnection(app, principal="ada")) as h:
        prompt = await h.call(
            request(
                1,
                "completion/complete",
                {
                    "_meta": meta(),
                    "ref": {"type": "ref/prompt", "name": "greet"},
                    "argument": {"name": "who", "value": "a"},
                },
            )
        )
        assert prompt["result"]["completion"] == {
            "values": ["ada", "alan"],
            "hasMore": False,
            "total": 2,
        }
        resource = await h.call(
            request(
                2,
                "completion/complete",
                {
                    "_meta": meta(),
                    "ref": {"type": "ref/resource", "uri": "note://{name}"},
                    "argument": {"name": "name", "value": "a"},
                },
            )
        )
        assert resource["result"]["completion"]["values"] == ["a"]


async def test_prompts_alone_still_offer_completion_and_a_missing_provider_is_invalid() -> None:
    app = replace(build_app(), resources=None, prompts=Greetings())
    async with running(ServerConnection(app, principal="ada")) as h:
        found = (await h.call(request(1, "server/discover", {"_meta": meta()})))["result"]
        assert found["capabilities"]["completions"] == {}
        assert "resources" not in found["capabilities"]
        no_resources = await h.call(
            request(
                2,
                "completion/complete",
                {
                    "_meta": meta(),
                    "ref": {"type": "ref/resource", "uri": "note://{name}"},
                    "argument": {"name": "name", "value": ""},
                },
            )
        )
        assert no_resources["error"]["code"] == -32602
        assert "no ref/resource" in no_resources["error"]["message"]
    async with running(ServerConnection(build_app(), principal="ada")) as h:
        no_prompts = await h.call(
            request(
                3,
                "completion/complete",
                {
                    "_meta": meta(),
                    "ref": {"type": "ref/prompt", "name": "greet"},
                    "argument": {"name": "who", "value": ""},
                },
            )
        )
        assert no_prompts["error"]["code"] == -32602
        assert "no ref/prompt" in no_prompts["error"]["message"]
