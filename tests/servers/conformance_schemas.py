"""TEST ONLY: the conformance fixture's tools for two unscored 2026-07-28 scenarios (see
tests/servers/conformance_server.py, which lists them with the rest).

- ``json-schema-2020-12`` lists ``json_schema_2020_12_tool`` and checks that its
  ``inputSchema`` keeps the 2020-12 keywords it was written with: ``$schema``, ``$defs`` (an
  ``address`` definition carrying an ``$anchor``), ``additionalProperties: false``, an
  ``allOf`` holding an ``anyOf``, and ``if``/``then``/``else``. The tool declares that schema
  itself (``Tool.input_schema``), which the core lists as written.
- ``http-custom-header-server-validation`` looks for a tool whose parameters carry
  ``x-mcp-header`` and calls it with good, badly encoded and missing ``Mcp-Param-*`` headers:
  ``test_mirrored_headers`` mirrors a string, an integer and a boolean parameter, and the
  product's HTTP transport checks the headers against the arguments.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fsnotes.protocol import RequestContext, Tool, ToolAnnotations, ToolResult
from fsnotes.protocol.tool_schema import DIALECT_2020_12

SCHEMA_TOOL = "json_schema_2020_12_tool"

# A contact: a name, an optional address (a local $ref to an anchored definition), and at
# least one way to reach them, the one named by contactMethod being required.
CONTACT_SCHEMA: dict[str, Any] = {
    "$schema": DIALECT_2020_12,
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


class Address(BaseModel):
    street: str | None = None
    city: str | None = None


class Contact(BaseModel):
    """What CONTACT_SCHEMA describes, as far as a model says it (the conditionals are the
    schema's to state; the suite only lists the tool)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    address: Address | None = None
    contactMethod: str | None = None
    phone: str | None = None
    email: str | None = None


class Mirrored(BaseModel):
    region: str = Field(description="Where to run", json_schema_extra={"x-mcp-header": "Region"})
    priority: int = Field(description="How urgent", json_schema_extra={"x-mcp-header": "Priority"})
    # Optional, yet typed plainly: an annotated parameter must say its primitive type, which
    # ``bool | None`` would turn into an anyOf.
    verbose: bool = Field(
        default=False, description="Say more", json_schema_extra={"x-mcp-header": "Verbose"}
    )
    query: str = Field(description="Not mirrored")


async def contact(ctx: RequestContext, args: Contact) -> ToolResult:
    return ToolResult(text=json.dumps(args.model_dump(exclude_none=True)))


async def mirrored(ctx: RequestContext, args: Mirrored) -> ToolResult:
    return ToolResult(text=f"region={args.region} priority={args.priority} query={args.query}")


def schema_tools() -> list[Tool[Any, Any]]:
    hints = ToolAnnotations(read_only=True, destructive=False)
    return [
        Tool(
            name=SCHEMA_TOOL,
            title=SCHEMA_TOOL,
            description="Takes a contact; its inputSchema uses JSON Schema 2020-12 keywords",
            input_model=Contact,
            output_model=None,
            annotations=hints,
            handler=contact,
            input_schema=CONTACT_SCHEMA,
        ),
        Tool(
            name="test_mirrored_headers",
            title="test_mirrored_headers",
            description="Echoes its arguments; region, priority, verbose travel as Mcp-Param-*",
            input_model=Mirrored,
            output_model=None,
            annotations=hints,
            handler=mirrored,
        ),
    ]
