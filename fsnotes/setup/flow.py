"""``notes_setup``: a person connects a folder out of band, on a page this server controls.

Nothing the model says or fills in can grant access. The tool only *starts* a setup (a
pending record in the state directory: principal, folder, access, expiry) and asks the host
to open the setup page (URL-mode elicitation). The grant is made on the page, by a person who
enters the setup code that only the server's operator can see; or at a terminal with
``fsnotes grant``. The URL carries an opaque id and no secret; it grants nothing by itself.

Both protocol eras, one handler:

- 2026-07-28: ``input_required`` with the URL request and a sealed state naming the setup
  (bound to principal, tool, arguments and expiry). The retry with ``accept`` checks the
  store: approved → the grant; still pending → waits up to :data:`RETRY_WAIT_S` (well under
  common host timeouts), then another ``input_required`` with the same link; refused on the
  page → a refusal result. ``decline``/``cancel`` in the host cancel the setup and say so.
- 2025-11-25: the same request goes out live (``elicitation/create`` with ``elicitationId``,
  the setup id); after ``accept`` the call waits for the page up to the setup's expiry and
  sends ``notifications/elicitation/complete`` on approval. A second call for a setup that a
  live call is already waiting on cannot wait as well: it gets ``-32042`` with the same
  elicitation, and the completion notification tells its client when to retry.

Without ``elicitation.url`` declared on the request: ``-32021`` (modern) or an ``isError``
result (legacy), each pointing the person to the exact ``fsnotes grant`` command that does the
same thing, which the server prints on its stderr at that moment.

What the client receives never names a host path it did not send: not the state directory
(where the setup code lies), not the allowlist. The page, which only the person sees, says
where the code file is; the operator's stderr carries the full terminal command. Every
message the person reads (the URL request's) is rendered by :mod:`fsnotes.security.shown`.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from fsnotes.protocol.limits import INPUT_REQUEST_TIMEOUT_S
from fsnotes.protocol.registry import (
    ElicitURL,
    InputRequired,
    MissingCapability,
    RequestContext,
    Tool,
    ToolAnnotations,
    ToolError,
    ToolResult,
    URLElicitationRequired,
)
from fsnotes.security.consent import Binding, ConsentRefused, Subject, answer_of, open_state
from fsnotes.security.grants import Access, Grants
from fsnotes.security.seal import Sealer
from fsnotes.security.shown import shown
from fsnotes.setup.policy import PageUnavailable
from fsnotes.setup.runtime import NotGrantable, RuntimeScope, Target
from fsnotes.setup.store import Setup, SetupStatus, SetupStore, SetupStoreBusy, TooManyPending
from sandbox import errors as sx
from sandbox import uri as lexical

log = logging.getLogger("fsnotes.setup")

TOOL_NAME = "notes_setup"
PHASE = "connect"
SETUP_KEY = "connect_folder"
SUBJECT = Subject(what="setup", nothing="nothing was granted", tool=TOOL_NAME)
STATE_VERSION = 2  # 1: one-letter keys (states of that format are simply asked again)
# 2026-07-28: how long a retry with "accept" waits for the person before answering with the
# same link again (another input_required naming the same pending setup). The host learns of
# the approval only by retrying, and hosts bound a call's wait: the Python SDK client was seen
# giving up after 3 s (a short read timeout). So the wait stays well under that, leaving room
# for the round trip; it only catches an approval landing just as the host retries (the MCP
# Inspector, for one, retries once the person says they are done).
RETRY_WAIT_S = 1.5
# How often a waiting call re-reads the store: another process (the page of another server
# sharing the state directory, or `fsnotes grant`) may decide without waking us.
POLL_S = 1.0

AccessLabel = Literal["read", "write", "delete"]


class SetupArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workspaceUri: str = Field(
        description="The folder to connect, as a file:// URI (for example "
        "file:///notes/projects). A workspace you already have, to raise its access."
    )
    access: AccessLabel = Field(
        default="read",
        description="read: see notes; write: also create, edit and move; delete: also delete.",
    )


class SetupResult(BaseModel):
    granted: bool
    status: Literal[
        "granted", "already_granted", "refused", "declined", "cancelled", "expired", "locked"
    ]
    message: str
    workspaceUri: str
    access: AccessLabel


@dataclass(frozen=True)
class SetupState:
    """What a setup question seals: its binding, which pending setup, until when."""

    binding: Binding
    setup_id: str
    expires: int

    def encode(self) -> dict[str, Any]:
        return {
            "v": STATE_VERSION,
            "binding": self.binding.encode(),
            "setup": self.setup_id,
            "exp": self.expires,
        }

    @classmethod
    def decode(cls, payload: Mapping[str, Any]) -> SetupState:
        if payload.get("v") != STATE_VERSION or not isinstance(payload.get("setup"), str):
            raise ValueError("another state version")
        return cls(Binding.decode(payload["binding"]), str(payload["setup"]), int(payload["exp"]))


PageStarter = Callable[[], Awaitable[None]]


class SetupFlow:
    def __init__(
        self,
        *,
        grants: Grants,
        scope: RuntimeScope,
        store: SetupStore,
        sealer: Sealer,
        clock: Callable[[], float],
        grant_command: str,
        start_page: PageStarter | None,
    ) -> None:
        self.grants = grants  # the whole table: each request is checked for its principal
        self.scope = scope
        self.store = store
        self.sealer = sealer
        self.clock = clock
        self.grant_command = grant_command  # "fsnotes grant ..." with the server's options
        self.start_page = start_page
        self._events: dict[str, anyio.Event] = {}
        self._notifiers: dict[str, list[Callable[[], Awaitable[None]]]] = {}
        self._live_waits: dict[str, int] = {}  # legacy calls waiting on each setup
        # Legacy live questions sent for each setup and not answered yet, by deadline: the
        # core gives up on an unanswered question after INPUT_REQUEST_TIMEOUT_S without
        # calling us again, so an entry counts only until then.
        self._asked: dict[str, list[float]] = {}

    # --- called by the page (in the event loop) ------------------------------------------

    async def on_decided(self, setup: Setup) -> None:
        """The page decided ``setup``: wake the calls waiting on it; on approval, tell the
        legacy clients that asked for it (``notifications/elicitation/complete``)."""
        await anyio.to_thread.run_sync(self.scope.sync)
        await self._settled(setup)

    async def _settled(self, setup: Setup) -> None:
        """``setup`` is no longer pending (decided here, in another process or by ``fsnotes
        grant``, or expired): wake its waiters and, on approval, notify once."""
        event = self._events.pop(setup.id, None)
        if event is not None:
            event.set()
        notifiers = self._notifiers.pop(setup.id, [])
        if setup.status is SetupStatus.APPROVED:
            for notify in notifiers:
                try:
                    await notify()
                except Exception:  # a client that went away must not break the page
                    log.exception("could not send elicitation/complete for setup %s", setup.id)

    # --- the tool ------------------------------------------------------------------------

    def command_for(self, principal: str, target: Target, access: Access) -> str:
        return (
            f"{self.grant_command} --workspace {shlex.quote(target.path)} "
            f"--principal {shlex.quote(principal)} --access {access.label}"
        )

    def at_terminal(self, principal: str, target: Target, access: Access) -> str:
        """Print the exact ``fsnotes grant`` command for the operator; return what the client
        may be told. The command names the state directory and the allowlist, host paths the
        caller never sent (and the state directory is where the setup code lies), so it goes
        to stderr, which the person who runs fsnotes reads and the client does not."""
        log.warning(
            "notes_setup: to grant this at a terminal instead, run: %s",
            self.command_for(principal, target, access),
        )
        return (
            "The person who runs fsnotes can grant it at a terminal instead, with the exact "
            "`fsnotes grant` command this server has just printed on its error output (stderr)."
        )

    async def handle(self, ctx: RequestContext, args: SetupArgs) -> ToolResult | InputRequired:
        try:
            return await self._handle(ctx, args)
        except SetupStoreBusy as exc:
            # Any store call below, the first one a new worker thread makes included.
            raise ToolError(f"Nothing was granted: {exc}.") from None

    async def _handle(self, ctx: RequestContext, args: SetupArgs) -> ToolResult | InputRequired:
        access = Access.parse(args.access)
        try:
            components = lexical.parse_file_uri(args.workspaceUri)
        except sx.InvalidURI as exc:
            raise ToolError(
                f"That is not a valid local file:// URI ({exc}); pass the folder as "
                "file:///absolute/path."
            ) from None
        uri = lexical.to_file_uri(components)
        first_round = ctx.request_state is None and ctx.input_responses is None
        if first_round:
            held = await anyio.to_thread.run_sync(
                self._held, ctx.principal, Access.from_ceiling(ctx.ceiling), components, access
            )
            if held is not None:
                return held
        try:
            target = await anyio.to_thread.run_sync(self.scope.target, components, access)
        except NotGrantable as exc:
            raise ToolError(str(exc)) from None
        if not ctx.supports_elicitation("url"):
            raise MissingCapability(
                "Connecting a folder needs the person to open this server's setup page, and "
                "this client cannot open URLs (it did not declare elicitation URL mode). "
                + self.at_terminal(ctx.principal, target, access),
                required={"elicitation": {"url": {}}},
            )
        arguments = {"workspaceUri": uri, "access": access.label}
        if first_round:
            return await self._start(ctx, target, access, arguments)
        return await self._resume(ctx, target, access, arguments)

    def _held(
        self, principal: str, ceiling: Access, components: tuple[str, ...], access: Access
    ) -> ToolResult | None:
        """A result when ``principal`` already has this access there (its grant lowered to
        the ``ceiling`` of the request's credentials), else ``None``."""
        for ws, have in self.grants.scope(principal, ceiling=ceiling).granted:
            if have < access:
                continue
            if ws.components == components:
                return _result(
                    "already_granted",
                    f"You already have '{have.label}' access to workspace '{ws.name}'.",
                    ws.uri,
                    access,
                    granted=True,
                )
            if components[: len(ws.components)] == ws.components:
                return _result(
                    "already_granted",
                    f"That folder is inside workspace '{ws.name}', where you already have "
                    f"'{have.label}' access; use that workspace's URI ({ws.uri}).",
                    ws.uri,
                    access,
                    granted=True,
                )
        return None

    async def _start(
        self, ctx: RequestContext, target: Target, access: Access, arguments: dict[str, Any]
    ) -> InputRequired:
        principal = ctx.principal
        try:
            setup = await anyio.to_thread.run_sync(
                lambda: self.store.start(
                    principal,
                    target.path,
                    access,
                    lifetime=self.scope.policy.lifetime,
                    client=_client_label(ctx.client_info),
                )
            )
        except TooManyPending as exc:
            raise ToolError(f"No new setup was started: {exc}.") from None
        except SetupStoreBusy as exc:
            raise ToolError(f"No setup was started: {exc}.") from None
        if self.start_page is not None:
            try:
                await self.start_page()
            except PageUnavailable as exc:
                await anyio.to_thread.run_sync(self.store.cancel, setup.id, principal)
                raise ToolError(
                    f"The setup page cannot start ({exc}). "
                    + self.at_terminal(principal, target, access)
                ) from None
        request = self._elicitation(setup, target)
        if ctx.asks_live:
            # Registered now, not after the host's answer: the person may approve first.
            self._remember_notifier(ctx, setup.id)
            if self._is_live(setup.id):
                # Another live call already asked the host about this setup or waits on it:
                # this one cannot wait as well. Its client retries on elicitation/complete.
                raise URLElicitationRequired([request])
            self._asked.setdefault(setup.id, []).append(self.clock() + INPUT_REQUEST_TIMEOUT_S)
        return InputRequired(requests={SETUP_KEY: request}, state=self._seal(setup, arguments))

    def _is_live(self, setup_id: str) -> bool:
        now = self.clock()
        asked = [deadline for deadline in self._asked.get(setup_id, []) if deadline > now]
        if asked:
            self._asked[setup_id] = asked
        else:
            self._asked.pop(setup_id, None)
        return bool(asked) or bool(self._live_waits.get(setup_id))

    def _answered(self, setup_id: str) -> None:
        """A legacy live question about ``setup_id`` got its answer (the core called back)."""
        asked = self._asked.get(setup_id)
        if asked:
            asked.pop(0)
            if not asked:
                del self._asked[setup_id]

    def _elicitation(self, setup: Setup, target: Target) -> ElicitURL:
        # No host path the caller did not send: the page tells the person where the code
        # file is. Shown, since the person reads it (the folder's name is already refused if
        # it hides characters; the principal comes from the configuration).
        return ElicitURL(
            message=(
                f"fsnotes asks you to connect the folder {shown(target.path)} with "
                f"'{setup.access.label}' access for '{shown(setup.principal)}'. Open the page, "
                "check the request, and approve it with the setup code that fsnotes printed "
                "when it started (the page says where else to find it), or deny it."
            ),
            url=self.scope.policy.page_url(setup.id),
            elicitation_id=setup.id,
        )

    def _seal(self, setup: Setup, arguments: Mapping[str, Any]) -> str:
        binding = Binding.of_call(setup.principal, TOOL_NAME, arguments, PHASE)
        state = SetupState(binding, setup.id, int(setup.expires) + 1)
        return self.sealer.seal(state.encode())

    def _remember_notifier(self, ctx: RequestContext, setup_id: str) -> None:
        notify = ctx.elicitation_complete_notifier(setup_id)
        waiting = self._notifiers.setdefault(setup_id, [])
        if notify is not None and notify not in waiting:
            waiting.append(notify)

    async def _resume(
        self, ctx: RequestContext, target: Target, access: Access, arguments: dict[str, Any]
    ) -> ToolResult | InputRequired:
        try:
            sealed = open_state(
                self.sealer,
                ctx.request_state,
                now=self.clock(),
                decode=SetupState.decode,
                expected=Binding.of_call(ctx.principal, TOOL_NAME, arguments, PHASE),
                subject=SUBJECT,
            )
        except ConsentRefused as exc:
            raise ToolError(str(exc)) from None
        if sealed is None:
            # Too old, or from before a key rotation: start (or find) the setup afresh.
            return await self._start(ctx, target, access, arguments)
        setup = await anyio.to_thread.run_sync(self.store.get, sealed.setup_id)
        if (
            setup is None
            or setup.principal != ctx.principal
            or setup.path != target.path
            or setup.access != access
        ):
            raise ToolError("That setup no longer exists; call notes_setup again to start one.")
        try:
            answer = answer_of(ctx.input_responses, SETUP_KEY, SUBJECT)
        except ConsentRefused as exc:
            raise ToolError(str(exc)) from None
        if ctx.asks_live:
            # No await from here to the wait below: a concurrent call never sees this setup
            # between "asked" and "waited on".
            self._answered(setup.id)
        if answer is None:
            return await self._start(ctx, target, access, arguments)  # no answer: ask again
        action = answer.action
        if action != "accept":
            await anyio.to_thread.run_sync(self.store.cancel, setup.id, setup.principal)
            verb = "declined to open" if action == "decline" else "dismissed"
            return _result(
                "declined" if action == "decline" else "cancelled",
                f"The person {verb} the setup page, so no setup took place and nothing was "
                "granted.",
                target.uri,
                access,
            )
        if ctx.asks_live:
            self._live_waits[setup.id] = self._live_waits.get(setup.id, 0) + 1
            try:
                setup = await self._wait(setup, setup.expires - self.clock())
            finally:
                self._live_waits[setup.id] -= 1
                if not self._live_waits[setup.id]:
                    del self._live_waits[setup.id]
        else:
            setup = await self._wait(setup, RETRY_WAIT_S)
            if setup.status is SetupStatus.PENDING:
                return InputRequired(
                    requests={SETUP_KEY: self._elicitation(setup, target)},
                    state=self._seal(setup, arguments),
                )
        return await self._outcome(setup, target, access)

    async def _wait(self, setup: Setup, timeout: float) -> Setup:
        """The setup once decided, or as it stands after ``timeout`` seconds."""
        deadline = self.clock() + max(0.0, timeout)
        while setup.status is SetupStatus.PENDING:
            left = deadline - self.clock()
            if left <= 0:
                break
            event = self._events.setdefault(setup.id, anyio.Event())
            with anyio.move_on_after(min(POLL_S, left)):
                await event.wait()
            try:
                current = await anyio.to_thread.run_sync(self.store.get, setup.id)
            except SetupStoreBusy as exc:
                # Another process holds the database for a moment: still waiting, not failed.
                log.warning("cannot read setup %s now (%s); still waiting", setup.id, exc)
                continue
            if current is None:
                break
            setup = current
        if setup.status is not SetupStatus.PENDING:
            # Possibly decided where on_decided does not run (another process's page,
            # fsnotes grant), or expired: settle it here (a no-op if already settled).
            await self._settled(setup)
        return setup

    async def _outcome(self, setup: Setup, target: Target, access: Access) -> ToolResult:
        status = setup.status
        if status is SetupStatus.APPROVED:
            await anyio.to_thread.run_sync(self.scope.sync)
            # Is the approved grant in effect? The grant itself, whatever the token's ceiling.
            held = await anyio.to_thread.run_sync(
                self._held, setup.principal, Access.DELETE, target.components, access
            )
            if held is None:
                raise ToolError(
                    "The setup was approved, but the grant is not in effect (the configuration "
                    "changed meanwhile); nothing was granted."
                )
            return _result(
                "granted",
                f"The person approved: you now have '{access.label}' access to {target.uri}. "
                "Call workspaces_list to see it.",
                target.uri,
                access,
                granted=True,
            )
        messages = {
            SetupStatus.DENIED: (
                "refused",
                "The person refused on the setup page; nothing was granted.",
            ),
            SetupStatus.CANCELLED: ("cancelled", "The setup was cancelled; nothing was granted."),
            SetupStatus.EXPIRED: (
                "expired",
                "Nobody approved the setup before it expired; "
                "nothing was granted. Call notes_setup again to start anew.",
            ),
            SetupStatus.LOCKED: (
                "locked",
                "The setup was locked after too many wrong setup codes; nothing was granted.",
            ),
            SetupStatus.PENDING: (
                "expired",
                "Nobody approved the setup in time; nothing was "
                "granted. Call notes_setup again to start anew.",
            ),
        }
        outcome, text = messages[status]
        return _result(outcome, text, target.uri, access)


def _result(
    status: str, message: str, uri: str, access: Access, *, granted: bool = False
) -> ToolResult:
    # The text block is the same JSON as structuredContent, as for every other tool.
    return ToolResult(
        structured=SetupResult.model_validate(
            {
                "granted": granted,
                "status": status,
                "message": message,
                "workspaceUri": uri,
                "access": access.label,
            }
        )
    )


# The longest client self-description shown on the page; clientInfo is free text.
MAX_CLIENT_LABEL = 80
_SURROGATE = re.compile("[\ud800-\udfff]")


def _client_label(info: Mapping[str, Any] | None) -> str | None:
    """``name version`` from the request's clientInfo, bounded, or ``None``.

    Kept as sent, hidden characters included: the page renders it with
    :func:`~fsnotes.security.shown.shown`, so they show as escapes rather than vanish. Lone
    surrogates (a JSON ``\\udcff`` escape) cannot be stored as text; they become U+FFFD.
    """
    if not isinstance(info, Mapping):
        return None
    parts = [info.get("title") or info.get("name"), info.get("version")]
    text = " ".join(str(p) for p in parts if isinstance(p, str) and p.strip())
    text = _SURROGATE.sub("\ufffd", text[:MAX_CLIENT_LABEL]).strip()
    return text or None


def build_setup_tool(flow: SetupFlow) -> Tool[SetupArgs, SetupResult]:
    async def notes_setup(ctx: RequestContext, args: SetupArgs) -> ToolResult | InputRequired:
        return await flow.handle(ctx, args)

    return Tool(
        name=TOOL_NAME,
        title="Connect a folder",
        description="Ask the person to connect a folder (or raise your access to one). "
        "fsnotes opens its own setup page, where the person approves or denies with a code "
        "only they have; you cannot approve for them. Returns whether access was granted.",
        input_model=SetupArgs,
        output_model=SetupResult,
        annotations=ToolAnnotations(
            title="Connect a folder", read_only=False, destructive=False, idempotent=True
        ),
        handler=notes_setup,
    )
