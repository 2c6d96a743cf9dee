"""Test-only MCP servers built from the protocol core; never part of the product."""
