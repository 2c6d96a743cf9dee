"""The protocol versions this server speaks, and the one list it advertises for retries.

Two eras (2026-07-28 basic/versioning.mdx "Terminology"): modern versions are named on every
request in ``_meta["io.modelcontextprotocol/protocolVersion"]``; legacy versions are only
reachable through the ``initialize`` handshake.
"""

from __future__ import annotations

# Versions accepted in a request's _meta (served statelessly), newest first.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)

# Handshake versions initialize answers, newest first. An unknown requested version gets the
# newest (2025-11-25 lifecycle: "respond with another version it supports").
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

# What server/discover's supportedVersions and -32022's data.supported list: only versions a
# client can name in _meta and have served, so a client that follows either list gets an answer.
# Spec (schema/2026-07-28/schema.ts at b0f60ba5): DiscoverResult.supportedVersions: "The client
# should choose a version from this list for use in subsequent requests"; UnsupportedProtocol-
# VersionError data.supported: "The client should choose a mutually supported version from this
# list and retry." A legacy version named in _meta is refused with -32022 again, so none is
# listed (the spec's own -32022 example lists "2025-11-25"; its discover example does not; we
# follow the normative sentences). Legacy clients never read these lists: they call initialize.
ADVERTISED_VERSIONS: tuple[str, ...] = MODERN_VERSIONS
