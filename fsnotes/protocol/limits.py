"""Named limits of the protocol core, each with the reason for its value."""

from __future__ import annotations

# Largest accepted stdio line (one JSON-RPC message), in bytes, newline excluded. A note body
# travels inside a tools/call line; JSON escaping can double it, and the notes layer caps a note
# well below 4 MiB, so 8 MiB admits every legitimate message while a runaway or hostile peer
# cannot make the server buffer more than this (a longer line is answered with an error and
# skipped while it streams past, never held). For scale: node's default max HTTP header is
# 16 KiB, and the MCP SDKs set no line limit at all.
MAX_LINE_BYTES = 8 * 1024 * 1024

# Most client requests handled at once (each is a task). Enough for any real host (they issue
# a handful) and for 200 concurrent calls in our robustness test, small enough that a flood
# cannot exhaust memory. Beyond it a request is answered at once with -32603 "busy".
MAX_IN_FLIGHT = 256

# Most members of one JSON-RPC batch (2025-03-26 sessions only: that revision "MUST support
# receiving JSON-RPC batches"; 2025-06-18 removed them). Every member is answered, so without a
# cap one line of a million tiny members ("[1,1,...]") became a million replies built before the
# first was written (1.2 MB of input: a 287 MiB peak and 22 s of CPU). A batch cannot usefully hold
# more requests than may be in flight at once (MAX_IN_FLIGHT); geth's JSON-RPC server caps a batch
# at 1,000 calls (node.DefaultConfig BatchRequestLimit). A longer batch gets one error, and none of
# its members runs.
MAX_BATCH_MEMBERS = 256

# Longest wait for a client's answer to a server-to-client request in the legacy era
# (elicitation/create, roots/list). A person fills the form, so minutes are normal; ten minutes
# matches the TypeScript SDK's default request timeout budget for interactive hosts while still
# freeing the tool call if the host silently drops the dialog.
INPUT_REQUEST_TIMEOUT_S = 600.0

# Longest wait for roots/list (legacy), which no person answers: roots are hints, so a client
# that does not answer quickly is ignored.
ROOTS_REQUEST_TIMEOUT_S = 10.0

# Most input rounds the legacy adapter runs for one request before giving up. A tool normally
# needs one or two (confirm, then maybe choose); more means a handler that keeps asking.
MAX_INPUT_ROUNDS = 8

# tools/list page size. Our tool list is short; paging still works for any count.
TOOLS_PAGE_SIZE = 100

# Cache hints (2026-07-28 ttlMs). Discovery and the tool list change only when the binary does.
DISCOVER_TTL_MS = 300_000
TOOLS_LIST_TTL_MS = 300_000
# Notes change on disk under the server (editors, sync tools): a short freshness hint.
RESOURCES_TTL_MS = 5_000

# Longest completion list the spec allows in one answer.
MAX_COMPLETION_VALUES = 100

# How much of a bad argument value is quoted back in a validation message.
MAX_QUOTED_VALUE_CHARS = 80
