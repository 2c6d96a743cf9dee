"""What the person is shown, as bytes on the wire: the real `fsnotes serve`, both eras.

A hostile file name carries a right-to-left override (U+202E). The confirmation form the
client receives must show it as the visible escape ``\\u202e`` and must never contain the
character itself, in any field (the server writes UTF-8, so a raw U+202E would be the bytes
E2 80 AE; a JSON ``\\u202e`` escape would decode to it, so the decoded form is checked too).
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

from e2e.wire import LEGACY, Wire

FORM = {"elicitation": {"form": {}}}
RLO = "\u202e"
HOSTILE = f"invoice-{RLO}dm.fdp.md"  # draws as "invoice-dm.pdf.md"
SHOWN = "invoice-\\u202edm.fdp.md"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _assert_never_raw(lines: list[bytes]) -> None:
    for line in lines:
        assert RLO.encode() not in line, line
        assert not any(RLO in s for s in _strings(json.loads(line))), line


def test_modern_form_shows_a_bidi_name_escaped_and_deletes_the_shown_option(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / HOSTILE).write_text("# Invoice\n")
    (workspace / "invoice.md").write_text("# Invoice\n")
    w = Wire(workspace, tmp_path / "state")
    try:
        args = {"workspaceUri": workspace.as_uri(), "title": "invoice"}
        first = w.tool("notes_delete", args, FORM)["result"]
        ((key, req),) = first["inputRequests"].items()
        options = req["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
        assert sorted(o["const"] for o in options) == ["invoice-\\u202edm.fdp.md", "invoice.md"]
        hostile = next(o for o in options if o["const"] == SHOWN)
        assert hostile["title"].startswith(SHOWN + " — “Invoice”")
        done = w.tool(
            "notes_delete",
            args,
            FORM,
            inputResponses={
                key: {"action": "accept", "content": {"note_id": SHOWN, "confirm": True}}
            },
            requestState=first["requestState"],
        )["result"]
        assert done["structuredContent"]["deleted"] is True, done
        _assert_never_raw(w.received[:1])  # the form; the result names the file for the model
    finally:
        w.close()
    assert not (workspace / HOSTILE).exists() and (workspace / "invoice.md").exists()


def test_legacy_live_form_shows_a_bidi_name_escaped_and_nfc_nfd_twins_apart(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / HOSTILE).write_text("# Invoice\n")
    nfc, nfd = unicodedata.normalize("NFC", "café.md"), unicodedata.normalize("NFD", "café.md")
    for name in (nfc, nfd):
        (workspace / name).write_text("# Invoice café\n")
    w = Wire(workspace, tmp_path / "state")
    try:
        w.call(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        w.send(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "notes_delete", "arguments": {"title": "invoice"}},
            }
        )
        ask = w.read()
        assert ask is not None and ask["method"] == "elicitation/create", ask
        _assert_never_raw(w.received[-1:])
        options = ask["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
        consts = sorted(o["const"] for o in options)
        assert consts == ["caf\\u00e9.md", "cafe\\u0301.md", SHOWN]
        assert len({unicodedata.normalize("NFKC", o["title"]) for o in options}) == 3
        w.send(
            {
                "jsonrpc": "2.0",
                "id": ask["id"],
                "result": {
                    "action": "accept",
                    "content": {"note_id": "cafe\\u0301.md", "confirm": True},
                },
            }
        )
        result = w.read()
        assert result is not None and result["id"] == 7, result
        assert result["result"]["structuredContent"]["deleted"] is True, result
    finally:
        w.close()
    names = [p.name for p in workspace.iterdir()]
    assert nfd not in names and nfc in names and HOSTILE in names
