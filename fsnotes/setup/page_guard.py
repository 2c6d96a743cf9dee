"""The setup page's request guards: what a request must carry before anything is done for it.

The page is the only place where a principal's scope can widen at run time, so it trusts
nothing the model or another web page could send (:mod:`fsnotes.setup.page` has the whole
picture). Checked here, before any store call:

- every request must carry ``Host: 127.0.0.1:<port>`` exactly (DNS rebinding: a foreign
  name resolving to 127.0.0.1 gets 421 and no page, so no form token leaks to it), and
  every response gets the security headers (:class:`SecurityHeaders`, the outer layer);
- a POST must come from this page: ``Origin`` present and equal to the page's origin,
  ``Sec-Fetch-Site`` (when the browser sends it) ``same-origin``, a form content type, a
  small body, exactly our fields, and a cookie bound to the form token by an HMAC under a
  key that lives only in this process (SameSite Strict, so a cross-site request never
  carries it) (:class:`FormGuard`). The token itself is one-use: the store consumes it
  whatever the outcome.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fsnotes.setup.page_render import SECURITY_HEADERS, Renderer, esc, html_response
from fsnotes.setup.policy import PAGE_HOST, SetupPolicy
from fsnotes.setup.store import CSRF_LIFETIME_S

# A form carries a 43-character token, a code of at most code.MAX_INPUT_CHARS and a short
# action: a few hundred bytes. 4 KiB leaves room for encoding and refuses anything else
# before it is parsed.
MAX_BODY_BYTES = 4096
# The form has three fields; a body with more is not our form (parse_qsl stops there).
MAX_FORM_FIELDS = 8
# Setup ids are secrets.token_urlsafe output (24 characters today); anything else in the
# path is not an id and never reaches the store.
SETUP_ID_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
COOKIE_PREFIX = "fsnotes_form_"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
# The HMAC-SHA256 key that binds a form token to its cookie: 32 random bytes, the hash's
# output size (RFC 2104 recommends at least that).
_KEY_BYTES = 32


class Refused(Exception):
    """A request refused before the store was asked: status and page text."""

    def __init__(self, status: int, heading: str, text: str) -> None:
        super().__init__(heading)
        self.status = status
        self.heading = heading
        self.text = text


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def host_ok(host: str | None, policy: SetupPolicy) -> bool:
    if host is None:
        return False
    if host == policy.host_header:
        return True
    # A browser omits the default port from Host (RFC 9110, 7.2).
    return policy.port == 80 and host == PAGE_HOST


def origin_ok(origin: str | None, policy: SetupPolicy) -> bool:
    if origin is None:
        return False
    if origin == policy.origin:
        return True
    # The serialised origin omits the default port too (RFC 6454, 6.1).
    return policy.port == 80 and origin == f"http://{PAGE_HOST}"


class SecurityHeaders:
    """Outer ASGI layer: refuse a foreign Host before routing, and stamp the security
    headers on every response start (including Starlette's own 404/405 and errors)."""

    def __init__(self, app: ASGIApp, policy: SetupPolicy, render: Renderer) -> None:
        self._app = app
        self._policy = policy
        self._render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        hosts = [v for k, v in scope.get("headers", []) if k == b"host"]
        host = hosts[0].decode("latin-1") if len(hosts) == 1 else None
        if not host_ok(host, self._policy):
            # DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1
            # reaches us with its own name in Host. Answer before anything is read or issued.
            page = self._render.message(
                "Wrong address",
                "<p>This page answers only at "
                f"<code>{esc(self._policy.origin)}</code>. Open the link the assistant's app "
                "showed you, exactly as it is.</p>",
            )
            await html_response(page, 421)(scope, receive, send)
            return

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.decode("latin-1").lower() not in _LOWER_SECURITY
                ]
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, stamped)


_LOWER_SECURITY = {k.lower() for k in SECURITY_HEADERS}


class FormGuard:
    """The checks of a POST, in the order the page's POST route runs them, and the form
    cookie they verify; one per page app (it holds the HMAC key)."""

    def __init__(self, policy: SetupPolicy) -> None:
        self._policy = policy
        # Binds a form token to the browser that loaded the form; lives only in this
        # process, so a restarted page refuses older forms (the person reloads).
        self._key = secrets.token_bytes(_KEY_BYTES)

    # --- CSRF cookie ---------------------------------------------------------------------

    def _mac(self, setup_id: str, token: str) -> str:
        msg = f"{setup_id}\0{token}".encode()
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()

    @staticmethod
    def _cookie_name(setup_id: str) -> str:
        # One cookie per setup, so two tabs for two setups do not overwrite each other.
        return COOKIE_PREFIX + setup_id

    def with_form_cookie(self, response: Response, setup_id: str, token: str) -> Response:
        response.set_cookie(
            self._cookie_name(setup_id),
            self._mac(setup_id, token),
            max_age=int(CSRF_LIFETIME_S),
            path="/setup/",
            httponly=True,
            samesite="strict",
            secure=False,  # plain http on the loopback address; Secure would drop it
        )
        return response

    # --- POST checks, in order -----------------------------------------------------------

    def check_sender(self, request: Request) -> None:
        origin = request.headers.getlist("origin")
        if len(origin) != 1 or not origin_ok(origin[0], self._policy):
            raise Refused(
                403,
                "Refused: not sent from this page",
                "<p>This form can only be sent from the setup page itself (the browser did not "
                "say so). Nothing was changed. Open the setup link directly and try again.</p>",
            )
        site = request.headers.getlist("sec-fetch-site")
        if site and site != ["same-origin"]:
            raise Refused(
                403,
                "Refused: sent from another site",
                "<p>Your browser reports that this form was sent from another site. Nothing "
                "was changed. Open the setup link directly and try again.</p>",
            )
        if media_type(request.headers.get("content-type", "")) != FORM_CONTENT_TYPE:
            raise Refused(
                415,
                "Refused: not a form",
                "<p>This address accepts only the setup form. Nothing was changed.</p>",
            )

    async def read_form(self, request: Request) -> dict[str, str]:
        too_large = Refused(
            413, "Refused: too large", "<p>That is not the setup form. Nothing was changed.</p>"
        )
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
            raise too_large
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise too_large
        malformed = Refused(
            400,
            "Refused: malformed form",
            "<p>The form could not be read. Nothing was changed.</p>",
        )
        try:
            pairs = parse_qsl(
                bytes(body).decode("ascii"),
                keep_blank_values=True,
                strict_parsing=False,
                encoding="utf-8",
                errors="strict",
                max_num_fields=MAX_FORM_FIELDS,
            )
        except (UnicodeDecodeError, ValueError):
            raise malformed from None
        form: dict[str, str] = {}
        for key, value in pairs:
            if key in form:  # two values for one field: ambiguous, so not our form
                raise malformed
            form[key] = value
        return form

    @staticmethod
    def fields(form: dict[str, str]) -> tuple[str, str, bool]:
        action = form.get("action")
        token = form.get("csrf", "")
        if action not in ("approve", "deny") or not token:
            raise Refused(
                400,
                "Refused: malformed form",
                "<p>The form could not be read. Nothing was changed. Reload the page.</p>",
            )
        return token, form.get("code", ""), action == "approve"

    def check_cookie(self, request: Request, setup_id: str, token: str) -> None:
        cookie = request.cookies.get(self._cookie_name(setup_id), "")
        if not hmac.compare_digest(cookie.encode(), self._mac(setup_id, token).encode()):
            raise stale_form(cookie_missing=not cookie)


def stale_form(*, cookie_missing: bool = False) -> Refused:
    hint = (
        " If this keeps happening, allow cookies for 127.0.0.1: the page uses one to make "
        "sure the form was filled in here."
        if cookie_missing
        else ""
    )
    return Refused(
        403,
        "This form was already used or has expired",
        "<p>Nothing was changed. Reload the page to get a fresh form, then try again."
        f"{esc(hint)}</p>",
    )
