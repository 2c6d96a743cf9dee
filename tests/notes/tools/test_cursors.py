"""Cursors a client forged: decodable JSON of any shape gets the lister's own error."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from fsnotes.app.server import Server
from fsnotes.notes.tools import linkservice
from fsnotes.notes.tools.resources import NotesResources
from fsnotes.notes.tools.service import ServiceError
from fsnotes.protocol import cursor as cursor_codec
from fsnotes.protocol.registry import InvalidParams, RequestContext

# Well-formed cursors (base64url JSON) that no list of ours issued.
FORGED: list[Any] = [
    [1],
    5,
    "after",
    None,
    {"v": 2, "after": ["a.md"]},
    {"v": 1, "after": "a.md"},
    {"v": 1, "after": [".."]},
    {"v": 1, "w": -1, "after": [], "k": "n"},
    {"v": 1, "tag": ""},
]

CTX = RequestContext(
    era="modern",
    protocol_version="2026-07-28",
    method="resources/list",
    principal="ada",
    client_capabilities={},
    client_info=None,
)


def test_the_codec_round_trips_json_and_refuses_what_is_not_a_cursor() -> None:
    for value in [*FORGED, {"v": 1, "after": ["é", "日本.md"]}]:
        text = cursor_codec.encode(value)
        assert "=" not in text and "+" not in text and "/" not in text
        assert cursor_codec.decode(text) == value
    for bad in ["not a cursor!", "////", "w6k", "é"]:
        with pytest.raises(ValueError):
            cursor_codec.decode(bad)


@pytest.mark.parametrize("value", FORGED, ids=repr)
def test_a_forged_notes_list_cursor_is_refused_with_a_sentence(server: Server, value: Any) -> None:
    notes = server.service.acting_for(server.config.principal)
    with pytest.raises(ServiceError, match="not one this server issued"):
        notes.notes_list(None, None, None, cursor_codec.encode(value), None)


@pytest.mark.parametrize("value", FORGED, ids=repr)
def test_a_forged_tags_cursor_is_refused_with_a_sentence(server: Server, value: Any) -> None:
    notes = server.service.acting_for(server.config.principal)
    with pytest.raises(ServiceError, match="not one this server issued"):
        linkservice.notes_tags(notes, None, None, cursor_codec.encode(value), None)


@pytest.mark.parametrize("value", FORGED, ids=repr)
def test_a_forged_resources_cursor_is_invalid_params(server: Server, value: Any) -> None:
    provider = NotesResources(server.service)
    with pytest.raises(InvalidParams, match="Invalid cursor"):
        anyio.run(provider.list_resources, CTX, cursor_codec.encode(value))
