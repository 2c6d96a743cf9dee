"""Tools that declare their own inputSchema (listed as written, every 2020-12 keyword kept) and
the x-mcp-header annotations the core checks when it builds the tool list."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from fsnotes.protocol import RequestContext, Tool, ToolAnnotations, ToolResult
from fsnotes.protocol.handlers import ToolTable
from fsnotes.protocol.tool_schema import DIALECT_2020_12, ParamHeader, SchemaError

# Every keyword the generated schemas drop or never make: a dialect, definitions with an
# anchor and a local $ref to them, composition, conditionals, closed properties.
DECLARED: dict[str, Any] = {
    "$schema": DIALECT_2020_12,
    "type": "object",
    "$defs": {"place": {"$anchor": "placeDef", "type": "object"}},
    "properties": {
        "place": {"$ref": "#/$defs/place"},
        "by": {"type": "string", "enum": ["car", "foot"]},
        "plate": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["place"]}, {"required": ["by"]}]}],
    "if": {"properties": {"by": {"const": "car"}}, "required": ["by"]},
    "then": {"required": ["plate"]},
    "else": {"not": {"required": ["plate"]}},
    "additionalProperties": False,
}


class Trip(BaseModel):
    place: dict[str, Any] | None = None
    by: str | None = None
    plate: str | None = None


async def handler(ctx: RequestContext, args: BaseModel) -> ToolResult:
    return ToolResult(text="ok")


def tool(model: type[BaseModel], schema: dict[str, Any] | None = None, name: str = "t") -> Tool:
    return Tool(
        name=name,
        title=name,
        description="a tool",
        input_model=model,
        output_model=None,
        annotations=ToolAnnotations(read_only=True),
        handler=handler,
        input_schema=schema,
    )


def listed(*tools: Tool[Any, Any]) -> list[dict[str, Any]]:
    return ToolTable(list(tools), 50).page(None, modern=True)["tools"]


def test_a_declared_schema_is_listed_as_written() -> None:
    [entry] = listed(tool(Trip, DECLARED))
    assert entry["inputSchema"] == DECLARED


def test_the_listed_schema_is_a_copy_later_changes_do_not_reach() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    table = ToolTable([tool(Trip, schema)], 50)
    schema["properties"]["a"]["type"] = "integer"
    assert table.page(None, modern=True)["tools"][0]["inputSchema"]["properties"]["a"] == {
        "type": "string"
    }


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "array"}, "root type 'object'"),
        ({"type": "object", "$schema": "http://json-schema.org/draft-07/schema#"}, "dialect"),
        (
            {"type": "object", "properties": {"p": {"$ref": "https://example.com/p.json"}}},
            "leaves the schema",
        ),
    ],
)
def test_a_declared_schema_clients_could_not_use_is_refused_at_build(
    schema: dict[str, Any], why: str
) -> None:
    with pytest.raises(SchemaError, match=why):
        ToolTable([tool(Trip, schema)], 50)


class Routed(BaseModel):
    region: str = Field(json_schema_extra={"x-mcp-header": "Region"})
    count: int = Field(json_schema_extra={"x-mcp-header": "Count"})
    dry: bool = Field(default=False, json_schema_extra={"x-mcp-header": "Dry-Run"})
    query: str


def test_annotated_parameters_are_found_in_generated_and_declared_schemas() -> None:
    table = ToolTable([tool(Routed)], 50)
    entry = table.get("t")
    assert entry is not None
    assert entry.headers == (
        ParamHeader("Region", ("region",), "string"),
        ParamHeader("Count", ("count",), "integer"),
        ParamHeader("Dry-Run", ("dry",), "boolean"),
    )
    assert entry.headers[2].header == "mcp-param-dry-run"
    nested = {
        "type": "object",
        "properties": {
            "where": {
                "type": "object",
                "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
            },
            # Not an annotation: a property that happens to be called so.
            "x-mcp-header": {"type": "string"},
        },
    }
    entry = ToolTable([tool(Trip, nested)], 50).get("t")
    assert entry is not None and entry.headers == (
        ParamHeader("Zone", ("where", "zone"), "string"),
    )


def _annotated(prop: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"p": prop}, **more}


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (_annotated({"type": "string", "x-mcp-header": ""}), "not an HTTP token"),
        (_annotated({"type": "string", "x-mcp-header": "My Region"}), "not an HTTP token"),
        (_annotated({"type": "string", "x-mcp-header": "Region:1"}), "not an HTTP token"),
        (_annotated({"type": "string", "x-mcp-header": "Régión"}), "not an HTTP token"),
        (_annotated({"type": "number", "x-mcp-header": "Score"}), "type must be"),
        (_annotated({"type": "object", "x-mcp-header": "Data"}), "type must be"),
        (_annotated({"anyOf": [{"type": "string"}], "x-mcp-header": "P"}), "type must be"),
        (
            _annotated({"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}),
            "not on a property reached via properties",
        ),
        (
            _annotated(
                {"type": "string"},
                allOf=[{"properties": {"q": {"type": "string", "x-mcp-header": "Q"}}}],
            ),
            "not on a property reached via properties",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "Field"},
                    "b": {"type": "string", "x-mcp-header": "field"},
                },
            },
            "declared twice",
        ),
    ],
)
def test_an_annotation_clients_must_reject_stops_the_tool_list_being_built(
    schema: dict[str, Any], why: str
) -> None:
    with pytest.raises(SchemaError, match=why):
        ToolTable([tool(Trip, schema)], 50)
