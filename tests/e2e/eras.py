"""One raw wire client that speaks either era, so one test body covers both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.wire import LEGACY, Wire, meta


class EraWire:
    """A real `fsnotes serve` child, spoken to in ``era`` ("legacy": 2025-11-25 after an
    ``initialize`` handshake; "modern": 2026-07-28 with ``_meta`` on every request)."""

    def __init__(self, workspace: Path, state_dir: Path, era: str, *extra: str) -> None:
        self.era = era
        self.wire = Wire(workspace, state_dir, *extra)
        if era == "legacy":
            init = self.wire.call(
                "initialize",
                {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "era-wire", "version": "1"},
                },
            )
            assert init["result"]["protocolVersion"] == LEGACY
            self.capabilities: dict[str, Any] = init["result"]["capabilities"]
            self.wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        else:
            found = self.wire.call("server/discover", {"_meta": meta()})
            self.capabilities = found["result"]["capabilities"]

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The response (``result`` or ``error``) to one request in this era."""
        body = dict(params or {})
        if self.era == "modern":
            body["_meta"] = meta()
        return self.wire.call(method, body)

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.call(method, params)
        assert "result" in response, response
        result: dict[str, Any] = response["result"]
        if self.era == "modern":
            assert result["resultType"] == "complete", result
        return result

    def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.call(method, params)
        assert "error" in response, response
        error: dict[str, Any] = response["error"]
        return error

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.result("tools/call", {"name": name, "arguments": arguments})

    def close(self) -> str:
        return self.wire.close()
