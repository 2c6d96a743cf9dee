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

``Referrer-Policy`` is ``same-origin``, not ``no-referrer``: under ``no-referrer`` browsers
send ``Origin: null`` on form POSTs (Fetch standard, "append a request Origin header"; seen
with Chromium 156), which would make the Origin check refuse every real submit. Nothing
leaves the page for another origin, and the page URL carries no secret anyway.

Starlette is an optional runtime extra: import this module only when the page runs.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import hmac
import html
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sandbox import uri as lexical
from sandbox.errors import SandboxError

from ..security.grants import Access
from ..security.shown import shown
from . import code as setup_code
from .policy import PAGE_HOST, SetupPolicy
from .store import (
    CSRF_LIFETIME_S,
    GLOBAL_FAILURES_WINDOW_S,
    Setup,
    SetupStatus,
    SetupStore,
    Verdict,
)

log = logging.getLogger(__name__)

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
# Under the store's per-setup budget: show how many tries remain, never the budget's value.
_KEY_BYTES = 32

# (name, what the assistant can then do: completes "The assistant can ...")
ACCESS_MEANING = {
    Access.READ: ("Read only", "see and search the notes in this folder"),
    Access.WRITE: (
        "Read and write",
        "see the notes in this folder, and also create, edit and move them",
    ),
    Access.DELETE: (
        "Read, write and delete",
        "see, create, edit and move the notes in this folder, and also delete them",
    ),
}

_STYLE = """
:root{--bg:#eef1f5;--card:#fff;--ink:#1b1f24;--muted:#59636e;--line:#d5dbe2;
--soft:#f6f8fa;--ok:#1a7f37;--ok-ink:#fff;--no:#b42318;--no-ink:#fff;--warn:#9a6700;
--warn-bg:#fff8c5;--err-bg:#ffebe9;--ok-bg:#dafbe1;--focus:#0969da}
*{box-sizing:border-box}
html{background:var(--bg)}
body{margin:0;padding:32px 16px;color:var(--ink);font:16px/1.5 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","DejaVu Sans",sans-serif}
main{max-width:680px;margin:0 auto;background:var(--card);border:1px solid var(--line);
border-radius:12px;box-shadow:0 1px 3px rgba(27,31,36,.08),0 8px 24px rgba(27,31,36,.06);
overflow:hidden}
.top{display:flex;align-items:center;gap:10px;padding:14px 28px;background:var(--soft);
border-bottom:1px solid var(--line);font-size:14px;color:var(--muted)}
.top b{color:var(--ink);font-weight:650;letter-spacing:.01em}
.top .where{margin-left:auto;font-family:ui-monospace,"DejaVu Sans Mono",monospace;
font-size:13px}
.body{padding:24px 28px 28px}
h1{font-size:24px;line-height:1.25;margin:0 0 10px;font-weight:700}
p{margin:0 0 14px}
.lead{font-size:17px}
.note{color:var(--muted);font-size:14px}
dl{margin:20px 0 22px;border:1px solid var(--line);border-radius:8px}
dl:last-child{margin-bottom:0}
dl>div{display:grid;grid-template-columns:120px 1fr;gap:12px;padding:12px 16px;
border-top:1px solid var(--line)}
dl>div:first-child{border-top:0}
dt{color:var(--muted);font-size:14px;padding-top:1px}
dd{margin:0;min-width:0}
code,.mono{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,monospace;
font-size:14.5px;overflow-wrap:anywhere}
dd code.path{display:block;font-weight:600}
dd .sub{display:block;color:var(--muted);font-size:13.5px;overflow-wrap:anywhere}
.level{font-weight:650}
label{display:block;font-weight:650;margin:0 0 6px}
input[type=text]{width:100%;padding:10px 12px;font:600 18px/1.3 ui-monospace,
"DejaVu Sans Mono",monospace;letter-spacing:.08em;border:1px solid #8c959f;
border-radius:6px;background:#fff;color:var(--ink)}
input[type=text]:focus,button:focus-visible{outline:3px solid var(--focus);
outline-offset:2px}
.help{color:var(--muted);font-size:14px;margin:8px 0 20px}
.help p{margin:0 0 6px}
.help code.file{display:block;color:var(--ink);background:var(--soft);
border:1px solid var(--line);border-radius:6px;padding:6px 10px;margin:0 0 6px;
font-size:13.5px}
.actions{display:grid;grid-template-columns:1fr 1fr;gap:12px}
button{font-family:inherit;font-size:16px;font-weight:650;line-height:1.2;
padding:13px 16px;border-radius:8px;border:2px solid transparent;cursor:pointer}
.approve{background:var(--ok);color:var(--ok-ink)}
.deny{background:var(--no);color:var(--no-ink)}
.approve:hover{background:#116329}
.deny:hover{background:#8f1c13}
.alert{border-radius:8px;padding:12px 14px;margin:0 0 18px;font-size:15px;
border:1px solid}
.alert.error{background:var(--err-bg);border-color:#ffcecb}
.alert.warn{background:var(--warn-bg);border-color:#eed888}
.status{display:flex;gap:14px;align-items:flex-start;margin-bottom:6px}
.badge{flex:none;width:40px;height:40px;border-radius:50%;display:grid;
place-items:center;font-size:22px;font-weight:700;color:#fff}
.badge.ok{background:var(--ok)}
.badge.no{background:var(--no)}
.badge.info{background:#57606a}
.badge.warn{background:var(--warn)}
footer{padding:14px 28px;border-top:1px solid var(--line);background:var(--soft);
color:var(--muted);font-size:13px}
a{color:var(--focus)}
@media (max-width:520px){dl>div{grid-template-columns:1fr;gap:2px}
.actions{grid-template-columns:1fr}}
"""
STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
CSP = (
    f"default-src 'none'; style-src 'sha256-{STYLE_HASH}'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@dataclass(frozen=True)
class PageFacts:
    """What the page shows about a setup beyond the Setup record itself.

    ``folder_uri``: the folder's ``file://`` URI (``None`` hides the line).
    ``client``: what the host said about itself (e.g. MCP ``clientInfo`` name and version),
    shown as reported and labelled so; ``None`` hides it.
    """

    folder_uri: str | None
    client: str | None = None


def default_facts(setup: Setup) -> PageFacts:
    try:
        uri: str | None = lexical.to_file_uri(lexical.path_components(setup.path))
    except SandboxError:
        uri = None
    return PageFacts(folder_uri=uri)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _shown(value: str) -> str:
    """A value the person must judge, as it is (hidden characters escaped), for HTML."""
    return _e(shown(value))


def _when(ts: float, now: float) -> str:
    """An absolute local time and how far away it is, e.g. ``14:35 CET (in 9 minutes)``."""
    at = _dt.datetime.fromtimestamp(ts).astimezone()
    today = _dt.datetime.fromtimestamp(now).astimezone().date()
    stamp = at.strftime("%H:%M %Z") if at.date() == today else at.strftime("%Y-%m-%d %H:%M %Z")
    left = ts - now
    if left <= 0:
        return f"{stamp} (passed)"
    minutes = int(left // 60)
    rel = "in less than a minute" if minutes < 1 else f"in {minutes} minute{'s' * (minutes != 1)}"
    return f"{stamp} ({rel})"


def _path_html(path: str) -> str:
    """A path as shown, escaped, that may wrap after any slash (``<wbr>`` copies as nothing)."""
    return "/<wbr>".join(_e(part) for part in shown(path).split("/"))


def _access_html(access: Access) -> str:
    name, meaning = ACCESS_MEANING[access]
    return (
        f'<span class="level">{_e(name)}</span>'
        f'<span class="sub">The assistant can {_e(meaning)}.</span>'
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


class _Renderer:
    """HTML for every page; pure functions of their arguments."""

    def __init__(self, policy: SetupPolicy, state_dir: Path) -> None:
        self._policy = policy
        self._code_path = str(state_dir / setup_code.CODE_FILE)

    def document(self, title: str, body: str) -> str:
        return (
            "<!doctype html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)} · fsnotes</title><style>{_STYLE}</style></head><body><main>"
            '<div class="top"><b>fsnotes</b><span>setup page</span>'
            f'<span class="where">{_e(self._policy.host_header)}</span></div>'
            f'<div class="body">{body}</div>'
            "<footer>This page is served by the fsnotes server running on this computer, on the "
            "loopback address only: nothing on it is sent anywhere else.</footer>"
            "</main></body></html>\n"
        )

    def facts(self, setup: Setup, facts: PageFacts, now: float, *, expiry: bool) -> str:
        who = f"<code>{_shown(setup.principal)}</code>"
        who += '<span class="sub">its name in the fsnotes configuration</span>'
        if facts.client:
            who += f'<span class="sub">its app reports itself as {_shown(facts.client)}</span>'
        folder = f'<code class="path">{_path_html(setup.path)}</code>'
        if facts.folder_uri:
            folder += f'<span class="sub mono">{_path_html(facts.folder_uri)}</span>'
        rows = [
            ("Assistant", who),
            ("Folder", folder),
            ("Access", _access_html(setup.access)),
        ]
        if expiry:
            rows.append(("Expires", _e(_when(setup.expires, now))))
        items = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in rows)
        return f"<dl>{items}</dl>"

    def form(
        self, setup: Setup, facts: PageFacts, token: str, now: float, error: str | None
    ) -> str:
        alert = f'<div class="alert error" role="alert">{error}</div>' if error else ""
        body = (
            "<h1>Allow an AI assistant to use a notes folder?</h1>"
            '<p class="lead">An AI assistant connected to fsnotes on this computer is asking '
            "for access to a folder. Approve only if you asked it to do this; if not, "
            "choose Deny.</p>"
            f"{self.facts(setup, facts, now, expiry=True)}"
            f'<form method="post" action="/setup/{_e(setup.id)}">'
            f'<input type="hidden" name="csrf" value="{_e(token)}">'
            f"{alert}"
            '<label for="code">Setup code</label>'
            '<input type="text" id="code" name="code" required autofocus autocomplete="off" '
            'autocapitalize="characters" spellcheck="false" maxlength="64" '
            'placeholder="XXXX-XXXX-XXXX-XXXX" aria-describedby="code-help">'
            '<div class="help" id="code-help"><p>fsnotes printed it on its error output '
            "(stderr) when it started. It is also in this file, readable only by the account "
            "that runs fsnotes:</p>"
            f'<code class="file">{_path_html(self._code_path)}</code>'
            "<p>The assistant never sees this code. Deny does not need it.</p></div>"
            '<div class="actions">'
            '<button type="submit" class="approve" name="action" value="approve">'
            "Approve</button>"
            '<button type="submit" class="deny" name="action" value="deny" formnovalidate>'
            "Deny</button>"
            "</div></form>"
        )
        return self.document("Allow access to a notes folder?", body)

    def status(self, setup: Setup, now: float) -> tuple[str, str, str, str]:
        """(badge kind, glyph, heading, explanation HTML) for a setup that is not pending."""
        access = ACCESS_MEANING[setup.access][1]
        match setup.status:
            case SetupStatus.APPROVED:
                return (
                    "ok",
                    "✓",
                    "Access granted",
                    f"<p><code>{_shown(setup.principal)}</code> can now {_e(access)}. "
                    "fsnotes keeps this grant until it is removed with <code>fsnotes grant "
                    "--revoke</code>. You can close this page and go back to your "
                    "assistant.</p>",
                )
            case SetupStatus.DENIED:
                return (
                    "no",
                    "✕",
                    "Request refused",
                    "<p>You refused this request. Nothing was granted, and the assistant is "
                    "told that the request was refused. You can close this page.</p>",
                )
            case SetupStatus.CANCELLED:
                return (
                    "info",
                    "\u2013",
                    "Request cancelled",
                    "<p>This request was declined or dismissed in the assistant's app. "
                    "Nothing was granted. To connect the folder, ask the assistant again.</p>",
                )
            case SetupStatus.EXPIRED:
                return (
                    "info",
                    "⌛",
                    "Request expired",
                    f"<p>This request expired at {_e(_when(setup.expires, now))}. Nothing was "
                    "granted. To connect the folder, ask the assistant again.</p>",
                )
            case SetupStatus.LOCKED:
                return (
                    "no",
                    "!",
                    "Locked after too many wrong codes",
                    "<p>Too many wrong setup codes were entered for this request, so it can no "
                    "longer be approved. Nothing was granted. If it was you, check the code "
                    "and ask the assistant to start again; if it was not, someone may be "
                    "trying to guess the code.</p>",
                )
            case SetupStatus.PENDING:  # not a status page; kept for exhaustiveness
                return ("info", "…", "Waiting for a decision", "<p>Reload this page.</p>")

    def status_page(self, setup: Setup, facts: PageFacts, now: float) -> str:
        kind, glyph, heading, text = self.status(setup, now)
        return self.message(
            heading, text, kind=kind, glyph=glyph, extra=self.facts(setup, facts, now, expiry=False)
        )

    def message(
        self, heading: str, text: str, *, kind: str = "info", glyph: str = "!", extra: str = ""
    ) -> str:
        body = (
            f'<div class="status"><div class="badge {kind}" aria-hidden="true">{glyph}</div>'
            f"<div><h1>{_e(heading)}</h1>{text}</div></div>{extra}"
        )
        return self.document(heading, body)


class _Refused(Exception):
    """A request refused before the store was asked: status and page text."""

    def __init__(self, status: int, heading: str, text: str) -> None:
        super().__init__(heading)
        self.status = status
        self.heading = heading
        self.text = text


def _html(content: str, status: int, headers: dict[str, str] | None = None) -> HTMLResponse:
    response = HTMLResponse(content, status_code=status, headers=headers)
    response.headers.update(SECURITY_HEADERS)
    return response


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _host_ok(host: str | None, policy: SetupPolicy) -> bool:
    if host is None:
        return False
    if host == policy.host_header:
        return True
    # A browser omits the default port from Host (RFC 9110, 7.2).
    return policy.port == 80 and host == PAGE_HOST


def _origin_ok(origin: str | None, policy: SetupPolicy) -> bool:
    if origin is None:
        return False
    if origin == policy.origin:
        return True
    # The serialised origin omits the default port too (RFC 6454, 6.1).
    return policy.port == 80 and origin == f"http://{PAGE_HOST}"


class _SecurityHeaders:
    """Outer ASGI layer: refuse a foreign Host before routing, and stamp the security
    headers on every response start (including Starlette's own 404/405 and errors)."""

    def __init__(self, app: ASGIApp, policy: SetupPolicy, render: _Renderer) -> None:
        self._app = app
        self._policy = policy
        self._render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        hosts = [v for k, v in scope.get("headers", []) if k == b"host"]
        host = hosts[0].decode("latin-1") if len(hosts) == 1 else None
        if not _host_ok(host, self._policy):
            # DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1
            # reaches us with its own name in Host. Answer before anything is read or issued.
            page = self._render.message(
                "Wrong address",
                "<p>This page answers only at "
                f"<code>{_e(self._policy.origin)}</code>. Open the link the assistant's app "
                "showed you, exactly as it is.</p>",
            )
            await _html(page, 421)(scope, receive, send)
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


class _Page:
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
        self._render = _Renderer(policy, state_dir)
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

    def _with_form_cookie(self, response: Response, setup_id: str, token: str) -> Response:
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

    # --- pages ---------------------------------------------------------------------------

    async def _form_response(self, setup: Setup, status: int, error: str | None) -> Response:
        token = await anyio.to_thread.run_sync(self._store.issue_form_token, setup.id)
        if token is None:  # decided or expired since it was read
            return await self._current_status(setup.id, status=409)
        page = self._render.form(setup, self._describe(setup), token, self._clock(), error)
        return self._with_form_cookie(_html(page, status), setup.id, token)

    async def _current_status(self, setup_id: str, *, status: int) -> Response:
        setup = await anyio.to_thread.run_sync(self._store.get, setup_id)
        if setup is None:
            return self._not_found()
        if setup.status is SetupStatus.PENDING:
            return await self._form_response(setup, 200, None)
        return _html(self._render.status_page(setup, self._describe(setup), self._clock()), status)

    def _not_found(self) -> Response:
        page = self._render.message(
            "No such setup request",
            "<p>There is no setup request at this address. It may have been decided and "
            "cleaned up long ago, or the link was copied incompletely.</p>",
        )
        return _html(page, 404)

    def _not_grantable(self, setup: Setup) -> Response:
        page = self._render.message(
            "This folder cannot be granted",
            "<p>The fsnotes configuration does not allow granting this folder at this access "
            "level from the setup page, whatever is asked. Nothing was granted. The person "
            "who runs fsnotes can widen the allowed folders in its configuration.</p>",
            kind="no",
            extra=self._render.facts(setup, self._describe(setup), self._clock(), expiry=False),
        )
        return _html(page, 403)

    def _refused(self, refusal: _Refused) -> Response:
        return _html(self._render.message(refusal.heading, refusal.text), refusal.status)

    async def get(self, request: Request) -> Response:
        setup_id = request.path_params["setup_id"]
        if not SETUP_ID_RE.fullmatch(setup_id):
            return self._not_found()
        setup = await anyio.to_thread.run_sync(self._store.get, setup_id)
        if setup is None:
            return self._not_found()
        if request.method == "HEAD":
            # Headers only: no form token is issued for a body nobody will read.
            return _html("", 200)
        if setup.status is not SetupStatus.PENDING:
            return _html(self._render.status_page(setup, self._describe(setup), self._clock()), 200)
        if not await anyio.to_thread.run_sync(self._grantable, setup):
            return self._not_grantable(setup)
        return await self._form_response(setup, 200, None)

    async def post(self, request: Request) -> Response:
        setup_id = request.path_params["setup_id"]
        try:
            self._check_sender(request)
            form = await self._read_form(request)
            token, code_text, approve = self._fields(form)
            if not SETUP_ID_RE.fullmatch(setup_id):
                return self._not_found()
            self._check_cookie(request, setup_id, token)
        except _Refused as refusal:
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
                return _html(
                    self._render.status_page(setup, self._describe(setup), self._clock()), 200
                )
            case Verdict.WRONG_CODE:
                assert setup is not None
                left = setup.attempts_left
                error = (
                    "That is not the current setup code. Nothing was granted. "
                    f"{_e(_plural(left, 'attempt'))} left before this request is locked."
                )
                return await self._form_response(setup, 400, error)
            case Verdict.LOCKED:
                if setup is None:  # pragma: no cover - the store returns the locked setup
                    return self._not_found()
                page = self._render.status_page(setup, self._describe(setup), self._clock())
                return _html(page, 403)
            case Verdict.RATE_LIMITED:
                minutes = int(GLOBAL_FAILURES_WINDOW_S // 60)
                page = self._render.message(
                    "Too many wrong codes",
                    "<p>Too many wrong setup codes were entered on this computer recently, for "
                    "any request. Nothing was granted and this code was not checked. Wait up "
                    f"to {minutes} minutes, then reload this page and try again.</p>",
                    kind="warn",
                )
                return _html(page, 429, {"Retry-After": str(int(GLOBAL_FAILURES_WINDOW_S))})
            case Verdict.BAD_FORM:
                return self._refused(_stale_form())
            case Verdict.NOT_GRANTABLE:
                assert setup is not None
                return self._not_grantable(setup)
            case Verdict.NOT_PENDING:
                if setup is None:
                    return self._not_found()
                page = self._render.status_page(setup, self._describe(setup), self._clock())
                return _html(page, 409)

    # --- POST checks, in order -----------------------------------------------------------

    def _check_sender(self, request: Request) -> None:
        origin = request.headers.getlist("origin")
        if len(origin) != 1 or not _origin_ok(origin[0], self._policy):
            raise _Refused(
                403,
                "Refused: not sent from this page",
                "<p>This form can only be sent from the setup page itself (the browser did not "
                "say so). Nothing was changed. Open the setup link directly and try again.</p>",
            )
        site = request.headers.getlist("sec-fetch-site")
        if site and site != ["same-origin"]:
            raise _Refused(
                403,
                "Refused: sent from another site",
                "<p>Your browser reports that this form was sent from another site. Nothing "
                "was changed. Open the setup link directly and try again.</p>",
            )
        if _media_type(request.headers.get("content-type", "")) != FORM_CONTENT_TYPE:
            raise _Refused(
                415,
                "Refused: not a form",
                "<p>This address accepts only the setup form. Nothing was changed.</p>",
            )

    async def _read_form(self, request: Request) -> dict[str, str]:
        too_large = _Refused(
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
        malformed = _Refused(
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
    def _fields(form: dict[str, str]) -> tuple[str, str, bool]:
        action = form.get("action")
        token = form.get("csrf", "")
        if action not in ("approve", "deny") or not token:
            raise _Refused(
                400,
                "Refused: malformed form",
                "<p>The form could not be read. Nothing was changed. Reload the page.</p>",
            )
        return token, form.get("code", ""), action == "approve"

    def _check_cookie(self, request: Request, setup_id: str, token: str) -> None:
        cookie = request.cookies.get(self._cookie_name(setup_id), "")
        if not hmac.compare_digest(cookie.encode(), self._mac(setup_id, token).encode()):
            raise _stale_form(cookie_missing=not cookie)


def _stale_form(*, cookie_missing: bool = False) -> _Refused:
    hint = (
        " If this keeps happening, allow cookies for 127.0.0.1: the page uses one to make "
        "sure the form was filled in here."
        if cookie_missing
        else ""
    )
    return _Refused(
        403,
        "This form was already used or has expired",
        "<p>Nothing was changed. Reload the page to get a fresh form, then try again."
        f"{_e(hint)}</p>",
    )


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
            return _html(body, 405, {"Allow": "GET, HEAD, POST"})
        if status == 404:
            return page._not_found()
        body = render.message("Something went wrong", "<p>Nothing was changed.</p>")
        return _html(body, status)

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("setup page failed", exc_info=exc)
        body = render.message(
            "Something went wrong",
            "<p>The setup page failed. Nothing was changed. Reload the page; the server's "
            "error output has the details.</p>",
        )
        return _html(body, 500)

    return Starlette(
        routes=[Route("/setup/{setup_id}", endpoint, methods=["GET", "POST"])],
        middleware=[Middleware(_SecurityHeaders, policy=policy, render=render)],
        exception_handlers={HTTPException: http_error, Exception: server_error},
    )
