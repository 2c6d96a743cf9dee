"""Named limits of the protocol core, each with the reason for its value."""

from __future__ import annotations

# Largest accepted stdio line (one JSON-RPC message), in bytes, newline excluded. A note body
# travels inside a tools/call line; JSON escaping can double it, and the notes layer caps a note
# at 4 MiB, so 8 MiB admits every legitimate message. A longer line is answered with an error and
# skipped while it streams past, never held. This bounds what the server reads of a line, not what
# the line holds once parsed (MAX_LINE_VALUES and MAX_IN_FLIGHT_BYTES bound that). For scale:
# node's default max HTTP header is 16 KiB, and the MCP SDKs set no line limit at all.
MAX_LINE_BYTES = 8 * 1024 * 1024

# Most JSON values (object keys included) one line may hold; a line with more is answered -32600
# without being parsed (linecost.line_cost counts them on the bytes, in C). Parsed, each value is
# an object of 30 to 90 bytes, so 8 MB of "{}," became 2.7 million dicts holding 191 MiB, 25 times
# the line. Our largest legitimate messages hold a few thousand (a 2025-03-26 batch of
# MAX_BATCH_MEMBERS calls, a roots/list answer naming a thousand folders; a note, however full of
# braces and commas, is one string), so 65,536 leaves room while its values hold at most 8 MiB.
MAX_LINE_VALUES = 65_536

# What one parsed JSON value may hold besides its characters, in bytes, for charging a line
# against MAX_IN_FLIGHT_BYTES. Measured with tracemalloc on CPython 3.11, its list or dict slot
# included: 32 for an empty list or a float, 60 for a short string, 89 for a one-emoji string, 92
# for a dict nested in a dict (the most); 128 leaves a margin for the allocator.
VALUE_BYTES = 128

# Most client requests handled at once (each is a task). Enough for any real host (they issue
# a handful) and for 200 concurrent calls in our robustness test; what they hold is bounded by
# MAX_IN_FLIGHT_BYTES. Beyond it a request is answered at once with -32603 "busy".
MAX_IN_FLIGHT = 256

# Most bytes the client requests in flight and the answers they wait for (to our elicitation or
# roots requests) may hold once parsed. Each is charged its line's linecost.LineCost.charge (the
# line's length times the widest character its strings may have, 1, 2 or 4 bytes as CPython stores
# them, plus VALUE_BYTES per value) from its start until its task ends: a cancelled handler may
# still run in a worker thread. Beyond it a request is answered at once with -32603 "busy", like
# MAX_IN_FLIGHT, and an answer is dropped (the handler waiting for it sees an error). Whole-note
# writes of 4 MiB must fit several at once: one charges 4.4 MiB (ASCII code), 8.8 MiB (CJK text)
# or 17.7 MiB (ASCII with one emoji), so 14, 7 or 3 fit. The largest line that can be admitted
# charges 40 MiB (8 MiB at 4 bytes a character, and MAX_LINE_VALUES values), so any line runs
# when nothing else does.
# Not charged: the one line being parsed (json.loads needs the line, its decoded text and the
# values at once: up to 10x its length, 80 MiB at the line limit, when a string mixes ASCII with a
# character past U+FFFF such as an emoji, 6x with one past U+00FF, under 4x otherwise), what
# initialize declared (kept for the session: one line), each task's fixed few KiB, the answers
# (MAX_PENDING_ANSWER_BYTES bounds those) and what handlers allocate while they run (see
# MAX_PENDING_ANSWER_BYTES). Measured: the budget filled with 8 MiB strings, plus the costliest
# line to parse, peaked at +144 MiB RSS.
MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024

# Most bytes of answers that may wait to be written (with the room reserved for answers being
# computed again). A finished request's answer is encoded at once and then held only as its line
# (its dict freed), charged from then until it is written. An answer larger than
# SMALL_ANSWER_BYTES that does not fit is dropped, unless nothing else waits (so any one answer
# can be delivered): a request that only reads (a read-only tool, resources, prompts, completion)
# and asked the client nothing runs again once an answer of that size fits, the room reserved
# meanwhile, in arrival order; any other is answered -32603 "busy" (saying it was carried out).
# From half of it on, the transport reads no more requests until the answers drain below half
# (they wait in the client's pipe): a high-water mark, like node's streams, that leaves the other
# half to requests already running. A notes_read of a 4 MiB note answers 9.6 MiB (the note in
# structuredContent and again in the JSON text block), so six fit. Before, each such answer held
# 28 MiB until written (the answer, its text block and its encoding): 16, 32 and 64 left unread
# peaked at +450, +792 and +1,428 MiB (32 of a note with an emoji: +2,060 MiB); now at +145,
# +145 and +148 MiB (+315 MiB), all delivered once the client reads, the dropped ones computed
# again (64 took 23 s of CPU instead of 10 s). A client that reads at once and sends 20 of them
# together gets all 20, 14 computed twice: the server peaks at 199 MiB instead of 611 MiB, and
# answers in 6.2 s instead of 3.5 s.
# Not charged, being bounded otherwise: notifications and our own requests (a task sends one at a
# time, a few hundred bytes), the answers the reader writes itself (one at a time), the one
# answer being encoded (a notes_read of a 4 MiB note: about 28 MiB at its peak, 110 MiB if the
# note holds an emoji, since the whole line is then built as a 4-byte-per-character str), and
# what handlers hold while they run: a notes_read of a 4 MiB note holds 17 MiB in its worker
# thread (the file's bytes, its text, the Markdown analysis; 40 MiB with an emoji), and the
# stdio transport runs at most MAX_WORKER_THREADS (8) such steps at once. With every part at its
# worst at once (the line being parsed, the requests in flight, these answers with the small
# ones, one being encoded, eight threads reading notes with emoji), a peer can make the server
# hold at most about 80 + 64 + 80 + 110 + 320 MiB: 650 MiB above its resting size.
MAX_PENDING_ANSWER_BYTES = 64 * 1024 * 1024

# Answers this small are always kept, even past MAX_PENDING_ANSWER_BYTES: what writes, deletes,
# errors and "busy" answer (a few hundred bytes) is never dropped after the work was done. One
# per request in flight, so at most MAX_IN_FLIGHT of them (16 MiB) wait beyond the budget.
SMALL_ANSWER_BYTES = 64 * 1024

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

# Most resource subscriptions one legacy session may hold (2025-11-25 resources/subscribe). Each
# holds its URI and a sender (a few hundred bytes) until unsubscribed or the session ends; a host
# subscribes to what its user has open, so a thousand is far beyond any real one while bounding
# what a client can make the server keep.
MAX_SUBSCRIPTIONS_PER_SESSION = 1000

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

# The longest task id a tasks/* request may name: ours are 32 characters (token_urlsafe(24));
# a longer one is no task of ours, refused before any store is asked.
MAX_TASK_ID_CHARS = 128

# --- MCP tasks (the Tasks extension, fsnotes/runtime/tasks.py) ---------------------------------
# A call that may become a task and is still running after this long becomes one (measured,
# whatever the tool): hosts and proxies time out calls after tens of seconds (the Python SDK
# client gave up on a 20 s wait), and a call still busy after 2 s is one that waits on a
# rewrite, an index build or a busy store, which last far longer than 2 s more often than not.
TASK_AFTER_S = 2.0
# How often a running task tells the store it is alive (and writes its status message): one
# small row write, so cheap; often enough that a status message is at most this stale.
TASK_BEAT_S = 1.0
# A task whose owner has not beaten for this long reads as failed (its instance died): ten
# beats, so that a loaded machine (2 cores shared, the store's lock waits) never loses a task
# that is alive, while a dead one is reported within a quarter of a minute.
TASK_STALE_S = 15.0
# How long a task and its result are kept after its last change: an hour lets a client that
# restarted or lost its connection come back for the result; longer would keep results of
# calls nobody will read.
TASK_TTL_MS = 3_600_000
# What a client is told to wait between polls: a rewrite reports progress about this often.
TASK_POLL_MS = 1_000
# Most tasks one process runs at once; past it a call runs as a plain call (the client waits).
# Each holds a coroutine and, while it works, a worker thread: the same order as the requests
# in flight of one client.
MAX_RUNNING_TASKS = 32
