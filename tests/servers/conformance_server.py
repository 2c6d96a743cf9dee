"""TEST ONLY: the fixture the official MCP conformance suite runs against (never the product).

The suite (``@modelcontextprotocol/conformance``; see tests/interop/conformance.py) calls tools,
prompts and resources named ``test_*`` and checks their exact answers. This server registers
them, built from the product's own protocol core (``fsnotes.protocol``: App, Tool,
ResourceProvider, PromptProvider, ResourceSubscriptions) and served by its own Streamable HTTP
transport, so what the suite measures is that core and that transport. Nothing under
``fsnotes/`` imports this module, and no configuration selects it.

Each handler does what the scenario of the same name asks (the scenario sources describe them:
``src/scenarios/server/*.ts`` of the suite). Requests for input (sampling, elicitation, roots)
are :class:`InputRequired` answers, so the same handler is an MRTR round trip in 2026-07-28 and
a live request from the core's legacy adapter in 2025-11-25.

Run: ``FSNOTES_CONFORMANCE_TOKEN=... python -m tests.servers.conformance_server [--port PORT]``
(127.0.0.1; port 0, the default, lets the kernel pick; the transport prints ``serving MCP over
HTTP at URL`` on stderr once it accepts connections). Requests need that bearer token, as the
product's do (the transport refuses any request without one): the suite has no option to send
a header, so tests/peers/conformance/bearer.mjs adds it to every request the suite makes, for
this fixture and for the product alike.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, Field

from fsnotes.protocol import (
    App,
    CreateMessage,
    ElicitForm,
    InputRequired,
    InvalidParams,
    JSONObject,
    ListRoots,
    MissingCapability,
    RequestContext,
    ResourceNotFound,
    Tool,
    ToolAnnotations,
    ToolError,
    ToolResult,
)
from fsnotes.security.tokens import BearerTokens, TokenEntry, digest_of
from fsnotes.transport.http_server import bind, run_http
from fsnotes.transport.http_settings import DEFAULT_HOST, HttpSettings
from tests.servers.conformance_schemas import schema_tools
from tests.servers.conformance_tasks import with_tasks

# A 1x1 red PNG and a minimal WAV header, as the scenarios suggest.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
# The logging and progress scenarios ask for about 50 ms between notifications, so that a
# client sees several arrive while the call is still running.
STEP_S = 0.05

# Whom the fixture's one token acts for.
PRINCIPAL = "conformance"


# --- argument models -------------------------------------------------------------------------


class NoArgs(BaseModel):
    pass


class SamplingArgs(BaseModel):
    prompt: str = Field(description="The prompt to send to the LLM")


class ElicitationArgs(BaseModel):
    message: str = Field(description="The message to show the user")


# --- sealed request state (the tampered-state scenario) --------------------------------------


class Seal:
    """requestState the client cannot alter unnoticed: JSON, base64url, and an HMAC-SHA256
    under a key made at start-up. (The product seals its own states with its keyring; the
    fixture needs only the integrity check the scenario probes.)"""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def seal(self, payload: JSONObject) -> str:
        body = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()
        return f"{body}.{self._mac(body)}"

    def open(self, state: str | None) -> JSONObject | None:
        """The payload of ``state``; ``None`` when there is none; InvalidParams when altered."""
        if state is None:
            return None
        body, _, mac = state.partition(".")
        if not hmac.compare_digest(mac, self._mac(body)):
            raise InvalidParams("requestState integrity check failed")
        try:
            payload = json.loads(base64.urlsafe_b64decode(body))
        except (ValueError, binascii.Error):
            raise InvalidParams("requestState integrity check failed") from None
        if not isinstance(payload, dict):
            raise InvalidParams("requestState integrity check failed")
        return payload

    def _mac(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()


# --- reading the client's answers ------------------------------------------------------------


def accepted(ctx: RequestContext, key: str, field: str, kind: type = str) -> Any:
    """The ``field`` of an accepted form answer under ``key``, or ``None`` (missing, declined,
    or of the wrong shape: then the handler asks again)."""
    answer = (ctx.input_responses or {}).get(key)
    if not isinstance(answer, Mapping) or answer.get("action") != "accept":
        return None
    content = answer.get("content")
    value = content.get(field) if isinstance(content, Mapping) else None
    return value if isinstance(value, kind) else None


def sampled(ctx: RequestContext, key: str) -> str | None:
    """The text of a CreateMessageResult under ``key``, or ``None``."""
    answer = (ctx.input_responses or {}).get(key)
    content = answer.get("content") if isinstance(answer, Mapping) else None
    text = content.get("text") if isinstance(content, Mapping) else None
    return text if isinstance(text, str) else None


def roots_of(ctx: RequestContext, key: str) -> list[Any] | None:
    """The roots of a ListRootsResult under ``key``, or ``None``."""
    answer = (ctx.input_responses or {}).get(key)
    roots = answer.get("roots") if isinstance(answer, Mapping) else None
    return roots if isinstance(roots, list) else None


def form(message: str, **properties: JSONObject) -> ElicitForm:
    """A form asking for every one of ``properties`` (all required)."""
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return ElicitForm(message, schema)


def ask_model(text: str, max_tokens: int) -> CreateMessage:
    return CreateMessage(({"role": "user", "content": {"type": "text", "text": text}},), max_tokens)


def text(value: str) -> ToolResult:
    return ToolResult(text=value)


def answered(ctx: RequestContext) -> str:
    """How the client answered the one form it was asked (for the legacy elicitation tools)."""
    answer = next(iter((ctx.input_responses or {}).values()), None)
    if not isinstance(answer, Mapping):
        return "action=none, content={}"
    return f"action={answer.get('action')}, content={json.dumps(answer.get('content') or {})}"


# --- tools -----------------------------------------------------------------------------------


class Tools:
    """The ``test_*`` tools, by the scenario that calls them."""

    def __init__(self) -> None:
        self.seal = Seal()

    # Content of each kind (tools-call-simple-text, -image, -audio, -embedded-resource,
    # -mixed-content) and a tool error (tools-call-error).

    async def simple_text(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        return text("This is a simple text response for testing.")

    async def image(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        return ToolResult(content=[{"type": "image", "data": PNG, "mimeType": "image/png"}])

    async def audio(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        return ToolResult(content=[{"type": "audio", "data": WAV, "mimeType": "audio/wav"}])

    async def embedded_resource(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        resource = {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        }
        return ToolResult(content=[{"type": "resource", "resource": resource}])

    async def mixed(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        resource = {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": json.dumps({"test": "data", "value": 123}),
        }
        return ToolResult(
            content=[
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": resource},
            ]
        )

    async def error(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        raise ToolError("This tool intentionally returns an error for testing")

    # Notifications while a call runs (tools-call-with-logging, tools-call-with-progress; and
    # server-stateless's checks that a modern call logs nothing unasked and streams only
    # notifications besides its result).

    async def with_logging(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        for step, message in enumerate(
            ("Tool execution started", "Tool processing data", "Tool execution completed")
        ):
            if step:
                await anyio.sleep(STEP_S)
            await ctx.log("info", message, "conformance-test-server")
        return text("Tool with logging executed successfully")

    async def with_progress(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        for step, done in enumerate((0, 50, 100)):
            if step:
                await anyio.sleep(STEP_S)
            await ctx.report_progress(done, 100, f"Completed step {done} of 100")
        return text("Progress test completed")

    async def logging_tool(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        await ctx.log("info", "Diagnostic trace logging activated")
        return text("Logging evaluated")

    async def streaming(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        await ctx.report_progress(50, 100, "Halfway")
        return text("Streaming complete")

    # Input from the client, legacy scenarios (tools-call-sampling, tools-call-elicitation,
    # elicitation-sep1034-defaults, elicitation-sep1330-enums): asked live by the core.

    async def sampling(self, ctx: RequestContext, args: SamplingArgs) -> ToolResult | InputRequired:
        reply = sampled(ctx, "answer")
        if reply is None:
            return InputRequired({"answer": ask_model(args.prompt, 100)})
        return text(f"LLM response: {reply}")

    async def elicitation(
        self, ctx: RequestContext, args: ElicitationArgs
    ) -> ToolResult | InputRequired:
        if ctx.input_responses is None:
            user = {"type": "string", "description": "User's response"}
            email = {"type": "string", "description": "User's email address"}
            return InputRequired({"info": form(args.message, username=user, email=email)})
        return text(f"User response: {answered(ctx)}")

    async def defaults(self, ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
        if ctx.input_responses is None:
            schema = {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {
                        "type": "string",
                        "description": "User status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active",
                    },
                    "verified": {
                        "type": "boolean",
                        "description": "Verification status",
                        "default": True,
                    },
                },
                "required": [],
            }
            message = "Please review and update the form fields with defaults"
            return InputRequired({"form": ElicitForm(message, schema)})
        return text(f"Elicitation completed: {answered(ctx)}")

    async def enums(self, ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
        if ctx.input_responses is None:
            options = ["option1", "option2", "option3"]

            def titled(*titles: str) -> list[JSONObject]:
                return [{"const": f"value{i}", "title": t} for i, t in enumerate(titles, 1)]

            schema = {
                "type": "object",
                "properties": {
                    "untitledSingle": {
                        "type": "string",
                        "description": "Select one option",
                        "enum": options,
                    },
                    "titledSingle": {
                        "type": "string",
                        "description": "Select one option with titles",
                        "oneOf": titled("First Option", "Second Option", "Third Option"),
                    },
                    "legacyEnum": {
                        "type": "string",
                        "description": "Select one option (legacy)",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"],
                    },
                    "untitledMulti": {
                        "type": "array",
                        "description": "Select multiple options",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": {"type": "string", "enum": options},
                    },
                    "titledMulti": {
                        "type": "array",
                        "description": "Select multiple options with titles",
                        "minItems": 1,
                        "maxItems": 3,
                        "items": {"anyOf": titled("First Choice", "Second Choice", "Third Choice")},
                    },
                },
                "required": [],
            }
            message = "Please select options from the enum fields"
            return InputRequired({"form": ElicitForm(message, schema)})
        return text(f"Elicitation completed: {answered(ctx)}")

    # Multi round-trip requests, 2026-07-28 (input-required-result-*, server-stateless).

    async def missing_capability(self, ctx: RequestContext, args: NoArgs) -> ToolResult:
        if not ctx.supports_sampling():
            raise MissingCapability(
                "This tool needs the sampling capability", required={"sampling": {}}
            )
        return text("Success")

    async def mrtr_elicitation(
        self, ctx: RequestContext, args: NoArgs
    ) -> ToolResult | InputRequired:
        name = accepted(ctx, "user_name", "name")
        if name is None:  # not asked yet, or answered under the wrong key or shape: ask again
            return InputRequired({"user_name": form("What is your name?", name=STRING)})
        return text(f"Hello, {name}!")

    async def mrtr_sampling(self, ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
        reply = sampled(ctx, "capital_question")
        if reply is None:
            question = ask_model("What is the capital of France?", 100)
            return InputRequired({"capital_question": question})
        return text(f"Sampling result: {reply}")

    async def mrtr_roots(self, ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
        roots = roots_of(ctx, "client_roots")
        if roots is None:
            return InputRequired({"client_roots": ListRoots()})
        return text(f"Found {len(roots)} root(s)")

    async def mrtr_request_state(
        self, ctx: RequestContext, args: NoArgs
    ) -> ToolResult | InputRequired:
        state = self.seal.open(ctx.request_state)
        ok = accepted(ctx, "confirm", "ok", bool)
        if state is not None and state.get("kind") == "request-state" and ok is True:
            return text("state-ok: requestState validated")
        return InputRequired(
            {"confirm": form("Please confirm", ok={"type": "boolean"})},
            self.seal.seal({"kind": "request-state", "nonce": secrets.token_hex(8)}),
        )

    async def mrtr_multiple(self, ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
        state = self.seal.open(ctx.request_state)
        name = accepted(ctx, "user_name", "name")
        greeting = sampled(ctx, "greeting")
        roots = roots_of(ctx, "client_roots")
        answered_all = name is not None and greeting is not None and roots is not None
        if state is not None and state.get("kind") == "multiple-inputs" and answered_all:
            return text(f"Name: {name}; Greeting: {greeting}; Roots: {len(roots or [])}")
        return InputRequired(
            {
                "user_name": form("What is your name?", name=STRING),
                "greeting": ask_model("Generate a greeting", 50),
                "client_roots": ListRoots(),
            },
            self.seal.seal({"kind": "multiple-inputs", "nonce": secrets.token_hex(8)}),
        )

    async def mrtr_multi_round(
        self, ctx: RequestContext, args: NoArgs
    ) -> ToolResult | InputRequired:
        state = self.seal.open(ctx.request_state) or {}
        if state.get("round") == 1 and (name := accepted(ctx, "step1", "name")) is not None:
            return InputRequired(
                {"step2": form("Step 2: What is your favorite color?", color=STRING)},
                self.seal.seal({"round": 2, "name": name, "nonce": secrets.token_hex(8)}),
            )
        if state.get("round") == 2 and (color := accepted(ctx, "step2", "color")) is not None:
            return text(f"Multi-round complete for {state.get('name')} who likes {color}")
        return InputRequired(
            {"step1": form("Step 1: What is your name?", name=STRING)},
            self.seal.seal({"round": 1, "nonce": secrets.token_hex(8)}),
        )

    async def mrtr_tampered(self, ctx: RequestContext, args: NoArgs) -> ToolResult | InputRequired:
        state = self.seal.open(ctx.request_state)  # an altered state is -32602 here
        confirmed = (ctx.input_responses or {}).get("confirm") is not None
        if state is not None and state.get("kind") == "tamper-test" and confirmed:
            return text("integrity-ok: state verified")
        return InputRequired(
            {"confirm": form("Please confirm", ok={"type": "boolean"})},
            self.seal.seal({"kind": "tamper-test", "nonce": secrets.token_hex(8)}),
        )

    async def mrtr_capabilities(
        self, ctx: RequestContext, args: NoArgs
    ) -> ToolResult | InputRequired:
        if ctx.input_responses:
            return text(f"capabilities-ok: received {','.join(sorted(ctx.input_responses))}")
        asks: dict[str, ElicitForm | CreateMessage] = {}
        if ctx.supports_elicitation("form"):  # only what this request's client declared
            asks["elicit_input"] = form("Elicitation input", value=STRING)
        if ctx.supports_sampling():
            asks["sample_input"] = ask_model("Sample request", 50)
        if not asks:
            return text("No supported capabilities declared")
        state = self.seal.seal({"kind": "capabilities-test", "nonce": secrets.token_hex(8)})
        return InputRequired(asks, state)

    def all(self) -> list[Tool[Any, Any]]:
        table: list[tuple[str, str, Callable[..., Awaitable[Any]], type[BaseModel]]] = [
            ("test_simple_text", "Tests simple text content response", self.simple_text, NoArgs),
            ("test_image_content", "Tests image content response", self.image, NoArgs),
            ("test_audio_content", "Tests audio content response", self.audio, NoArgs),
            (
                "test_embedded_resource",
                "Tests embedded resource content response",
                self.embedded_resource,
                NoArgs,
            ),
            (
                "test_multiple_content_types",
                "Tests response with multiple content types (text, image, resource)",
                self.mixed,
                NoArgs,
            ),
            (
                "test_tool_with_logging",
                "Tests tool that emits log messages during execution",
                self.with_logging,
                NoArgs,
            ),
            (
                "test_tool_with_progress",
                "Tests tool that reports progress notifications",
                self.with_progress,
                NoArgs,
            ),
            ("test_error_handling", "Tests error response handling", self.error, NoArgs),
            (
                "test_sampling",
                "Tests server-initiated sampling (LLM completion request)",
                self.sampling,
                SamplingArgs,
            ),
            (
                "test_elicitation",
                "Tests server-initiated elicitation (user input request)",
                self.elicitation,
                ElicitationArgs,
            ),
            (
                "test_elicitation_sep1034_defaults",
                "Tests elicitation with default values per SEP-1034",
                self.defaults,
                NoArgs,
            ),
            (
                "test_elicitation_sep1330_enums",
                "Tests elicitation with enum schema improvements per SEP-1330",
                self.enums,
                NoArgs,
            ),
            (
                "test_missing_capability",
                "Test tool requiring sampling",
                self.missing_capability,
                NoArgs,
            ),
            (
                "test_input_required_result_elicitation",
                "MRTR: returns InputRequiredResult with elicitation request",
                self.mrtr_elicitation,
                NoArgs,
            ),
            (
                "test_input_required_result_sampling",
                "MRTR: returns InputRequiredResult with sampling request",
                self.mrtr_sampling,
                NoArgs,
            ),
            (
                "test_input_required_result_list_roots",
                "MRTR: returns InputRequiredResult with roots/list request",
                self.mrtr_roots,
                NoArgs,
            ),
            (
                "test_input_required_result_request_state",
                "MRTR: returns InputRequiredResult with requestState",
                self.mrtr_request_state,
                NoArgs,
            ),
            (
                "test_input_required_result_multiple_inputs",
                "MRTR: returns InputRequiredResult with multiple input requests",
                self.mrtr_multiple,
                NoArgs,
            ),
            (
                "test_input_required_result_multi_round",
                "MRTR: multi-round InputRequiredResult workflow",
                self.mrtr_multi_round,
                NoArgs,
            ),
            (
                "test_input_required_result_tampered_state",
                "MRTR: HMAC-signed requestState integrity test",
                self.mrtr_tampered,
                NoArgs,
            ),
            (
                "test_input_required_result_capabilities",
                "MRTR: respects client capabilities in inputRequests",
                self.mrtr_capabilities,
                NoArgs,
            ),
            (
                "test_streaming_elicitation",
                "Diagnostic tool validating response progress streams",
                self.streaming,
                NoArgs,
            ),
            ("test_logging_tool", "Diagnostic logging validator tool", self.logging_tool, NoArgs),
        ]
        return [
            Tool(
                name=name,
                title=name,
                description=description,
                input_model=model,
                output_model=None,
                annotations=ToolAnnotations(read_only=True, destructive=False),
                handler=handler,
            )
            for name, description, handler, model in table
        ]


STRING: JSONObject = {"type": "string"}


# --- resources -------------------------------------------------------------------------------

TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"
# (uri, name, title, description, contents item)
STATIC: dict[str, tuple[str, str, str, JSONObject]] = {
    "test://static-text": (
        "static-text",
        "Static Text Resource",
        "A static text resource for testing",
        {"mimeType": "text/plain", "text": "This is the content of the static text resource."},
    ),
    "test://static-binary": (
        "static-binary",
        "Static Binary Resource",
        "A static binary resource (image) for testing",
        {"mimeType": "image/png", "blob": PNG},
    ),
    "test://watched-resource": (
        "watched-resource",
        "Watched Resource",
        "A resource that can be subscribed to (it never changes)",
        {"mimeType": "text/plain", "text": "Watched resource content"},
    ),
}


class Resources:
    """The scenarios' resources: three static ones and ``test://template/{id}/data``."""

    async def list_resources(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        if cursor:
            raise InvalidParams("Invalid params: invalid cursor; resources come in one page")
        listed = [
            {
                "uri": uri,
                "name": name,
                "title": title,
                "description": description,
                "mimeType": item["mimeType"],
            }
            for uri, (name, title, description, item) in STATIC.items()
        ]
        return listed, None

    async def list_templates(self, ctx: RequestContext) -> list[JSONObject]:
        return [
            {
                "uriTemplate": TEMPLATE_PREFIX + "{id}" + TEMPLATE_SUFFIX,
                "name": "template",
                "title": "Resource Template",
                "description": "A resource template with parameter substitution",
                "mimeType": "application/json",
            }
        ]

    async def read_resource(
        self, ctx: RequestContext, uri: str
    ) -> list[JSONObject] | InputRequired:
        if uri in STATIC:
            return [{"uri": uri, **STATIC[uri][3]}]
        if uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
            ident = uri[len(TEMPLATE_PREFIX) : -len(TEMPLATE_SUFFIX)]
            if ident and "/" not in ident:
                data = {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}
                return [{"uri": uri, "mimeType": "application/json", "text": json.dumps(data)}]
        raise ResourceNotFound(uri)

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        # completion-complete: "support can be minimal or return empty arrays".
        return [], 0, False


class Subscriptions:
    """resources/subscribe for the 2025-11-25 scenarios. The watched resource never changes,
    so no update is ever sent; the senders are kept as the interface asks."""

    def __init__(self) -> None:
        self.senders: dict[str, list[Callable[[], Awaitable[None]]]] = {}

    async def subscribe(
        self, ctx: RequestContext, uri: str, updated: Callable[[], Awaitable[None]]
    ) -> None:
        if uri not in STATIC:
            raise ResourceNotFound(uri)
        self.senders.setdefault(uri, []).append(updated)

    async def unsubscribe(
        self, ctx: RequestContext, uri: str, updated: Callable[[], Awaitable[None]]
    ) -> None:
        self.senders.get(uri, []).remove(updated)


# --- prompts ---------------------------------------------------------------------------------

PROMPTS: list[JSONObject] = [
    {
        "name": "test_simple_prompt",
        "title": "Simple Test Prompt",
        "description": "A simple prompt without arguments",
    },
    {
        "name": "test_prompt_with_arguments",
        "title": "Prompt With Arguments",
        "description": "A prompt with required arguments",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "title": "Prompt With Embedded Resource",
        "description": "A prompt that includes an embedded resource",
        "arguments": [
            {"name": "resourceUri", "description": "URI of the resource to embed", "required": True}
        ],
    },
    {
        "name": "test_prompt_with_image",
        "title": "Prompt With Image",
        "description": "A prompt that includes image content",
    },
    {
        "name": "test_input_required_result_prompt",
        "title": "Prompt Requiring Input",
        "description": "MRTR: prompt that requires elicitation input",
    },
]


def user(content: JSONObject) -> JSONObject:
    return {"role": "user", "content": content}


class Prompts:
    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        # completion-complete asks for a prompt's argument: "support can be minimal or
        # return empty arrays" (the core now routes ref/prompt here, not to the resources).
        return [], 0, False

    async def list_prompts(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        if cursor:
            raise InvalidParams("Invalid params: invalid cursor; prompts come in one page")
        return PROMPTS, None

    async def get_prompt(
        self, ctx: RequestContext, name: str, arguments: Mapping[str, str]
    ) -> JSONObject | InputRequired:
        declared = next((p for p in PROMPTS if p["name"] == name), None)
        if declared is None:
            raise InvalidParams(f"Invalid params: unknown prompt {name!r}", data={"name": name})
        missing = [
            a["name"]
            for a in declared.get("arguments", [])
            if a.get("required") and a["name"] not in arguments
        ]
        if missing:
            raise InvalidParams(f"Invalid params: missing prompt arguments: {', '.join(missing)}")
        if name == "test_simple_prompt":
            messages = [user({"type": "text", "text": "This is a simple prompt for testing."})]
        elif name == "test_prompt_with_arguments":
            said = f"Prompt with arguments: arg1='{arguments['arg1']}', arg2='{arguments['arg2']}'"
            messages = [user({"type": "text", "text": said})]
        elif name == "test_prompt_with_embedded_resource":
            resource = {
                "uri": arguments["resourceUri"],
                "mimeType": "text/plain",
                "text": "Embedded resource content for testing.",
            }
            messages = [
                user({"type": "resource", "resource": resource}),
                user({"type": "text", "text": "Please process the embedded resource above."}),
            ]
        elif name == "test_prompt_with_image":
            messages = [
                user({"type": "image", "data": PNG, "mimeType": "image/png"}),
                user({"type": "text", "text": "Please analyze the image above."}),
            ]
        else:  # test_input_required_result_prompt
            context = accepted(ctx, "user_context", "context")
            if context is None:
                ask = form("What context should the prompt use?", context=STRING)
                return InputRequired({"user_context": ask})
            messages = [user({"type": "text", "text": f"Prompt with context: {context}"})]
        return {"description": declared["description"], "messages": messages}


def build_app() -> App:
    return App(
        name="fsnotes-conformance-fixture",
        version="0.1.0",
        title="fsnotes conformance fixture (tests only)",
        instructions=None,
        tools=[*Tools().all(), *schema_tools()],
        resources=Resources(),
        prompts=Prompts(),
        subscriptions=Subscriptions(),
    )


# The environment variable holding the one bearer token the fixture accepts.
TOKEN_ENV = "FSNOTES_CONFORMANCE_TOKEN"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The MCP conformance suite's fixture server.")
    parser.add_argument("--port", type=int, default=0, help="loopback port (0: any free one)")
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_ENV)
    if not token:
        print(f"conformance_server: set {TOKEN_ENV} to the bearer token to accept", file=sys.stderr)
        return 2
    tokens = BearerTokens([TokenEntry(PRINCIPAL, digest_of(token))], state_dir=None)
    settings = HttpSettings(host=DEFAULT_HOST, port=args.port)
    # The Tasks extension's tools and task store (tests/servers/conformance_tasks.py).
    with tempfile.TemporaryDirectory(prefix="fsnotes-conformance-") as state_dir:
        app = with_tasks(build_app(), Path(state_dir))
        run_http(app, settings, tokens, bind(settings.host, settings.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
