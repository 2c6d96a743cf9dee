"""Roots from a legacy session never leak into modern (stateless) requests on the same process."""

from __future__ import annotations

from pathlib import Path

from e2e.wire import LEGACY, Wire, meta


def test_legacy_roots_do_not_pick_a_default_for_modern_requests(
    workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.md").write_text("# Other\n")
    w = Wire(workspace, tmp_path / "state", "--workspace", str(other))
    try:
        w.call(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {"roots": {}},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ask = w.read(10)
        assert ask is not None and ask["method"] == "roots/list"
        w.send(
            {
                "jsonrpc": "2.0",
                "id": ask["id"],
                "result": {"roots": [{"uri": other.as_uri(), "name": "other"}]},
            }
        )
        legacy = w.call("tools/call", {"name": "notes_list", "arguments": {}})["result"]
        assert legacy.get("isError") is not True, legacy
        assert [n["path"] for n in legacy["structuredContent"]["notes"]] == ["o.md"]
        modern = w.call("tools/call", {"_meta": meta(), "name": "notes_list", "arguments": {}})[
            "result"
        ]
        assert modern["isError"] is True
        assert "several workspaces" in modern["content"][0]["text"]
    finally:
        w.close()
