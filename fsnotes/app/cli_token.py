"""``fsnotes token add|list|revoke``: the bearer tokens of the HTTP endpoint.

``add`` prints the new token once, on stdout (nothing else is printed there, so
``TOKEN=$(fsnotes token add --principal ada)`` works); only its SHA-256 digest is stored, in the
state directory's ``http-tokens.json`` (see :mod:`fsnotes.security.tokens`).
"""

from __future__ import annotations

import sys

from fsnotes.app.config import Config
from fsnotes.app.state_dir import prepare_state_dir
from fsnotes.security.tokens import (
    TOKENS_FILE,
    TokenFileError,
    add_token,
    read_tokens,
    revoke_tokens,
)

# `token list`'s columns (padded to line up; the first line is this header).
LIST_HEADER = ("ID", "PRINCIPAL", "CREATED", "WHERE")


def run_token(config: Config, action: str, *, principal: str | None, token_id: str | None) -> int:
    state = config.state_dir
    try:
        if action == "add":
            if not principal:
                print("fsnotes: token add needs --principal NAME", file=sys.stderr)
                return 2
            prepare_state_dir(config)  # a ConfigError saying who owns it, when not this user
            token, entry = add_token(state, principal)
            print(token)
            print(
                f"fsnotes: token {entry.id} for principal {principal!r} stored (as its SHA-256) "
                f"in {state}/http-tokens.json; it is shown only this once. Clients send "
                f"'Authorization: Bearer <token>'. For the TOML configuration instead:\n"
                f'  [[http.token]]\n  principal = "{principal}"\n'
                f'  sha256 = "{entry.digest.hex()}"',
                file=sys.stderr,
            )
            return 0
        if action == "list":
            # Every token the server accepts: the state directory's, then the configuration's
            # (last column: where each one lives, so revoking it is done there).
            rows = [(e.id, e.principal, e.created or "-", TOKENS_FILE) for e in read_tokens(state)]
            rows += [
                (e.id, e.principal, "-", str(config.config_file)) for e in config.config_tokens
            ]
            if not rows:
                print(f"no tokens in {state}/{TOKENS_FILE} or the configuration", file=sys.stderr)
                return 0
            table = [LIST_HEADER, *rows]
            widths = [max(len(row[i]) for row in table) for i in range(len(LIST_HEADER) - 1)]
            for row in table:
                cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
                print("  ".join([*cells, row[-1]]))
            return 0
        if principal is None and token_id is None:
            print("fsnotes: token revoke needs --principal NAME or --id HEX", file=sys.stderr)
            return 2
        removed = revoke_tokens(state, principal=principal, token_id=token_id)
        print(f"fsnotes: removed {removed} token(s) from {state}/{TOKENS_FILE}", file=sys.stderr)
        kept = [
            e
            for e in config.config_tokens
            if (principal is None or e.principal == principal)
            and (token_id is None or e.digest.hex().startswith(token_id))
        ]
        if kept:
            # The configuration file is the person's to edit; fsnotes never rewrites it.
            print(
                f"fsnotes: {len(kept)} matching token(s) are [[http.token]] entries of "
                f"{config.config_file} ({', '.join(e.id for e in kept)}): remove them there",
                file=sys.stderr,
            )
        if removed or kept:
            # Both files are checked at every request (fsnotes/security/tokens.py).
            print(
                "fsnotes: running servers refuse a removed token at their next request; "
                "no restart is needed",
                file=sys.stderr,
            )
        return 0 if removed else 1
    except (TokenFileError, ValueError, OSError) as exc:
        print(f"fsnotes: {exc}", file=sys.stderr)
        return 2
