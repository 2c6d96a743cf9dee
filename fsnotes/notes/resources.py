"""Notes as MCP resources: their ``file://`` URIs, listed, read, templated and completed."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

import anyio

from sandbox import errors as sx
from sandbox import uri as lexical

from ..protocol.registry import InputRequired, InvalidParams, RequestContext, ResourceNotFound
from ..security.grants import Access, NotGranted, Workspace
from .service import NotesService, ServiceError
from .store import NoteError, display, iso_time

JSONObject = dict[str, Any]

RESOURCES_PAGE = 100  # resources per resources/list page
MAX_COMPLETIONS = 100  # the spec's cap on completion values
TEMPLATE_ARGUMENT = "path"


def mime_for(name: str) -> str:
    return "text/plain" if name.lower().endswith(".txt") else "text/markdown"


class NotesResources:
    """A ResourceProvider over every workspace the principal may read."""

    def __init__(self, service: NotesService) -> None:
        self.service = service

    def _readable(self) -> list[Any]:
        return [ws for ws, _ in self.service.grants.granted(self.service.principal)]

    async def list_resources(
        self, ctx: RequestContext, cursor: str | None
    ) -> tuple[list[JSONObject], str | None]:
        return await anyio.to_thread.run_sync(self._list, cursor)

    def _list(self, cursor: str | None) -> tuple[list[JSONObject], str | None]:
        start_ws, after = _decode(cursor) if cursor else (0, ())
        workspaces = self._readable()
        out: list[JSONObject] = []
        for index in range(start_ws, len(workspaces)):
            ws = workspaces[index]
            store = self.service.stores[ws.name]
            try:
                notes = list(store.iter_notes((), base=ws.components))
            except (sx.SandboxError, NoteError):
                continue  # one unreadable workspace must not hide the others
            for parts, info in notes:
                if index == start_ws and after and parts <= after:
                    continue
                if len(out) == RESOURCES_PAGE:
                    last = out[-1]["_pos"]
                    return [_strip(r) for r in out], _encode(*last)
                out.append(
                    {
                        "_pos": (index, parts),
                        "uri": lexical.to_file_uri(ws.components + parts),
                        "name": display(parts),
                        "title": f"{display(parts)} ({ws.name})",
                        "mimeType": mime_for(parts[-1]),
                        "size": info.size,
                        "annotations": {"lastModified": iso_time(info.mtime_ns)},
                    }
                )
        return [_strip(r) for r in out], None

    async def list_templates(self, ctx: RequestContext) -> list[JSONObject]:
        return [
            {
                # RFC 6570 reserved expansion: '{+path}' keeps the '/' between folders.
                "uriTemplate": ws.uri.rstrip("/") + "/{+" + TEMPLATE_ARGUMENT + "}",
                "name": ws.name,
                "title": f"Notes in {ws.name}",
                "description": "A note in this workspace, by its relative path.",
                "mimeType": "text/markdown",
            }
            for ws in self._readable()
        ]

    async def read_resource(
        self, ctx: RequestContext, uri: str
    ) -> list[JSONObject] | InputRequired:
        return await anyio.to_thread.run_sync(self._read, uri)

    def _read(self, uri: str) -> list[JSONObject]:
        try:
            loc = self.service.locate(uri, Access.READ)
            note = self.service.read_located(loc)
        except (NotGranted, ServiceError):
            # Outside the grants, malformed, missing or not a note: to the client these are
            # all "no such resource" (and the message never tells which).
            raise ResourceNotFound(uri) from None
        return [{"uri": loc.uri, "mimeType": mime_for(loc.parts[-1]), "text": note.text}]

    async def complete(
        self,
        ctx: RequestContext,
        ref: JSONObject,
        argument: JSONObject,
        context_arguments: Mapping[str, str],
    ) -> tuple[list[str], int | None, bool]:
        if ref.get("type") != "ref/resource" or argument.get("name") != TEMPLATE_ARGUMENT:
            raise InvalidParams("Completion is offered for the 'path' of a notes template only.")
        template = ref.get("uri")
        value = argument.get("value")
        if not isinstance(value, str):
            raise InvalidParams("argument.value must be a string")
        for ws in self._readable():
            if template == ws.uri.rstrip("/") + "/{+" + TEMPLATE_ARGUMENT + "}":
                return await anyio.to_thread.run_sync(self._complete, ws, value)
        raise InvalidParams("Unknown resource template; use one from resources/templates/list.")

    def _complete(self, ws: Workspace, prefix: str) -> tuple[list[str], int | None, bool]:
        store = self.service.stores[ws.name]
        folded = prefix.casefold()
        try:
            matches = [
                display(parts)
                for parts, _ in store.iter_notes((), base=ws.components)
                if display(parts).casefold().startswith(folded)
            ]
        except (sx.SandboxError, NoteError):
            return [], 0, False  # completion is a convenience; an unreadable tree offers none
        return matches[:MAX_COMPLETIONS], len(matches), len(matches) > MAX_COMPLETIONS


def _strip(resource: JSONObject) -> JSONObject:
    return {k: v for k, v in resource.items() if k != "_pos"}


def _encode(index: int, after: tuple[str, ...]) -> str:
    raw = json.dumps({"v": 1, "w": index, "after": list(after)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii").rstrip("=")


def _decode(cursor: str) -> tuple[int, tuple[str, ...]]:
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        index, after = value["w"], value["after"]
        if value.get("v") != 1 or not isinstance(index, int) or index < 0:
            raise ValueError
        if not isinstance(after, list):
            raise ValueError
        parts = tuple(lexical.check_name(p) for p in after if isinstance(p, str))
        if len(parts) != len(after):
            raise ValueError
        return index, parts
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError, sx.SandboxError):
        raise InvalidParams("Invalid cursor; list again from the start.") from None
