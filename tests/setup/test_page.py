"""The setup page end to end: real uvicorn on a loopback port, real HTTP requests.

Every refusal is checked for what it must not do: store a grant, decide the setup, call
on_decided, or (before the store is asked) consume the form token.
"""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from fsnotes.security.grants import Access
from fsnotes.setup.page import MAX_BODY_BYTES, PageFacts
from fsnotes.setup.store import (
    GLOBAL_FAILURES_MAX,
    MAX_CODE_ATTEMPTS,
    SetupStatus,
)
from setup.conftest import Browser, LivePage, Response

pytestmark = pytest.mark.timeout(60)

WRONG_CODE = "ZZZZ-ZZZZ-ZZZZ-ZZZZ"
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def assert_nothing_decided(page: LivePage, setup_id: str) -> None:
    assert page.store.grants() == []
    assert page.decided.setups == []
    setup = page.store.get(setup_id)
    assert setup is not None and setup.status is SetupStatus.PENDING


def assert_secure(response: Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert response.header(name) == value, (name, response.status)
    csp = response.header("Content-Security-Policy") or ""
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["form-action"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert re.fullmatch(r"'sha256-[A-Za-z0-9+/]{43}='", directives["style-src"])
    assert "script" not in csp
    assert "<script" not in response.text.lower()
    assert response.header("Content-Type") == "text/html; charset=utf-8"


def opened(page: LivePage, **start: object) -> tuple[Browser, str, str]:
    """A browser that loaded the form of a new setup: (browser, setup id, form token)."""
    setup = page.start_setup(**start)  # type: ignore[arg-type]
    browser = page.browser()
    shown = browser.get(setup.id)
    assert shown.status == 200
    assert shown.token is not None
    return browser, setup.id, shown.token


# --- the pending page ----------------------------------------------------------------------


def test_pending_page_shows_who_what_folder_access_expiry_and_where_the_code_is(
    live_page: LivePage,
) -> None:
    setup = live_page.start_setup(principal="claude-desktop", folder="work journal")
    shown = live_page.browser().get(setup.id)
    assert shown.status == 200
    text = shown.text.replace("<wbr>", "")  # line-break hints after slashes copy as nothing
    assert "AI assistant" in text
    assert "<code>claude-desktop</code>" in text
    assert str(live_page.notes / "work journal") in text
    assert "file://" + str(live_page.notes) + "/work%20journal" in text
    assert "Read and write" in text and "create, edit and move" in text
    assert "Expires" in text and "(in 10 minutes)" in text
    assert str(live_page.state_dir / "setup-code") in text and "stderr" in text
    assert 'value="approve"' in text and 'value="deny"' in text
    assert f'action="/setup/{setup.id}"' in text


def test_form_cookie_is_httponly_samesite_strict_scoped_to_setup_pages(
    live_page: LivePage,
) -> None:
    setup = live_page.start_setup()
    (cookie,) = live_page.browser().get(setup.id).set_cookies
    attributes = [a.strip().lower() for a in cookie.split(";")[1:]]
    assert "httponly" in attributes
    assert "samesite=strict" in attributes
    assert "path=/setup/" in attributes
    assert "secure" not in attributes  # http on the loopback address: Secure would drop it


@pytest.mark.parametrize(
    ("access", "words"),
    [
        (Access.READ, "see and search the notes"),
        (Access.WRITE, "also create, edit and move them"),
        (Access.DELETE, "also delete them"),
    ],
)
def test_each_access_level_is_explained_in_one_line(
    live_page: LivePage, access: Access, words: str
) -> None:
    setup = live_page.start_setup(access=access)
    assert words in live_page.browser().get(setup.id).text


def test_interpolated_values_are_html_escaped(live_page: LivePage) -> None:
    setup = live_page.start_setup(principal="<script>alert(1)</script>", folder='a"b&<i>c')
    text = live_page.browser().get(setup.id).text
    assert "<script>" not in text and "<i>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "a&quot;b&amp;&lt;i&gt;c" in text


def test_head_issues_no_form_token(live_page: LivePage) -> None:
    setup = live_page.start_setup()
    head = live_page.request("HEAD", f"/setup/{setup.id}")
    assert head.status == 200 and head.set_cookies == []
    assert live_page.request("HEAD", "/setup/" + "A" * 24).status == 404


def test_unknown_or_malformed_setup_id_is_a_404_page(live_page: LivePage) -> None:
    for path in ("/setup/" + "A" * 24, "/setup/%3Cx%3E", "/setup/", "/", "/favicon.ico"):
        response = live_page.request("GET", path)
        assert response.status == 404, path
        assert_secure(response)


# --- approve, deny, wrong codes -------------------------------------------------------------


def test_approve_with_the_right_code_stores_the_grant_and_notifies_once(
    live_page: LivePage,
) -> None:
    browser, setup_id, token = opened(live_page)
    # The code as a person might type it: lower case, spaces instead of dashes.
    typed = live_page.code.lower().replace("-", " ")
    done = browser.post(setup_id, csrf=token, code=typed)
    assert done.status == 200
    assert "Access granted" in done.text
    (grant,) = live_page.store.grants()
    assert (grant.principal, grant.path, grant.access, grant.source) == (
        "assistant",
        str(live_page.notes / "journal"),
        Access.WRITE,
        "page",
    )
    assert [s.id for s in live_page.decided.setups] == [setup_id]
    assert live_page.decided.setups[0].status is SetupStatus.APPROVED
    again = browser.get(setup_id)
    assert again.status == 200 and "Access granted" in again.text and again.token is None


def test_wrong_code_counts_down_shows_a_fresh_form_and_stores_nothing(
    live_page: LivePage,
) -> None:
    browser, setup_id, token = opened(live_page)
    first = browser.post(setup_id, csrf=token, code=WRONG_CODE)
    assert first.status == 400
    assert f"{MAX_CODE_ATTEMPTS - 1} attempts left" in first.text
    assert first.token is not None and first.token != token
    second = browser.post(setup_id, csrf=first.token, code="")
    assert f"{MAX_CODE_ATTEMPTS - 2} attempts left" in second.text
    assert_nothing_decided(live_page, setup_id)
    # The fresh form still works with the right code.
    assert browser.post(setup_id, csrf=second.token, code=live_page.code).status == 200
    assert len(live_page.store.grants()) == 1


def test_the_last_wrong_code_locks_the_setup_and_the_right_code_no_longer_helps(
    live_page: LivePage,
) -> None:
    browser, setup_id, token = opened(live_page)
    for attempt in range(1, MAX_CODE_ATTEMPTS):
        response = browser.post(setup_id, csrf=token, code=WRONG_CODE)
        assert response.status == 400, attempt
        token = response.token or ""
    locked = browser.post(setup_id, csrf=token, code=WRONG_CODE)
    assert locked.status == 403
    assert "Locked after too many wrong codes" in locked.text and locked.token is None
    shown = browser.get(setup_id)
    assert "Locked" in shown.text and shown.token is None
    refused = browser.post(setup_id, csrf=token, code=live_page.code)
    assert refused.status == 403 and "Locked" in refused.text
    assert live_page.store.grants() == [] and live_page.decided.setups == []
    assert live_page.store.get(setup_id).status is SetupStatus.LOCKED  # type: ignore[union-attr]


def test_many_wrong_codes_across_setups_rate_limit_even_the_right_code(
    live_page: LivePage,
) -> None:
    failures = 0
    n = 0
    while failures < GLOBAL_FAILURES_MAX:
        browser, setup_id, token = opened(live_page, principal=f"guesser-{n}")
        n += 1
        for _ in range(min(MAX_CODE_ATTEMPTS, GLOBAL_FAILURES_MAX - failures)):
            response = browser.post(setup_id, csrf=token, code=WRONG_CODE)
            failures += 1
            token = response.token or ""
    browser, setup_id, token = opened(live_page, principal="person")
    limited = browser.post(setup_id, csrf=token, code=live_page.code)
    assert limited.status == 429
    assert limited.header("Retry-After") is not None
    assert "Too many wrong codes" in limited.text
    assert_nothing_decided(live_page, setup_id)


def test_deny_records_a_refusal_without_the_code(live_page: LivePage) -> None:
    browser, setup_id, token = opened(live_page)
    denied = browser.post(setup_id, csrf=token, action="deny", code="")
    assert denied.status == 200 and "Request refused" in denied.text
    assert live_page.store.grants() == []
    assert [s.status for s in live_page.decided.setups] == [SetupStatus.DENIED]
    assert live_page.store.get(setup_id).status is SetupStatus.DENIED  # type: ignore[union-attr]
    assert live_page.grantable_calls == 1  # only for showing the form: a refusal needs no policy


def test_expired_setup_cannot_be_approved_and_says_so(live_page: LivePage) -> None:
    browser, setup_id, token = opened(live_page, lifetime=60.0)
    live_page.clock.advance(61.0)
    late = browser.post(setup_id, csrf=token, code=live_page.code)
    assert late.status == 409 and "Request expired" in late.text
    assert live_page.store.grants() == [] and live_page.decided.setups == []
    shown = browser.get(setup_id)
    assert shown.status == 200 and "Request expired" in shown.text and shown.token is None


def test_setup_cancelled_in_the_host_shows_cancelled_and_refuses(live_page: LivePage) -> None:
    browser, setup_id, token = opened(live_page)
    live_page.store.cancel(setup_id, "assistant")
    refused = browser.post(setup_id, csrf=token, code=live_page.code)
    assert refused.status == 409 and "Request cancelled" in refused.text
    assert live_page.store.grants() == []


def test_grant_outside_the_allowlist_shows_no_form_and_stores_nothing(live_page: LivePage) -> None:
    live_page.allowed = False
    setup = live_page.start_setup()
    browser = live_page.browser()
    shown = browser.get(setup.id)
    assert shown.status == 403 and "cannot be granted" in shown.text and shown.token is None
    assert_nothing_decided(live_page, setup.id)


def test_policy_narrowed_after_the_form_was_shown_refuses_at_approval(
    live_page: LivePage,
) -> None:
    browser, setup_id, token = opened(live_page)
    live_page.allowed = False
    refused = browser.post(setup_id, csrf=token, code=live_page.code)
    assert refused.status == 403 and "cannot be granted" in refused.text
    assert_nothing_decided(live_page, setup_id)


# --- forged, replayed and foreign requests -------------------------------------------------


def test_replayed_form_is_refused(live_page: LivePage) -> None:
    browser, setup_id, token = opened(live_page)
    assert browser.post(setup_id, csrf=token, code=WRONG_CODE).status == 400
    replay = browser.post(setup_id, csrf=token, code=live_page.code)
    assert replay.status == 403
    assert "already used or has expired" in replay.text and "Reload" in replay.text
    assert_nothing_decided(live_page, setup_id)


def test_form_token_of_another_setup_is_refused(live_page: LivePage) -> None:
    browser, first_id, first_token = opened(live_page, folder="one")
    second = live_page.start_setup(folder="two")
    # The cookie for the second setup, then the first setup's token sent to it.
    browser.get(second.id)
    refused = browser.post(second.id, csrf=first_token, code=live_page.code)
    assert refused.status == 403
    assert_nothing_decided(live_page, second.id)
    assert_nothing_decided(live_page, first_id)


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "localhost:{port}", "127.0.0.1", "127.0.0.1:1", "[::1]:{port}", ""],
)
def test_foreign_host_header_is_refused_on_get_and_post_and_changes_nothing(
    live_page: LivePage, host: str
) -> None:
    browser, setup_id, token = opened(live_page)
    foreign = {"Host": host.format(port=live_page.port)}
    got = live_page.request("GET", f"/setup/{setup_id}", headers=foreign)
    assert got.status == 421 and got.token is None and got.set_cookies == []
    assert_secure(got)
    posted = browser.post(setup_id, csrf=token, code=live_page.code, headers=foreign)
    assert posted.status == 421
    assert_nothing_decided(live_page, setup_id)
    # Refused before the store: the form token was not consumed.
    assert browser.post(setup_id, csrf=token, code=live_page.code).status == 200


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": None}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": "http://localhost:{port}"}, 403),
        ({"Origin": "https://127.0.0.1:{port}"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),
        ({"Content-Type": "text/plain"}, 415),
        ({"Content-Type": "multipart/form-data; boundary=x"}, 415),
        ({"Content-Type": None}, 415),
        ({"Cookie": None}, 403),
    ],
)
def test_cross_site_or_non_form_post_is_refused_and_changes_nothing(
    live_page: LivePage, headers: dict[str, str | None], status: int
) -> None:
    browser, setup_id, token = opened(live_page)
    sent = {k: v if v is None else v.format(port=live_page.port) for k, v in headers.items()}
    refused = browser.post(setup_id, csrf=token, code=live_page.code, headers=sent)  # type: ignore[arg-type]
    assert refused.status == status
    assert_secure(refused)
    assert_nothing_decided(live_page, setup_id)
    assert browser.post(setup_id, csrf=token, code=live_page.code).status == 200


def test_post_without_the_form_cookie_says_why(live_page: LivePage) -> None:
    browser, setup_id, token = opened(live_page)
    browser.cookies.clear()
    refused = browser.post(setup_id, csrf=token, code=live_page.code)
    assert refused.status == 403 and "allow cookies" in refused.text
    assert_nothing_decided(live_page, setup_id)


def test_cookie_from_another_form_does_not_match(live_page: LivePage) -> None:
    browser, setup_id, token = opened(live_page)
    other = live_page.browser()
    other_token = other.get(setup_id).token
    # This browser's cookie with the other browser's token (and the reverse).
    assert browser.post(setup_id, csrf=other_token, code=live_page.code).status == 403
    assert other.post(setup_id, csrf=token, code=live_page.code).status == 403
    assert_nothing_decided(live_page, setup_id)


def test_oversized_body_is_refused_before_it_is_parsed(live_page: LivePage) -> None:
    browser, setup_id, token = opened(live_page)
    body = f"csrf={token}&action=approve&code={live_page.code}&pad=".encode()
    body += b"x" * (MAX_BODY_BYTES + 1 - len(body))
    refused = browser.post(setup_id, csrf=token, body=body)
    assert refused.status == 413
    assert_nothing_decided(live_page, setup_id)


@pytest.mark.parametrize(
    "body",
    [
        "csrf={token}&csrf={token}&action=approve&code={code}",
        "csrf={token}&action=grant&code={code}",
        "action=approve&code={code}",
        "csrf={token}&action=approve&code=%FF%FE",
        "csrf={token}&action=approve&code=\xe9",
    ],
)
def test_malformed_form_is_refused_and_changes_nothing(live_page: LivePage, body: str) -> None:
    browser, setup_id, token = opened(live_page)
    raw = body.format(token=token, code=live_page.code).encode("latin-1")
    refused = browser.post(setup_id, csrf=token, body=raw)
    assert refused.status == 400
    assert_nothing_decided(live_page, setup_id)


# --- headers on every response ---------------------------------------------------------------


def test_every_response_carries_the_security_headers(live_page: LivePage) -> None:
    browser, setup_id, token = opened(live_page)
    responses = [
        browser.get(setup_id),
        live_page.request("HEAD", f"/setup/{setup_id}"),
        live_page.request("GET", "/nope"),
        live_page.request("PUT", f"/setup/{setup_id}", body=b""),
        live_page.request("DELETE", f"/setup/{setup_id}"),
        live_page.request("GET", "/", headers={"Host": "evil.example"}),
        browser.post(setup_id, csrf=token, code="", headers={"Origin": "http://evil.example"}),
        browser.post(setup_id, csrf="forged", code=""),
    ]
    statuses = []
    for response in responses:
        if response.text or response.status != 200:  # HEAD has no body to check
            statuses.append(response.status)
        for name, value in SECURITY_HEADERS.items():
            assert response.header(name) == value, (name, response.status)
        assert response.header("Content-Security-Policy"), response.status
    assert live_page.request("PUT", f"/setup/{setup_id}", body=b"").header("Allow") is not None
    assert sorted(set(statuses)) == [200, 403, 404, 405, 421]
    for response in responses:
        if response.text:
            assert_secure(response)


def test_csp_hash_matches_the_inline_stylesheet_and_nothing_else_is_inline(
    live_page: LivePage,
) -> None:
    _, setup_id, _ = opened(live_page)
    response = live_page.browser().get(setup_id)
    (style,) = re.findall(r"<style>(.*?)</style>", response.text, re.S)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in (response.header("Content-Security-Policy") or "")
    # Inline style attributes would need 'unsafe-hashes'; the page has none, nor scripts,
    # nor any URL that would load something.
    assert " style=" not in response.text
    assert "src=" not in response.text and "<link" not in response.text
    assert "http://" not in response.text.replace(live_page.origin, "")


# --- what the person is shown ----------------------------------------------------------------


def test_page_shows_hidden_characters_in_principal_folder_and_client_escaped(
    live_page: LivePage,
) -> None:
    # The page is where a person approves what they read: nothing on it may draw as something
    # else (security.shown). The store takes any strings; the page does not trust them.
    setup = live_page.start_setup(principal="ada\u200b", folder="jour\u202elan")
    live_page.facts = lambda s: PageFacts(folder_uri=None, client="Claude\u2066 Desktop\u0007")
    browser = live_page.browser()
    pending = browser.get(setup.id)
    decided = browser.post(setup.id, csrf=pending.token, action="approve", code=live_page.code)
    assert (pending.status, decided.status) == (200, 200)
    for response in (pending, decided):
        text = response.text.replace("<wbr>", "")
        for ch in ("\u200b", "\u202e", "\u2066", "\u0007"):
            assert ch not in text, (ch, response.status)
        assert "ada\\u200b" in text and "/jour\\u202elan" in text
    assert "Claude\\u2066 Desktop\\u0007" in pending.text


def test_a_busy_store_at_submit_says_so_keeps_the_form_usable_and_grants_nothing(
    live_page: LivePage,
) -> None:
    from fsnotes.setup import store as st
    from tests.e2e.state_helpers import held

    browser, setup_id, token = opened(live_page)
    # Another process holds the setup database's write lock past the store's lock timeout
    # (a stuck `fsnotes grant`, a backup tool).
    with held(live_page.state_dir / st.DB_NAME, "immediate"):
        busy = browser.post(setup_id, csrf=token, code=live_page.code)
    assert busy.status == 503, (busy.status, busy.text)
    assert "busy" in busy.text and "Nothing was granted" in busy.text
    assert busy.header("Retry-After") is not None
    assert_secure(busy)
    assert_nothing_decided(live_page, setup_id)
    # The same form, submitted again once the store is free, is decided normally.
    done = browser.post(setup_id, csrf=token, code=live_page.code)
    assert done.status == 200 and "Access granted" in done.text
    assert len(live_page.store.grants()) == 1
