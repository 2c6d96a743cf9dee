"""A live setup page for tests: real uvicorn on a free loopback port, real HTTP.

``LivePage`` serves :func:`fsnotes.setup.page.build_page_app` through
:class:`fsnotes.setup.runner.PageRunner` (``always_on``) in a blocking portal's event loop, so
synchronous tests drive it with ``http.client`` and can set any Host, Origin or cookie.
``Browser`` keeps cookies and reads the form token from the page, like a person's browser.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path

import anyio.from_thread
import pytest

from fsnotes.security.grants import Access
from fsnotes.setup import code as setup_code
from fsnotes.setup.page import PageFacts, build_page_app, default_facts
from fsnotes.setup.policy import SetupPolicy
from fsnotes.setup.runner import PageRunner
from fsnotes.setup.store import Setup, SetupStore

HTTP_TIMEOUT_S = 10.0
TOKEN_RE = re.compile(r'<input type="hidden" name="csrf" value="([^"]+)">')


def free_port() -> int:
    """A loopback port nothing listens on right now (the kernel's pick, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeClock:
    """The store's clock, moved by hand (expiry and rate-limit windows without sleeping)."""

    def __init__(self, start: float = 1_900_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Response:
    status: int
    headers: Message
    text: str

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def set_cookies(self) -> list[str]:
        return self.headers.get_all("Set-Cookie") or []

    @property
    def token(self) -> str | None:
        found = TOKEN_RE.search(self.text)
        return found.group(1) if found else None


def http_request(
    port: int,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> Response:
    """One request on a fresh connection; ``headers`` may set Host (else 127.0.0.1:port)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        sent = {k.lower(): v for k, v in (headers or {}).items()}
        sent.setdefault("host", f"127.0.0.1:{port}")
        if body is not None:
            sent.setdefault("content-length", str(len(body)))
        for key, value in sent.items():
            conn.putheader(key, value)
        conn.endheaders(body)
        raw = conn.getresponse()
        return Response(raw.status, raw.msg, raw.read().decode("utf-8"))
    finally:
        conn.close()


@dataclass
class Decisions:
    """What on_decided saw, in order."""

    setups: list[Setup] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, setup: Setup) -> None:
        with self.lock:
            self.setups.append(setup)


class LivePage:
    """A setup page served for real, with its store, code file and clock."""

    def __init__(self, root: Path) -> None:
        self.state_dir = root / "state"
        self.state_dir.mkdir(mode=0o700)
        self.notes = root / "notes"
        self.notes.mkdir()
        self.code = setup_code.new_code()
        setup_code.write_code(self.state_dir, self.code)
        self.clock = FakeClock()
        self.store = SetupStore(self.state_dir, clock=self.clock)
        self.port = free_port()
        self.policy = SetupPolicy(allow=(str(self.notes),), port=self.port, always_on=True)
        self.allowed = True  # what grantable answers; tests flip it
        self.grantable_calls = 0
        self.decided = Decisions()
        self.facts: Callable[[Setup], PageFacts] | None = None

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def grantable(self, setup: Setup) -> bool:
        self.grantable_calls += 1
        return self.allowed

    def describe(self, setup: Setup) -> PageFacts:
        # Read at each render, so a test may set ``facts`` after the page started.
        return (self.facts or default_facts)(setup)

    def app(self) -> object:
        return build_page_app(
            store=self.store,
            policy=self.policy,
            state_dir=self.state_dir,
            grantable=self.grantable,
            on_decided=self.decided,
            describe=self.describe,
            clock=self.clock,
        )

    def start_setup(
        self,
        principal: str = "assistant",
        folder: str = "journal",
        access: Access = Access.WRITE,
        lifetime: float = 600.0,
    ) -> Setup:
        return self.store.start(principal, str(self.notes / folder), access, lifetime=lifetime)

    def request(self, method: str, path: str, **kw: object) -> Response:
        return http_request(self.port, method, path, **kw)  # type: ignore[arg-type]

    def browser(self) -> Browser:
        return Browser(self)


class Browser:
    """A same-origin browser: sends Host, Origin, Sec-Fetch-Site and its cookies."""

    def __init__(self, page: LivePage) -> None:
        self.page = page
        self.cookies: dict[str, str] = {}

    def _remember(self, response: Response) -> None:
        for line in response.set_cookies:
            name, _, rest = line.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]

    def _cookie_header(self) -> dict[str, str]:
        if not self.cookies:
            return {}
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}

    def get(self, setup_id: str) -> Response:
        response = self.page.request(
            "GET", f"/setup/{setup_id}", headers={"Sec-Fetch-Site": "none", **self._cookie_header()}
        )
        self._remember(response)
        return response

    def post(
        self,
        setup_id: str,
        *,
        csrf: str | None,
        action: str = "approve",
        code: str = "",
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> Response:
        from urllib.parse import urlencode

        fields = {"csrf": csrf, "code": code, "action": action}
        if body is None:
            body = urlencode({k: v for k, v in fields.items() if v is not None}).encode()
        sent = {
            "Origin": self.page.origin,
            "Sec-Fetch-Site": "same-origin",
            "Content-Type": "application/x-www-form-urlencoded",
            **self._cookie_header(),
        }
        for key, value in (headers or {}).items():
            sent = {k: v for k, v in sent.items() if k.lower() != key.lower()}
            if value is not None:
                sent[key] = value
        response = self.page.request("POST", f"/setup/{setup_id}", headers=sent, body=body)
        self._remember(response)
        return response


@pytest.fixture
def live_page(tmp_path: Path) -> Iterator[LivePage]:
    page = LivePage(tmp_path)
    runner = PageRunner(page.policy, page.app, has_pending=lambda: True)  # type: ignore[arg-type]
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(runner.running()),
    ):
        yield page
