"""A small OpenID provider for the OAuth tests: a real process on loopback with its own keys.

It serves OpenID discovery and RFC 8414 metadata, its JWKS, and a token endpoint
(``client_credentials``: the ``client_id`` becomes ``sub``, ``scope`` and ``resource`` (RFC 8707)
go into ``scope`` and ``aud``) that signs RS256 access tokens (RFC 9068 shape) with its current
key. Test knobs on the token endpoint (a real provider has none): ``expires_in`` and
``not_before_in`` (seconds from now, may be negative), ``issuer`` (a wrong ``iss``) and ``kid``
(a key id the JWKS does not have). ``POST /rotate`` makes a new key, publishes it and retires
the old one; ``GET /stats`` says how often the JWKS was fetched.

Prints ``oidc provider at URL`` on stdout once listening; stops on SIGTERM.
"""

from __future__ import annotations

import json
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


class Provider:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.issuer = ""
        self.jwks_fetches = 0
        self.rotate()

    def rotate(self) -> None:
        with self.lock:
            self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.kid = secrets.token_hex(8)

    def jwks(self) -> dict[str, Any]:
        with self.lock:
            self.jwks_fetches += 1
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
            public.update(kid=self.kid, alg="RS256", use="sig")
            return {"keys": [public]}

    def token(self, form: dict[str, str]) -> dict[str, Any]:
        now = int(time.time())
        lifetime = int(form.get("expires_in", "300"))
        claims: dict[str, Any] = {
            "iss": form.get("issuer", self.issuer),
            "sub": form["client_id"],
            "aud": form.get("resource", ""),
            "iat": now,
            "exp": now + lifetime,
            "jti": secrets.token_hex(8),
            "client_id": form["client_id"],
            "scope": form.get("scope", ""),
        }
        if "not_before_in" in form:
            claims["nbf"] = now + int(form["not_before_in"])
        with self.lock:
            headers = {"kid": form.get("kid", self.kid), "typ": "at+jwt"}
            token = jwt.encode(claims, self.key, algorithm="RS256", headers=headers)
        return {"access_token": token, "token_type": "Bearer", "expires_in": lifetime}


PROVIDER = Provider()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _json(self, status: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        iss = PROVIDER.issuer
        if self.path in (
            "/.well-known/openid-configuration",
            "/.well-known/oauth-authorization-server",
        ):
            self._json(200, {
                "issuer": iss,
                "jwks_uri": f"{iss}/jwks",
                "token_endpoint": f"{iss}/token",
                "grant_types_supported": ["client_credentials"],
                "response_types_supported": ["token"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "scopes_supported": ["notes:read", "notes:write", "notes:delete"],
            })  # fmt: skip
        elif self.path == "/jwks":
            self._json(200, PROVIDER.jwks())
        elif self.path == "/stats":
            self._json(200, {"jwks_fetches": PROVIDER.jwks_fetches})
        else:
            self._json(404, {"error": "not_found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        if self.path == "/token":
            if form.get("grant_type") != "client_credentials" or "client_id" not in form:
                self._json(400, {"error": "unsupported_grant_type"})
                return
            self._json(200, PROVIDER.token(form))
        elif self.path == "/rotate":
            PROVIDER.rotate()
            self._json(200, {"kid": PROVIDER.kid})
        else:
            self._json(404, {"error": "not_found"})


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    PROVIDER.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"oidc provider at {PROVIDER.issuer}", flush=True)
    server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
