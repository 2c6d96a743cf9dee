"""notes_setup end to end with the official Python SDK client (`mcp` 2.3), in both eras.

A real `fsnotes serve` process (jailed, as in production) with an always-on setup page; the
SDK client is the host; a person approves or denies on the page over real HTTP
(:class:`tests.setup.person.Person`) with the setup code from the state directory.

What the SDK offers, and how these tests use it:

- An ``elicitation_callback`` makes the client declare ``elicitation: {form: {}, url: {}}``
  (both modes, always together); without a callback it declares no elicitation at all. So
  "a client without URL elicitation" is a client without an elicitation callback.
- 2025-11-25: ``elicitation/create`` reaches the callback as ``ElicitRequestURLParams``;
  ``notifications/elicitation/complete`` reaches ``message_handler``; ``-32042`` is raised as
  a plain ``MCPError`` (the SDK does not build ``UrlElicitationRequiredError`` on the client
  side), which ``UrlElicitationRequiredError.from_error`` turns into typed elicitations.
- 2026-07-28: ``ClientSession.discover()`` plus ``call_tool(..., allow_input_required=True)``
  returns the ``InputRequiredResult`` for a hand-driven round; ``Client(mode="auto")`` drives
  the rounds itself through the same callback.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
import pytest
from mcp import (
    Client,
    ClientSession,
    MCPError,
    StdioServerParameters,
    UrlElicitationRequiredError,
    stdio_client,
)
from mcp.client import ClientRequestContext
from mcp.shared.message import SessionMessage

from fsnotes.setup.code import CODE_FILE
from fsnotes.setup.store import SetupStore
from tests.setup.person import Person, free_port

# Every test is one server process plus a few HTTP requests (about a second each here); the
# bound only turns a hang into a failure.
TEST_LIMIT_S = 60.0
# Modern auto mode: the person visits the page a moment after the host opened it (the order
# does not matter to the server; it keeps the transcript realistic).
PERSON_PAUSE_S = 0.25
# The second call is answered at once (-32042); longer means it is waiting for the page.
ANSWER_LIMIT_S = 5.0

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


@pytest.fixture
def place(tmp_path: Path) -> Path:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "home.md").write_text("# Home\n")
    proj = tmp_path / "shared" / "proj"
    proj.mkdir(parents=True)
    (proj / "plan.md").write_text("# Plan\n\nship it\n")
    return tmp_path


@pytest.fixture
def port() -> int:
    return free_port()


def server_params(place: Path, port: int) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "fsnotes",
            "serve",
            "--workspace",
            str(place / "notes"),
            "--state-dir",
            str(place / "state"),
            "--principal",
            "ada",
            "--setup-allow",
            str(place / "shared"),
            "--setup-port",
            str(port),
        ],
        env={"PYTHONUNBUFFERED": "1"},
    )


def proj_uri(place: Path) -> str:
    return (place / "shared" / "proj").as_uri()


def setup_args(place: Path, access: str = "write") -> dict[str, Any]:
    return {"workspaceUri": proj_uri(place), "access": access}


def code_of(place: Path) -> str:
    return (place / "state" / CODE_FILE).read_text().strip()


def stored_grants(place: Path) -> list[Any]:
    return SetupStore(place / "state", clock=time.time).grants()


async def person_decides(place: Path, port: int, url: str, action: str) -> int:
    """The person opens ``url`` and approves (with the setup code) or denies; the HTTP status."""
    code = code_of(place) if action == "approve" else ""
    reply = await anyio.to_thread.run_sync(lambda: Person(port).decide(url, action, code))
    return reply.status


def structured(result: types.CallToolResult) -> dict[str, Any]:
    content: dict[str, Any] | None = result.structured_content
    assert content is not None, result
    return content


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


class Outbox:
    """The SDK's write stream, watched: every message the client sends, in wire order.

    ``responded(id)`` is set once the client's answer to server request ``id`` has been handed
    to the transport, so a test can order its next step after the host's answer on the wire
    (the transport writes in the order messages are sent here).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[dict[str, Any]] = []
        self._responded: dict[Any, anyio.Event] = {}

    def responded(self, request_id: Any) -> anyio.Event:
        return self._responded.setdefault(request_id, anyio.Event())

    async def send(self, item: SessionMessage, /) -> None:
        await self.inner.send(item)
        wire = item.message.model_dump(by_alias=True, mode="json", exclude_none=True)
        self.sent.append(wire)
        if "method" not in wire and "id" in wire:
            self.responded(wire["id"]).set()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Outbox:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return bool(await self.inner.__aexit__(exc_type, exc_val, exc_tb))


@asynccontextmanager
async def watched_stdio(params: StdioServerParameters, outbox: list[Outbox]) -> AsyncIterator[Any]:
    """``stdio_client`` with its write stream wrapped in an :class:`Outbox` (a ``Transport``)."""
    async with stdio_client(params) as (read, write):
        box = Outbox(write)
        outbox.append(box)
        yield read, box


class Host:
    """What the host saw: URL requests (with their JSON-RPC ids) and completion notices."""

    def __init__(self, answer: str = "accept") -> None:
        self.answer = answer
        self.asked: list[tuple[Any, types.ElicitRequestURLParams]] = []
        self.asked_event = anyio.Event()
        self.completed: list[str] = []
        self.completed_event = anyio.Event()
        self.on_ask: Callable[[types.ElicitRequestURLParams], Awaitable[None]] | None = None

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        self.asked.append((context.request_id, params))
        self.asked_event.set()
        if self.on_ask is not None:
            await self.on_ask(params)
        # URL mode: "accept" means the host opened the page, nothing more; no content.
        return types.ElicitResult(action=self.answer)  # type: ignore[arg-type]

    async def message(self, message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)
            self.completed_event.set()


# --- 2025-11-25 ----------------------------------------------------------------------------


async def _legacy_approved(place: Path, port: int) -> dict[str, Any]:
    host = Host()
    boxes: list[Outbox] = []
    out: dict[str, Any] = {}
    with anyio.fail_after(TEST_LIMIT_S):
        async with (
            watched_stdio(server_params(place, port), boxes) as (read, write),
            ClientSession(
                read, write, elicitation_callback=host.elicit, message_handler=host.message
            ) as s,
        ):
            out["version"] = (await s.initialize()).protocol_version
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    out["result"] = await s.call_tool("notes_setup", setup_args(place))

                tg.start_soon(call)
                await host.asked_event.wait()
                request_id, ask = host.asked[0]
                # No pause: the person may approve before the server has even read the
                # host's accept; the completion notice must still arrive.
                await boxes[0].responded(request_id).wait()
                out["page_status"] = await person_decides(place, port, ask.url, "approve")
            await host.completed_event.wait()  # the SDK hands notifications over in a task
            out["listed"] = structured(await s.call_tool("workspaces_list", {}))
    out["host"] = host
    out["sent"] = boxes[0].sent
    return out


def test_legacy_sdk_client_gets_the_url_request_and_the_completion_then_granted(
    place: Path, port: int
) -> None:
    out = anyio.run(_legacy_approved, place, port)
    assert out["version"] == LEGACY
    host: Host = out["host"]
    assert len(host.asked) == 1
    _, ask = host.asked[0]
    assert ask.mode == "url"
    assert ask.elicitation_id
    assert ask.url == f"http://127.0.0.1:{port}/setup/{ask.elicitation_id}"
    assert str(place / "shared" / "proj") in ask.message
    assert code_of(place) not in ask.message  # the model and host never see the code
    # The host answered "accept" with no content (URL mode carries none).
    answers = [m for m in out["sent"] if m.get("id") == host.asked[0][0] and "result" in m]
    assert answers == [{"jsonrpc": "2.0", "id": host.asked[0][0], "result": {"action": "accept"}}]
    assert out["page_status"] == 200
    assert host.completed == [ask.elicitation_id]
    result: types.CallToolResult = out["result"]
    assert result.is_error is False
    assert structured(result) == {
        "granted": True,
        "status": "granted",
        "message": structured(result)["message"],
        "workspaceUri": proj_uri(place),
        "access": "write",
    }
    access = {w["uri"]: w["access"] for w in out["listed"]["workspaces"]}
    assert access[proj_uri(place)] == "write"
    assert [(g.principal, g.access.label) for g in stored_grants(place)] == [("ada", "write")]


async def _legacy_second_call(place: Path, port: int) -> dict[str, Any]:
    host = Host()
    boxes: list[Outbox] = []
    out: dict[str, Any] = {}
    with anyio.fail_after(TEST_LIMIT_S):
        async with (
            watched_stdio(server_params(place, port), boxes) as (read, write),
            ClientSession(
                read, write, elicitation_callback=host.elicit, message_handler=host.message
            ) as s,
        ):
            await s.initialize()
            async with anyio.create_task_group() as tg:

                async def first() -> None:
                    out["first"] = await s.call_tool("notes_setup", setup_args(place))

                tg.start_soon(first)
                await host.asked_event.wait()
                request_id, ask = host.asked[0]
                await boxes[0].responded(request_id).wait()
                # No pause: from the moment the server asked the host, a second call for the
                # same setup cannot wait as well, whether or not the accept was processed.
                try:
                    with anyio.fail_after(ANSWER_LIMIT_S):
                        await s.call_tool("notes_setup", setup_args(place))
                    out["second"] = "a result"
                except MCPError as exc:
                    out["second"] = exc
                except TimeoutError:
                    out["second"] = "no answer: it was elicited live as well and is waiting"
                out["page_status"] = await person_decides(place, port, ask.url, "approve")
            await host.completed_event.wait()
            # The client that got -32042 retries once the completion notice has arrived.
            out["retry"] = await s.call_tool("notes_setup", setup_args(place))
    out["host"] = host
    return out


def test_legacy_second_concurrent_call_is_url_elicitation_required_then_the_retry_succeeds(
    place: Path, port: int
) -> None:
    out = anyio.run(_legacy_second_call, place, port)
    host: Host = out["host"]
    assert len(host.asked) == 1  # the second call did not elicit again
    _, ask = host.asked[0]
    error = out["second"]
    assert isinstance(error, MCPError), error
    assert error.code == -32042
    typed = UrlElicitationRequiredError.from_error(error.error)
    assert [(e.mode, e.url, e.elicitation_id, e.message) for e in typed.elicitations] == [
        ("url", ask.url, ask.elicitation_id, ask.message)
    ]
    assert out["page_status"] == 200
    assert host.completed == [ask.elicitation_id]  # once, though two calls asked
    assert structured(out["first"])["status"] == "granted"
    retry = structured(out["retry"])
    assert retry["granted"] is True and retry["status"] == "already_granted"


# --- 2026-07-28 ----------------------------------------------------------------------------


async def _modern_by_hand(place: Path, port: int) -> dict[str, Any]:
    host = Host()
    out: dict[str, Any] = {}
    args = setup_args(place)
    with anyio.fail_after(TEST_LIMIT_S):
        async with (
            stdio_client(server_params(place, port)) as (read, write),
            ClientSession(read, write, elicitation_callback=host.elicit) as s,
        ):
            await s.discover()
            out["version"] = s.protocol_version
            first = await s.call_tool("notes_setup", args, allow_input_required=True)
            out["first"] = first
            assert isinstance(first, types.InputRequiredResult), first
            listed = structured(await s.call_tool("workspaces_list", {}))
            out["before"] = [w["uri"] for w in listed["workspaces"]]
            requests = first.input_requests or {}
            responses = {
                key: await s.dispatch_input_request(
                    ClientRequestContext(session=s, request_id=key), request
                )
                for key, request in requests.items()
            }
            _, ask = host.asked[0]
            out["page_status"] = await person_decides(place, port, ask.url, "approve")
            out["result"] = await s.call_tool(
                "notes_setup",
                args,
                input_responses=responses,  # type: ignore[arg-type]
                request_state=first.request_state,
                allow_input_required=True,
            )
            listed = structured(await s.call_tool("workspaces_list", {}))
            out["after"] = {w["uri"]: w["access"] for w in listed["workspaces"]}
    out["host"] = host
    return out


def test_modern_sdk_round_by_hand_url_request_then_approval_then_granted(
    place: Path, port: int
) -> None:
    out = anyio.run(_modern_by_hand, place, port)
    assert out["version"] == MODERN
    first: types.InputRequiredResult = out["first"]
    assert set(first.input_requests or {}) == {"connect_folder"}
    assert first.request_state
    assert code_of(place) not in first.model_dump_json()
    host: Host = out["host"]
    assert len(host.asked) == 1
    _, ask = host.asked[0]
    assert ask.mode == "url"
    assert ask.elicitation_id is None  # 2026-07-28 has no elicitationId
    assert ask.url.startswith(f"http://127.0.0.1:{port}/setup/")
    assert proj_uri(place) not in out["before"]  # nothing granted before the person acts
    assert out["page_status"] == 200
    result = out["result"]
    assert isinstance(result, types.CallToolResult) and result.is_error is False
    assert structured(result)["status"] == "granted" and structured(result)["granted"] is True
    assert out["after"][proj_uri(place)] == "write"


async def _modern_auto(place: Path, port: int, host: Host, page_action: str | None) -> Any:
    """``Client(mode="auto")`` drives the input_required rounds; the person acts on the page
    (``page_action``) in the background after the host answered, as a real host returns as
    soon as it has opened the browser."""
    out: dict[str, Any] = {}
    with anyio.fail_after(TEST_LIMIT_S):
        async with anyio.create_task_group() as tg:
            if page_action is not None:

                async def person(url: str) -> None:
                    await anyio.sleep(PERSON_PAUSE_S)
                    out["page_status"] = await person_decides(place, port, url, page_action)

                async def on_ask(params: types.ElicitRequestURLParams) -> None:
                    tg.start_soon(person, params.url)

                host.on_ask = on_ask
            async with Client(
                server_params(place, port), mode="auto", elicitation_callback=host.elicit
            ) as client:
                out["version"] = client.protocol_version
                out["result"] = await client.call_tool("notes_setup", setup_args(place))
    return out


@pytest.mark.parametrize(
    ("page_action", "answer", "status", "granted"),
    [
        ("approve", "accept", "granted", True),
        ("deny", "accept", "refused", False),
        (None, "decline", "declined", False),
        (None, "cancel", "cancelled", False),
    ],
)
def test_modern_sdk_client_auto_mode_reports_what_the_person_and_host_did(
    place: Path, port: int, page_action: str | None, answer: str, status: str, granted: bool
) -> None:
    host = Host(answer)
    out = anyio.run(_modern_auto, place, port, host, page_action)
    assert out["version"] == MODERN
    assert [p.mode for _, p in host.asked] == ["url"]
    if page_action is not None:
        assert out["page_status"] == 200
    result: types.CallToolResult = out["result"]
    assert result.is_error is False
    assert structured(result)["status"] == status
    assert structured(result)["granted"] is granted
    if not granted:
        assert "nothing was granted" in text_of(result)
    assert len(stored_grants(place)) == (1 if granted else 0)


# --- without URL elicitation -----------------------------------------------------------------


async def _modern_without_url(place: Path, port: int) -> MCPError:
    with anyio.fail_after(TEST_LIMIT_S):
        async with Client(server_params(place, port), mode="auto") as client:
            assert client.protocol_version == MODERN
            with pytest.raises(MCPError) as raised:
                await client.call_tool("notes_setup", setup_args(place))
            return raised.value


def test_modern_sdk_client_without_url_elicitation_gets_minus_32021_naming_fsnotes_grant(
    place: Path, port: int
) -> None:
    error = anyio.run(_modern_without_url, place, port)
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert "fsnotes grant" in error.message and "error output" in error.message
    assert str(place / "state") not in error.message  # the full command is on stderr
    assert SetupStore(place / "state", clock=time.time).pending_count() == 0


async def _legacy_without_url(place: Path, port: int) -> types.CallToolResult:
    with anyio.fail_after(TEST_LIMIT_S):
        async with (
            stdio_client(server_params(place, port)) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            return await s.call_tool("notes_setup", setup_args(place))


def test_legacy_sdk_client_without_url_elicitation_gets_an_is_error_result_naming_fsnotes_grant(
    place: Path, port: int
) -> None:
    result = anyio.run(_legacy_without_url, place, port)
    assert result.is_error is True
    text = text_of(result)
    assert "fsnotes grant" in text and "error output" in text
    assert str(place / "state") not in text
    assert SetupStore(place / "state", clock=time.time).pending_count() == 0
