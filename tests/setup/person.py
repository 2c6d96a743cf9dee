"""A person at the setup page: a real HTTP client (http.client) doing what a browser does.

GET the page (keeping the form cookie), read the form token from the HTML, POST the form
with the browser's Origin. Tests use it to approve or deny setups of real server processes.
"""

from __future__ import annotations

import http.client
import re
import socket
import urllib.parse
from dataclasses import dataclass, field

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: str
    cookies: dict[str, str] = field(default_factory=dict)


@dataclass
class Person:
    port: int
    cookies: dict[str, str] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            h = {"Host": f"127.0.0.1:{self.port}"}
            if self.cookies:
                h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            h.update(headers or {})
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
            for key, value in resp.getheaders():
                if key.lower() == "set-cookie":
                    name, _, rest = value.partition("=")
                    self.cookies[name.strip()] = rest.split(";", 1)[0]
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, text)
        finally:
            conn.close()

    def open(self, url: str) -> tuple[Reply, str | None]:
        """GET the page at ``url``; the reply and the form token it carries (if any)."""
        parsed = urllib.parse.urlsplit(url)
        assert parsed.netloc == f"127.0.0.1:{self.port}", url
        reply = self.request("GET", parsed.path)
        match = _CSRF.search(reply.body)
        return reply, match.group(1) if match else None

    def submit(self, url: str, token: str, action: str, code: str = "") -> Reply:
        form = urllib.parse.urlencode({"csrf": token, "code": code, "action": action})
        return self.request(
            "POST",
            urllib.parse.urlsplit(url).path,
            body=form,
            headers={
                "Origin": self.origin,
                "Content-Type": "application/x-www-form-urlencoded",
                "Sec-Fetch-Site": "same-origin",
            },
        )

    def decide(self, url: str, action: str, code: str = "") -> Reply:
        reply, token = self.open(url)
        assert reply.status == 200 and token, (reply.status, reply.body[:500])
        return self.submit(url, token, action, code)
