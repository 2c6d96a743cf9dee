"""JSON Schemas for tools, generated from their pydantic models, and readable argument errors.

Schemas are made self-contained: pydantic's local ``$ref``s into ``$defs`` are inlined so a
client never has to resolve references (the spec tells clients not to dereference network
``$ref``s and some still mishandle local ones). Recursive models cannot be inlined and are
rejected when the tool list is built.

Every field's ``title``, which hosts show as its label, is its wire name in words
(:func:`field_title`: ``workspaceUri`` is "Workspace URI"), made here for every model, unless
the field sets its own; pydantic's default capitalises the name whole ("Workspaceuri").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from fsnotes.protocol.limits import MAX_QUOTED_VALUE_CHARS

JSONObject = dict[str, Any]

_DEFS_PREFIX = "#/$defs/"


# Words a title spells their own way (any other word after the first is in lower case).
_SPELLED = {"uri": "URI", "url": "URL", "id": "ID", "etag": "ETag", "json": "JSON"}
# A word of a camelCase or snake_case name: a run of capitals not followed by a lower-case
# letter (an abbreviation), or an optional capital, then lower-case letters and digits.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")


class SchemaError(ValueError):
    """A model whose schema cannot be made self-contained (e.g. a recursive model)."""


def field_title(name: str) -> str:
    """A field's wire name in words: ``workspaceUri`` -> "Workspace URI", ``startLine`` ->
    "Start line", ``etag`` -> "ETag"; the first word capitalised, an abbreviation kept."""
    words = [
        _SPELLED.get(word.lower(), word if word.isupper() and len(word) > 1 else word.lower())
        for word in _WORD.findall(name)
    ]
    if not words:
        return name
    words[0] = words[0][0].upper() + words[0][1:]
    return " ".join(words)


class _TitledFields(GenerateJsonSchema):
    # pydantic calls this for each field without a title of its own, with the wire name
    # (the alias) when the schema is made by alias, as model_schema makes it.
    def get_title_from_name(self, name: str) -> str:
        return field_title(name)

    # pydantic leaves a field whose schema is a $ref (a model, an enum) untitled, since a
    # $ref's siblings were ignored before JSON Schema 2019-09; model_schema inlines every
    # $ref, and the field's title then replaces the model's.
    def field_title_should_be_set(self, schema: Any) -> bool:
        return True


def model_schema(model: type[BaseModel]) -> JSONObject:
    """The self-contained JSON Schema of ``model`` (by alias), root ``type: object``.

    A model without fields gets ``{"type": "object", "additionalProperties": false}``, the shape
    the spec recommends for tools that take no arguments.
    """
    if not model.model_fields:
        return {"type": "object", "additionalProperties": False}
    raw = model.model_json_schema(by_alias=True, schema_generator=_TitledFields)
    defs = raw.pop("$defs", {})
    schema = _inline(raw, defs, ())
    if not isinstance(schema, dict):
        raise SchemaError(f"{model.__name__}: schema is not an object")
    schema["type"] = "object"
    return schema


def _inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, stack) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith(_DEFS_PREFIX) or ref[len(_DEFS_PREFIX) :] not in defs:
            raise SchemaError(f"unresolvable $ref {ref!r}")
        name = ref[len(_DEFS_PREFIX) :]
        if name in stack:
            raise SchemaError(f"recursive model {name!r} cannot be inlined")
        target = _inline(defs[name], defs, (*stack, name))
        siblings = {k: _inline(v, defs, stack) for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}
    return {key: _inline(value, defs, stack) for key, value in node.items()}


def _expected(schema: JSONObject, loc: tuple[int | str, ...]) -> str | None:
    """A short description of what the schema expects at ``loc`` (type, description)."""
    node: Any = schema
    for part in loc:
        if not isinstance(node, dict):
            return None
        if isinstance(part, str) and isinstance(node.get("properties"), dict):
            node = node["properties"].get(part)
        elif isinstance(part, int) and isinstance(node.get("items"), dict):
            node = node["items"]
        else:
            return None
    if not isinstance(node, dict):
        return None
    kind = node.get("type")
    if kind is None and isinstance(node.get("anyOf"), list):
        kinds = [str(alt.get("type")) for alt in node["anyOf"] if isinstance(alt, dict)]
        kind = " or ".join(k for k in kinds if k != "None")
    if isinstance(node.get("enum"), list):
        kind = "one of " + ", ".join(json.dumps(v) for v in node["enum"])
    parts = [str(kind)] if kind else []
    if isinstance(node.get("description"), str):
        parts.append(node["description"])
    return ": ".join(parts) or None


def _quote(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > MAX_QUOTED_VALUE_CHARS:
        text = text[: MAX_QUOTED_VALUE_CHARS - 3] + "..."
    return text


def describe_validation_error(tool_name: str, exc: ValidationError, schema: JSONObject) -> str:
    """An actionable sentence per bad field: where, what is wrong, and what is expected."""
    lines = [f"Invalid arguments for tool {tool_name!r}; fix these and call it again:"]
    for error in exc.errors(include_url=False):
        loc = tuple(error.get("loc", ()))
        where = ".".join(str(p) for p in loc) or "(arguments)"
        kind = error.get("type", "")
        expected = _expected(schema, loc)
        if kind == "missing":
            what = "required field is missing"
        elif kind == "extra_forbidden":
            what = "unknown field; remove it"
        else:
            what = f"{error.get('msg', 'invalid value')} (got {_quote(error.get('input'))})"
        hint = f"; expected {expected}" if expected and kind != "extra_forbidden" else ""
        lines.append(f"- {where}: {what}{hint}")
    return "\n".join(lines)


# --- schemas a tool declares itself -------------------------------------------------------

# The dialect a declared schema may name (2026-07-28 tools: 2020-12 is the default, and a
# server must refuse dialects it does not support rather than list a schema it misreads).
DIALECT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def declared_schema(schema: JSONObject) -> JSONObject:
    """A tool's own ``inputSchema``, checked and copied: listed as written, every keyword kept
    (``$schema``, ``$defs``, ``$anchor``, ``allOf``/``anyOf``, ``if``/``then``/``else``,
    ``additionalProperties``: 2026-07-28 allows any 2020-12 keyword), where a generated one is
    inlined. :class:`SchemaError` when the root is not ``type: object``, ``$schema`` names
    another dialect, or a ``$ref`` leaves the document (clients must not fetch network
    references, so a schema needing one could not be read). The tool's input model still
    validates the arguments: the schema describes them, it is not run."""
    copied = json.loads(json.dumps(schema))
    if not isinstance(copied, dict) or copied.get("type") != "object":
        raise SchemaError("a declared inputSchema needs root type 'object'")
    dialect = copied.get("$schema", DIALECT_2020_12)
    if dialect != DIALECT_2020_12:
        raise SchemaError(f"unsupported $schema dialect {dialect!r} (only {DIALECT_2020_12})")
    for ref in _refs(copied):
        if not ref.startswith("#"):
            raise SchemaError(f"$ref {ref!r} leaves the schema; only '#...' references are allowed")
    return copied


def _refs(node: Any) -> list[str]:
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    if not isinstance(node, dict):
        return []
    own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
    return own + [ref for key, value in node.items() if key != "$ref" for ref in _refs(value)]


# --- parameters mirrored into HTTP headers (x-mcp-header) ---------------------------------

HEADER_ANNOTATION = "x-mcp-header"
# The types a mirrored parameter may have (2026-07-28 streamable-http "Schema Extension":
# primitives only, and not ``number``).
HEADER_TYPES = ("string", "integer", "boolean")
# RFC 9110 5.6.2 tchar: what a field name (here the part after ``Mcp-Param-``) is made of.
_TCHAR = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# Keywords whose value maps names to subschemas, and keywords whose value is data, not schema.
_SCHEMA_MAPS = ("$defs", "definitions", "patternProperties", "dependentSchemas")
_DATA = ("enum", "const", "default", "examples")


@dataclass(frozen=True)
class ParamHeader:
    """One parameter a client mirrors into ``Mcp-Param-{name}``: the annotation's ``name``
    (as declared), the ``path`` of ``properties`` keys to it, and its JSON ``kind``."""

    name: str
    path: tuple[str, ...]
    kind: str

    @property
    def header(self) -> str:
        """The header's name, lower-case as the HTTP layer hands headers over."""
        return f"mcp-param-{self.name.lower()}"


def header_params(schema: JSONObject) -> tuple[ParamHeader, ...]:
    """The ``x-mcp-header`` annotations of an ``inputSchema``, checked as clients check them
    (a client drops a tool with a bad one, so the server refuses to list it): a non-empty
    token, case-insensitively unique, on a ``string``/``integer``/``boolean`` property
    reachable from the root through ``properties`` keys only. :class:`SchemaError` otherwise."""
    found: list[ParamHeader] = []
    _collect(schema, (), True, found)
    seen: set[str] = set()
    for param in found:
        if param.name.lower() in seen:
            raise SchemaError(f"x-mcp-header {param.name!r} is declared twice (case-insensitive)")
        seen.add(param.name.lower())
    return tuple(found)


def _collect(node: Any, path: tuple[str, ...], static: bool, found: list[ParamHeader]) -> None:
    if isinstance(node, list):
        for item in node:
            _collect(item, path, False, found)
        return
    if not isinstance(node, dict):
        return
    if HEADER_ANNOTATION in node:
        name = node[HEADER_ANNOTATION]
        where = ".".join(path) or "(root)"
        if not static or not path:
            raise SchemaError(
                f"x-mcp-header at {where} is not on a property reached via properties"
            )
        if not isinstance(name, str) or not _TCHAR.match(name):
            raise SchemaError(f"x-mcp-header {name!r} at {where} is not an HTTP token")
        if node.get("type") not in HEADER_TYPES:
            raise SchemaError(f"x-mcp-header at {where}: type must be one of {HEADER_TYPES}")
        found.append(ParamHeader(name, path, node["type"]))
    for key, value in node.items():
        if key in _DATA or key == HEADER_ANNOTATION:
            continue
        if key == "properties" and isinstance(value, dict):
            for prop, sub in value.items():
                _collect(sub, (*path, prop), static, found)
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            for sub in value.values():
                _collect(sub, path, False, found)
        else:
            _collect(value, path, False, found)
