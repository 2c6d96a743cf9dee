"""The setup page's HTML: the stylesheet, the security headers bound to it, and every page.

Pure rendering for :mod:`fsnotes.setup.page`: functions of their arguments, no request, no
store. Every interpolated value is HTML-escaped (:func:`esc`), and every value the person
must judge (principal, folder, client, file path) is first rendered by
:func:`fsnotes.security.shown.shown`, so invisible and direction-changing characters show as
visible escapes instead of drawing as something else.

The one inline stylesheet is allowed by its hash in the Content-Security-Policy (no script,
no external resource), which is why the headers live here beside it. ``Referrer-Policy`` is
``same-origin``, not ``no-referrer``: under ``no-referrer`` browsers send ``Origin: null``
on form POSTs (Fetch standard, "append a request Origin header"; seen with Chromium 156),
which would make the Origin check refuse every real submit. Nothing leaves the page for
another origin, and the page URL carries no secret anyway.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
from dataclasses import dataclass
from pathlib import Path

from starlette.responses import HTMLResponse

from fsnotes.security.grants import Access
from fsnotes.security.shown import shown
from fsnotes.setup import code as setup_code
from fsnotes.setup.policy import SetupPolicy
from fsnotes.setup.store import Setup, SetupStatus
from sandbox import uri as lexical
from sandbox.errors import SandboxError

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


def esc(value: object) -> str:
    """``value`` as text, escaped for HTML content and quoted attributes."""
    return html.escape(str(value), quote=True)


def _shown(value: str) -> str:
    """A value the person must judge, as it is (hidden characters escaped), for HTML."""
    return esc(shown(value))


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
    return "/<wbr>".join(esc(part) for part in shown(path).split("/"))


def _access_html(access: Access) -> str:
    name, meaning = ACCESS_MEANING[access]
    return (
        f'<span class="level">{esc(name)}</span>'
        f'<span class="sub">The assistant can {esc(meaning)}.</span>'
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


class Renderer:
    """HTML for every page; pure functions of their arguments."""

    def __init__(self, policy: SetupPolicy, state_dir: Path) -> None:
        self._policy = policy
        self._code_path = str(state_dir / setup_code.CODE_FILE)

    def document(self, title: str, body: str) -> str:
        return (
            "<!doctype html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)} · fsnotes</title><style>{_STYLE}</style></head><body><main>"
            '<div class="top"><b>fsnotes</b><span>setup page</span>'
            f'<span class="where">{esc(self._policy.host_header)}</span></div>'
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
            rows.append(("Expires", esc(_when(setup.expires, now))))
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
            f'<form method="post" action="/setup/{esc(setup.id)}">'
            f'<input type="hidden" name="csrf" value="{esc(token)}">'
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
                    f"<p><code>{_shown(setup.principal)}</code> can now {esc(access)}. "
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
                    f"<p>This request expired at {esc(_when(setup.expires, now))}. Nothing was "
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
            f"<div><h1>{esc(heading)}</h1>{text}</div></div>{extra}"
        )
        return self.document(heading, body)


def html_response(content: str, status: int, headers: dict[str, str] | None = None) -> HTMLResponse:
    """An HTML response carrying :data:`SECURITY_HEADERS`."""
    response = HTMLResponse(content, status_code=status, headers=headers)
    response.headers.update(SECURITY_HEADERS)
    return response
