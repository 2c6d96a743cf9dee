"""The setup page: where a person approves or denies a setup, on a loopback HTTP server.

This is the only place where a principal's scope can widen at run time, so the page trusts
nothing the model or another web page could send:

- every request must carry ``Host: 127.0.0.1:<port>`` exactly (DNS rebinding: a foreign
  name resolving to 127.0.0.1 gets 421 and no page, so no form token leaks to it);
- a POST must come from this page: ``Origin`` present and equal to the page's origin,
  ``Sec-Fetch-Site`` (when the browser sends it) ``same-origin``, a form content type, a
  small body, a one-use form token (consumed by the store whatever the outcome) and a cookie
  bound to that token by an HMAC under a key that lives only in this process (SameSite
  Strict, so a cross-site request never carries it);
- approval needs the setup code from the server's stderr or its 0600 file, which the model
  never sees; wrong codes are counted per setup and per state directory by the store;
- the store re-checks the allowlist (``grantable``) in the same transaction that grants.

Every response, errors included, carries a strict Content-Security-Policy (no script, no
external resource; the one inline stylesheet is allowed by its hash), anti-framing and
no-store headers. Every interpolated value is HTML-escaped, and every value the person must
judge (principal, folder, client, file path) is first rendered by
:func:`fsnotes.security.shown.shown`, so invisible and direction-changing characters show as
visible escapes instead of drawing as something else.

Three modules: this one holds the routes (what each request does with the store) and
:func:`build_page_app`; :mod:`fsnotes.setup.page_guard` the request guards (Host, Origin,
Sec-Fetch-Site, content type, body cap, form fields, the form cookie) and
:mod:`fsnotes.setup.page_render` the HTML, the stylesheet and the security headers.

Starlette is an optional runtime extra: import this module only when the page runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fsnotes.setup import code as setup_code
from fsnotes.setup.page_guard import (
    MAX_BODY_BYTES,
    SETUP_ID_RE,
    FormGuard,
    Refused,
    SecurityHeaders,
    stale_form,
)
from fsnotes.setup.page_render import PageFacts, Renderer, default_facts, esc, html_response, plural
from fsnotes.setup.policy import SetupPolicy
from fsnotes.setup.store import (
    GLOBAL_FAILURES_WINDOW_S,
    LOCK_TIMEOUT_S,
    Setup,
    SetupStatus,
    SetupStore,
    SetupStoreBusy,
    Verdict,
)

__all__ = ["MAX_BODY_BYTES", "PageFacts", "build_page_app", "default_facts"]

log = logging.getLogger(__name__)

# What a busy store's 503 asks the browser to wait: one lock timeout, after which the writer
# that held the lock has either finished or is stuck (and waiting longer does not help).
BUSY_RETRY_AFTER_S = int(LOCK_TIMEOUT_S)


class _Page:
    """The two routes: what a GET or POST of ``/setup/{id}`` does with the store."""

    def __init__(
        self,
        *,
        store: SetupStore,
        policy: SetupPolicy,
        state_dir: Path,
        grantable: Callable[[Setup], bool],
        on_decided: Callable[[Setup], Awaitable[None]],
        describe: Callable[[Setup], PageFacts],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._policy = policy
        self._state_dir = state_dir
        self._grantable = grantable
        self._on_decided = on_decided
        self._describe = describe
        self._clock = clock
        self._render = Renderer(policy, state_dir)
        self._guard = FormGuard(policy)

    # --- pages ---------------------------------------------------------------------------

    async def _form_response(self, setup: Setup, status: int, error: str | None) -> Response:
        token = await anyio.to_thread.run_sync(self._store.issue_form_token, setup.id)
        if token is None:  # decided or expired since it was read
            return await self._current_status(setup.id, status=409)
        page = self._render.form(setup, self._describe(setup), token, self._clock(), error)
        return self._guard.with_form_cookie(html_response(page, status), setup.id, token)

    async def _current_status(self, setup_id: str, *, status: int) -> Response:
        setup = await anyio.to_thread.run_sync(self._store.get, setup_id)
        if setup is None:
            return self._not_found()
        if setup.status is SetupStatus.PENDING:
            return await self._form_response(setup, 200, None)
        return html_response(
            self._render.status_page(setup, self._describe(setup), self._clock()), status
        )

    def _not_found(self) -> Response:
        page = self._render.message(
            "No such setup request",
            "<p>There is no setup request at this address. It may have been decided and "
            "cleaned up long ago, or the link was copied incompletely.</p>",
        )
        return html_response(page, 404)

    def _not_grantable(self, setup: Setup) -> Response:
        page = self._render.message(
            "This folder cannot be granted",
            "<p>The fsnotes configuration does not allow granting this folder at this access "
            "level from the setup page, whatever is asked. Nothing was granted. The person "
            "who runs fsnotes can widen the allowed folders in its configuration.</p>",
            kind="no",
            extra=self._render.facts(setup, self._describe(setup), self._clock(), expiry=False),
        )
        return html_response(page, 403)

    def _refused(self, refusal: Refused) -> Response:
        return html_response(self._render.message(refusal.heading, refusal.text), refusal.status)

    async def get(self, request: Request) -> Response:
        setup_id = request.path_params["setup_id"]
        if not SETUP_ID_RE.fullmatch(setup_id):
            return self._not_found()
        setup = await anyio.to_thread.run_sync(self._store.get, setup_id)
        if setup is None:
            return self._not_found()
        if request.method == "HEAD":
            # Headers only: no form token is issued for a body nobody will read.
            return html_response("", 200)
        if setup.status is not SetupStatus.PENDING:
            return html_response(
                self._render.status_page(setup, self._describe(setup), self._clock()), 200
            )
        if not await anyio.to_thread.run_sync(self._grantable, setup):
            return self._not_grantable(setup)
        return await self._form_response(setup, 200, None)

    async def post(self, request: Request) -> Response:
        setup_id = request.path_params["setup_id"]
        try:
            self._guard.check_sender(request)
            form = await self._guard.read_form(request)
            token, code_text, approve = self._guard.fields(form)
            if not SETUP_ID_RE.fullmatch(setup_id):
                return self._not_found()
            self._guard.check_cookie(request, setup_id, token)
        except Refused as refusal:
            return self._refused(refusal)

        def code_ok() -> bool:
            return setup_code.check(self._state_dir, code_text)

        result = await anyio.to_thread.run_sync(
            lambda: self._store.submit(
                setup_id, token, approve=approve, code_ok=code_ok, grantable=self._grantable
            )
        )
        setup = result.setup
        match result.verdict:
            case Verdict.APPROVED | Verdict.DENIED:
                assert setup is not None
                try:
                    await self._on_decided(setup)
                except Exception:
                    # The decision is stored; the host learns it on its next check anyway.
                    log.exception("notifying the host of setup %s failed", setup.id)
                return html_response(
                    self._render.status_page(setup, self._describe(setup), self._clock()), 200
                )
            case Verdict.WRONG_CODE:
                assert setup is not None
                # Under the store's per-setup budget: show how many tries remain, never the
                # budget's value.
                left = setup.attempts_left
                error = (
                    "That is not the current setup code. Nothing was granted. "
                    f"{esc(plural(left, 'attempt'))} left before this request is locked."
                )
                return await self._form_response(setup, 400, error)
            case Verdict.LOCKED:
                if setup is None:  # pragma: no cover - the store returns the locked setup
                    return self._not_found()
                page = self._render.status_page(setup, self._describe(setup), self._clock())
                return html_response(page, 403)
            case Verdict.RATE_LIMITED:
                minutes = int(GLOBAL_FAILURES_WINDOW_S // 60)
                page = self._render.message(
                    "Too many wrong codes",
                    "<p>Too many wrong setup codes were entered on this computer recently, for "
                    "any request. Nothing was granted and this code was not checked. Wait up "
                    f"to {minutes} minutes, then reload this page and try again.</p>",
                    kind="warn",
                )
                return html_response(page, 429, {"Retry-After": str(int(GLOBAL_FAILURES_WINDOW_S))})
            case Verdict.BAD_FORM:
                return self._refused(stale_form())
            case Verdict.NOT_GRANTABLE:
                assert setup is not None
                return self._not_grantable(setup)
            case Verdict.NOT_PENDING:
                if setup is None:
                    return self._not_found()
                page = self._render.status_page(setup, self._describe(setup), self._clock())
                return html_response(page, 409)


def build_page_app(
    *,
    store: SetupStore,
    policy: SetupPolicy,
    state_dir: Path,
    grantable: Callable[[Setup], bool],
    on_decided: Callable[[Setup], Awaitable[None]],
    describe: Callable[[Setup], PageFacts] | None = None,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """The setup page as an ASGI app: ``GET``/``POST /setup/{id}``, everything else 404/405.

    ``grantable`` is called (in a worker thread) before the form is shown and again by the
    store inside the approving transaction. ``on_decided`` is awaited after a setup is
    approved or denied on the page (not after a wrong code, a lock or a refusal). ``clock``
    only affects displayed times ("in 9 minutes"); expiry itself is the store's clock.
    """
    page = _Page(
        store=store,
        policy=policy,
        state_dir=state_dir,
        grantable=grantable,
        on_decided=on_decided,
        describe=describe or default_facts,
        clock=clock,
    )
    render = page._render

    async def endpoint(request: Request) -> Response:
        if request.method == "POST":
            return await page.post(request)
        return await page.get(request)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        if status == 405:
            body = render.message(
                "Method not allowed", "<p>This address accepts only the setup form.</p>"
            )
            return html_response(body, 405, {"Allow": "GET, HEAD, POST"})
        if status == 404:
            return page._not_found()
        body = render.message("Something went wrong", "<p>Nothing was changed.</p>")
        return html_response(body, status)

    async def store_busy(request: Request, exc: Exception) -> Response:
        # Another process holds the store's lock past LOCK_TIMEOUT_S, or the store (or the
        # audit log an approval writes first) is unreachable: the transaction did not run, so
        # nothing was decided and the form's token is still unused.
        log.warning("setup page: %s", exc)
        body = render.message(
            "Busy, try again",
            "<p>Nothing was granted or refused: the setup store is busy or unreachable right "
            "now. Submit the form again in a few seconds.</p>",
            kind="warn",
        )
        return html_response(body, 503, {"Retry-After": str(BUSY_RETRY_AFTER_S)})

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("setup page failed", exc_info=exc)
        body = render.message(
            "Something went wrong",
            "<p>The setup page failed. Nothing was changed. Reload the page; the server's "
            "error output has the details.</p>",
        )
        return html_response(body, 500)

    return Starlette(
        routes=[Route("/setup/{setup_id}", endpoint, methods=["GET", "POST"])],
        middleware=[Middleware(SecurityHeaders, policy=policy, render=render)],
        exception_handlers={
            HTTPException: http_error,
            SetupStoreBusy: store_busy,
            Exception: server_error,
        },
    )
