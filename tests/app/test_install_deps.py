"""`pip install .` installs what every command the README shows needs (issue 24: `fsnotes
serve --http` stopped with a message naming an extra the install step never installed).

Read from the installed distribution's own metadata, what pip resolved when it installed
this checkout, not from pyproject.toml.
"""

from __future__ import annotations

import re
from importlib import metadata

# What `serve --http` and the setup page import (fsnotes/transport/http_server.py,
# fsnotes/setup/page.py).
HTTP_STACK = {"starlette", "uvicorn"}
# Extras that stay optional: each is for a deployment that configures it.
OPTIONAL = {"psycopg", "psycopg-pool", "pyjwt", "mcp"}


def _unconditional() -> set[str]:
    names = set()
    for requirement in metadata.requires("fsnotes") or []:
        if "extra ==" in requirement:
            continue
        match = re.match(r"[A-Za-z0-9_.-]+", requirement)
        assert match is not None, requirement
        names.add(match.group(0).lower().replace("_", "-"))
    return names


def test_the_http_stack_is_a_dependency_and_the_deployment_extras_stay_optional() -> None:
    installed = _unconditional()
    assert installed >= HTTP_STACK
    assert not installed & OPTIONAL
    for name in HTTP_STACK:
        assert metadata.version(name)  # and pip did install it


def test_the_old_extras_still_resolve() -> None:
    # `pip install 'fsnotes[http]'` from older instructions must not fail.
    provided = set(metadata.metadata("fsnotes").get_all("Provides-Extra") or [])
    assert {"http", "setup", "postgres", "oauth"} <= provided
