"""The setup page in a real browser: headless Chromium renders it and submits its form.

The screenshots land in ``tests/setup/artifacts/`` (not committed) for a person to look at.
The form test drives Chromium over the DevTools protocol (``--remote-debugging-pipe``) to
prove that what a real browser sends (Origin, Sec-Fetch-Site, the SameSite cookie, the form
encoding) passes the page's checks: a page that refused real browsers would pass every
``http.client`` test.

Both skip with the reason when Chromium is not installed (Debian: ``apt-get install
chromium``; ``.ci/sysdeps.sh`` installs it).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from e2e.wire import readable

from fsnotes.security.grants import Access
from fsnotes.setup.page import PageFacts, default_facts
from fsnotes.setup.store import Setup, SetupStatus
from setup.conftest import LivePage

pytestmark = pytest.mark.timeout(120)

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_TIMEOUT_S = 60.0
WINDOW = (900, 1000)
# A rendered page has text, borders and colours: thousands of distinct byte values per
# compressed-away row, where a blank or error page has a handful.
MIN_DISTINCT_BYTES = 64


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium)")


def chromium_args(binary: str, profile: Path) -> list[str]:
    return [
        binary,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",  # tests run as root in CI containers, where the sandbox cannot start
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ]


def png_pixels(path: Path) -> tuple[int, int, bytes]:
    """(width, height, decompressed image data) of a PNG, checking its structure."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def screenshot(page: LivePage, setup_id: str, name: str, tmp_path: Path) -> Path:
    binary = chromium_binary()
    ARTIFACTS.mkdir(exist_ok=True)
    out = ARTIFACTS / f"{name}.png"
    out.unlink(missing_ok=True)
    url = f"{page.origin}/setup/{setup_id}"
    args = chromium_args(binary, tmp_path / f"profile-{name}")
    subprocess.run(
        [*args, f"--screenshot={out}", url],
        capture_output=True,
        timeout=CHROMIUM_TIMEOUT_S,
        check=False,
    )
    assert out.exists(), f"Chromium wrote no screenshot of {url}"
    width, height, pixels = png_pixels(out)
    assert (width, height) == WINDOW
    assert len(set(pixels)) >= MIN_DISTINCT_BYTES, "the screenshot is (nearly) blank"
    return out


def realistic(page: LivePage) -> Setup:
    page.clock.now = time.time()  # so "Expires" reads as it would for a person
    page.facts = lambda s: PageFacts(
        folder_uri=default_facts(s).folder_uri, client="Claude Desktop 1.4.2"
    )
    # A folder path as a person would have it (the page only displays it; grantable is
    # the test's switch). The code file path stays the real one, under tmp_path.
    return page.store.start(
        "claude-desktop", "/home/ana/Notes/work-journal", Access.WRITE, lifetime=600.0
    )


def test_screenshot_of_the_pending_page(live_page: LivePage, tmp_path: Path) -> None:
    setup = realistic(live_page)
    out = screenshot(live_page, setup.id, "setup-page-pending", tmp_path)
    assert out.stat().st_size > 20_000
    # Chromium loading the page issued one form token and stored nothing.
    assert live_page.store.grants() == []


def test_screenshot_of_the_approved_page(live_page: LivePage, tmp_path: Path) -> None:
    setup = realistic(live_page)
    browser = live_page.browser()
    token = browser.get(setup.id).token
    assert browser.post(setup.id, csrf=token, code=live_page.code).status == 200
    screenshot(live_page, setup.id, "setup-page-approved", tmp_path)


FD_FLOOR = 10
_SHIM = (
    "import os, sys\n"
    "r, w = int(sys.argv[1]), int(sys.argv[2])\n"
    "os.dup2(r, 3); os.dup2(w, 4); os.close(r); os.close(w)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def _above(fd: int, floor: int) -> int:
    """``fd`` moved to a number at least ``floor`` (the original is closed)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    os.close(fd)
    return moved


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fds 3 and 4:
    NUL-terminated JSON messages)."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # A small Python shim puts Chromium's pipe ends on fds 3 and 4 and execs it; the ends
        # are first moved above those numbers so that the moves cannot overwrite one another.
        to_chrome_r = _above(to_chrome_r, FD_FLOOR)
        from_chrome_w = _above(from_chrome_w, FD_FLOOR)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _SHIM,
                str(to_chrome_r),
                str(from_chrome_w),
                *chromium_args(binary, profile),
                "--remote-debugging-pipe",
            ],
            pass_fds=(to_chrome_r, from_chrome_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def close(self) -> None:
        os.close(self._to_chrome)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self._from_chrome)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "Chromium did not answer in time"
            if readable(self._from_chrome, left):
                chunk = os.read(self._from_chrome, 65536)
                assert chunk, "Chromium closed the DevTools pipe"
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session is not None:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + CHROMIUM_TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                assert "error" not in reply, reply
                result: dict[str, Any] = reply["result"]
                return result
            self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + CHROMIUM_TIMEOUT_S
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")


def test_a_real_browser_is_told_a_wrong_code_then_approves_with_the_right_one(
    live_page: LivePage, tmp_path: Path
) -> None:
    binary = chromium_binary()
    setup = realistic(live_page)
    devtools = DevTools(binary, tmp_path / "profile-form")

    def submit(code: str) -> str:
        # What a person does: type the code, press Approve. (DevTools evaluation is not
        # subject to the page's CSP; the page itself runs no script.)
        devtools.evaluate(
            f"document.getElementById('code').value = {json.dumps(code)};"
            "document.querySelector('button.approve').click();"
        )
        devtools.wait_event("Page.loadEventFired")
        text: str = devtools.evaluate("document.body.innerText")
        return text

    try:
        target = devtools.call("Target.createTarget", url="about:blank")["targetId"]
        devtools.session = devtools.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        devtools.call("Page.enable")
        devtools.call("Page.navigate", url=f"{live_page.origin}/setup/{setup.id}")
        devtools.wait_event("Page.loadEventFired")
        assert "Allow an AI assistant" in devtools.evaluate("document.body.innerText")
        wrong = submit("AAAA-BBBB-CCCC-DDDD")
        shot = devtools.call("Page.captureScreenshot", format="png")["data"]
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "setup-page-wrong-code.png").write_bytes(base64.b64decode(shot))
        granted = submit(live_page.code)
    finally:
        devtools.close()
    assert "not the current setup code" in wrong and "4 attempts left" in wrong, wrong
    assert "Access granted" in granted, granted
    (grant,) = live_page.store.grants()
    assert grant.principal == "claude-desktop" and grant.access is Access.WRITE
    assert [s.status for s in live_page.decided.setups] == [SetupStatus.APPROVED]
