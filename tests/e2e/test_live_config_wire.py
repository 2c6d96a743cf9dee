"""What an operator changes under a running team takes effect without a restart: three
``fsnotes serve --http`` instances behind HAProxy on one PostgreSQL database, sharing one
configuration file (tests/balancer.py).

- A token removed from the configuration's ``[[http.token]]`` is refused by every instance
  at its next request, whether the file was replaced (an editor's save, ``mv``) or rewritten
  in place; the other tokens keep working, and one added there counts at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import balancer
import pytest

from fsnotes.security.tokens import digest_of, new_token
from tests.transport.http_support import Raw

pytestmark = pytest.mark.timeout(180)


class Endpoint:
    """What Raw needs of a server: its URL."""

    def __init__(self, url: str) -> None:
        self.url = url


def token_entry(principal: str, token: str) -> str:
    return (
        f"[[http.token]]\nprincipal = {json.dumps(principal)}\n"
        f'sha256 = "{digest_of(token).hex()}"\n'
    )


class Team:
    def __init__(self, deployment: balancer.Deployment, tokens: dict[str, str]) -> None:
        self.d = deployment
        self.tokens = tokens
        # The configuration as the deployment wrote it, without the token entries.
        self.base = deployment.config.read_text().split("[[http.token]]", 1)[0]

    def status(self, token: str, target: str | None) -> int:
        """tools/list with ``token`` through the balancer or one instance (by name)."""
        url = self.d.url if target is None else self.d.instances[target].server.url
        raw = Raw(Endpoint(url), token)  # type: ignore[arg-type]
        try:
            return int(raw.post(raw.request("tools/list")).status_code)
        finally:
            raw.close()

    def everywhere(self, token: str) -> list[int]:
        """The status of each instance, then of the balancer, for ``token``."""
        return [self.status(token, name) for name in self.d.instances] + [self.status(token, None)]

    def configure(self, principals: list[str], *, in_place: bool) -> None:
        """Rewrite the shared configuration with the token entries of ``principals``:
        replaced by a rename (as editors and ``mv`` do), or truncated and written in place."""
        text = self.base + "".join(token_entry(p, self.tokens[p]) for p in principals)
        config = self.d.config
        if in_place:
            with config.open("r+") as f:
                f.truncate(0)
                f.write(text)
            return
        tmp = config.with_name(config.name + ".new")
        tmp.write_text(text)
        tmp.chmod(0o600)
        os.replace(tmp, config)


@pytest.fixture(scope="module")
def team(pg_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    why = balancer.missing()
    if why is not None:
        pytest.skip(f"SKIPPED: {why}")
    dsn = str(pg_cluster.new_database())
    root = tmp_path_factory.mktemp("live")
    (root / "notes").mkdir()
    tokens = {name: new_token() for name in ("erin", "frank", "gus")}
    extra = token_entry("erin", tokens["erin"]) + token_entry("frank", tokens["frank"])
    try:
        with balancer.deployed(root, root / "notes", dsn, config_extra=extra) as d:
            yield Team(d, tokens)
    finally:
        pg_cluster.drop_database(dsn)


def test_a_token_removed_from_the_shared_configuration_is_refused_at_the_next_request(
    team: Team,
) -> None:
    erin, frank, gus = (team.tokens[p] for p in ("erin", "frank", "gus"))
    assert team.everywhere(erin) == [200] * 4
    assert team.everywhere(frank) == [200] * 4
    assert team.everywhere(gus) == [401] * 4

    # erin's token leaked: removed from the configuration (saved by a rename).
    team.configure(["frank"], in_place=False)
    assert team.everywhere(erin) == [401] * 4
    assert team.everywhere(frank) == [200] * 4
    assert team.everywhere(team.d.token) == [200] * 4  # the tokens file's, untouched

    # A token added there counts at once; one removed by an in-place rewrite is refused.
    team.configure(["gus"], in_place=True)
    assert team.everywhere(gus) == [200] * 4
    assert team.everywhere(frank) == [401] * 4
    assert team.everywhere(erin) == [401] * 4
