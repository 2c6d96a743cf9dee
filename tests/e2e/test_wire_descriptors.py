"""The wire tests' client reads a server's answers whatever its pipes' descriptor numbers: in
a test process holding many descriptors (in-process servers' state files stay open until they
are collected) select() refused a pipe numbered 1024 or more, and a wire test failed with
"filedescriptor out of range in select()" instead of testing the server."""

from __future__ import annotations

from pathlib import Path

from e2e.wire import LEGACY, Wire


def test_a_wire_past_descriptor_1023_reads_the_servers_answers(
    tmp_path: Path, many_descriptors: None
) -> None:
    vault = tmp_path / "notes"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n\ncopper kettle\n")
    wire = Wire(vault, tmp_path / "state")
    try:
        assert wire.proc.stdout is not None and wire.proc.stdout.fileno() >= 1024
        init = wire.call(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "wire-test", "version": "1"},
            },
        )
        assert init["result"]["protocolVersion"] == LEGACY
    finally:
        wire.close()
