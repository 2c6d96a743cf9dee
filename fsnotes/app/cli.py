"""Command line: ``fsnotes serve``, ``demo``, ``doctor``, ``grant``, ``token``, ``audit``,
``rotate-key``."""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys
from collections.abc import Sequence

from fsnotes import __version__

NO_HISTORY_HELP = (
    "keep no copy of what notes_update, notes_move and notes_delete replace (nothing can be "
    "restored); env FSNOTES_NO_HISTORY=1, [history] enabled = false"
)

STATE_DIR_HELP = (
    "where fsnotes keeps its own files, private to the user it runs as (0700): the sealing "
    "keys, the replay, setup-grant and audit databases, the bearer tokens, the history of "
    "changed notes and the search index; env FSNOTES_STATE_DIR (default: "
    "$XDG_STATE_HOME/fsnotes, else ~/.local/state/fsnotes; here {here})"
)


def _state_dir_help() -> str:
    """STATE_DIR_HELP with the folder this environment's default names (no default is set
    on the option itself: FSNOTES_STATE_DIR and the configuration's state_dir come after
    the flag, and a set default would hide them)."""
    from fsnotes.app.config import default_state_dir

    here = os.environ.get("FSNOTES_STATE_DIR") or str(default_state_dir(os.environ))
    return STATE_DIR_HELP.format(here=here.replace("%", "%%"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fsnotes", description="A sandboxed MCP server for Markdown notes."
    )
    p.add_argument("--version", action="version", version=f"fsnotes {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve",
        help="serve notes over MCP on stdio (or HTTP with --http)",
        description="Serve the Markdown notes of the given workspaces to one MCP host: over "
        "stdio (the host starts this command) or, with --http, Streamable HTTP with a bearer "
        "token on every request. --workspace folders are granted to the principal served "
        "(--principal). The process jails itself with Landlock before serving; `fsnotes "
        "doctor` reports what is confined on this machine.",
    )
    serve.add_argument(
        "--workspace",
        action="append",
        default=[],
        metavar="PATH",
        help="a notes directory (repeatable); env FSNOTES_WORKSPACE (os.pathsep-separated)",
    )
    serve.add_argument(
        "--read-only", action="store_true", help="cap every grant at read (FSNOTES_READ_ONLY=1)"
    )
    serve.add_argument("--state-dir", metavar="DIR", help=_state_dir_help())
    serve.add_argument(
        "--principal", metavar="NAME", help="whom this process serves (FSNOTES_PRINCIPAL)"
    )
    serve.add_argument("--config", metavar="FILE", help="TOML configuration (FSNOTES_CONFIG)")
    serve.add_argument(
        "--no-landlock",
        action="store_true",
        help="do not apply the Landlock jail (layer 3); only for kernels or hosts where it breaks "
        "something, since a bug in layers 1-2 would then reach the whole disk",
    )
    serve.add_argument(
        "--setup-allow",
        action="append",
        default=[],
        metavar="PATH",
        help="folders strictly below PATH may be granted at run time on the setup page "
        "(repeatable); env FSNOTES_SETUP_ALLOW (os.pathsep-separated)",
    )
    serve.add_argument(
        "--setup-port",
        type=int,
        metavar="PORT",
        help="the setup page's loopback port, served from start-up to exit (without it the "
        "page runs only while a setup is pending, on FSNOTES_SETUP_PORT or 8765)",
    )
    serve.add_argument("--no-history", action="store_true", help=NO_HISTORY_HELP)
    serve.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST defaults to "
        "127.0.0.1; every request needs a bearer token, see `fsnotes token`); env FSNOTES_HTTP",
    )
    serve.add_argument(
        "--http-expose",
        action="store_true",
        help="allow --http on a non-loopback address, reachable from other hosts "
        "(FSNOTES_HTTP_EXPOSE=1)",
    )
    serve.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")

    doctor = sub.add_parser("doctor", help="report which containment layers are active")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.add_argument("--config", metavar="FILE", help="as for serve (FSNOTES_CONFIG)")
    doctor.add_argument("--state-dir", metavar="DIR", help="as for serve (FSNOTES_STATE_DIR)")
    doctor.add_argument("--no-history", action="store_true", help="as for serve")
    doctor.add_argument("--http", metavar="[HOST:]PORT", help="report these HTTP settings")
    doctor.add_argument(
        "--workspace", action="append", default=[], metavar="PATH", help="as for serve"
    )
    doctor.add_argument("--principal", metavar="NAME", help="as for serve (FSNOTES_PRINCIPAL)")
    doctor.add_argument("--http-expose", action="store_true", help="as for serve")

    sub.add_parser("demo", help="a scripted session on a bundled example vault")

    grant = sub.add_parser(
        "grant",
        help="grant a principal a folder at a terminal (what the setup page does)",
        description="Store a run-time grant in the state directory, bounded by the setup "
        "allowlist as on the setup page. A running fsnotes picks it up on its next call.",
    )
    grant.add_argument("--workspace", metavar="PATH", help="the folder to grant (or revoke)")
    grant.add_argument("--principal", metavar="NAME", help="whom (default: as for serve)")
    grant.add_argument(
        "--access", choices=["read", "write", "delete"], help="the level to set exactly"
    )
    grant.add_argument("--revoke", action="store_true", help="remove the stored grant")
    grant.add_argument("--list", action="store_true", help="show the stored grants")
    grant.add_argument("--state-dir", metavar="DIR", help="as for serve (FSNOTES_STATE_DIR)")
    grant.add_argument("--config", metavar="FILE", help="as for serve (FSNOTES_CONFIG)")
    grant.add_argument(
        "--setup-allow", action="append", default=[], metavar="PATH", help="as for serve"
    )

    audit = sub.add_parser(
        "audit",
        help="show the audit log: who changed which note or grant, who confirmed",
        description="Print the audit log of the shared store (the state directory's, or the "
        "PostgreSQL database of [state] database / FSNOTES_DATABASE), oldest first.",
    )
    audit.add_argument(
        "--since",
        metavar="WHEN",
        help="a duration back from now (90s, 15m, 2h, 7d) or an ISO 8601 date or time (UTC "
        "unless it has an offset)",
    )
    audit.add_argument("--principal", metavar="NAME", help="only this principal's rows")
    audit.add_argument("--json", action="store_true", help="one JSON object per line")
    audit.add_argument(
        "--verify",
        action="store_true",
        help="check the log's hash chain; exit 1 naming the first row that does not match",
    )
    audit.add_argument(
        "--against",
        metavar="CHECKPOINT",
        help="with --verify: a line --checkpoint printed earlier (finds a rewritten or cut log)",
    )
    audit.add_argument(
        "--checkpoint",
        action="store_true",
        help="print the chain's head as one line, to keep somewhere the database cannot change",
    )
    audit.add_argument("--state-dir", metavar="DIR", help="as for serve (FSNOTES_STATE_DIR)")
    audit.add_argument("--config", metavar="FILE", help="as for serve (FSNOTES_CONFIG)")
    token = sub.add_parser(
        "token",
        help="bearer tokens for --http: add (printed once), list, revoke",
        description="Bearer tokens for the HTTP endpoint, kept as SHA-256 digests in "
        "<state dir>/http-tokens.json (0600). A running server sees changes at its next request.",
    )
    actions = token.add_subparsers(dest="action", required=True, metavar="add|list|revoke")
    add = actions.add_parser(
        "add",
        help="make a token for a principal and print it once",
        description="Make a bearer token that acts for PRINCIPAL and print it once on stdout "
        "(nothing else goes there: TOKEN=$(fsnotes token add --principal NAME) works); only "
        "its SHA-256 is stored. The token sees exactly what PRINCIPAL is granted, so it must be "
        "a principal the server grants: the one it serves (`fsnotes serve --principal NAME`, "
        "FSNOTES_PRINCIPAL, the configuration's principal, else the OS user; --workspace "
        "grants to it), or one a [[grant]] or `fsnotes grant` names. `fsnotes serve --http` "
        "warns at start, and `fsnotes doctor --http` says, when a token's principal has no "
        "grant at all.",
    )
    add.add_argument(
        "--principal",
        metavar="NAME",
        required=True,
        help="whom the token acts for: a principal the server grants a workspace to",
    )
    listing = actions.add_parser(
        "list",
        help="show every token the server accepts",
        description="One line per token the server accepts (never the token itself): its id, "
        "the principal it acts for, when it was made, and where it lives (http-tokens.json in "
        "the state directory, or the configuration file's [[http.token]] entries).",
    )
    revoke = actions.add_parser(
        "revoke",
        help="remove tokens by principal or id",
        description="Remove tokens from http-tokens.json (a running server refuses them at its "
        "next request); matching [[http.token]] entries of the configuration are named, for "
        "you to remove there.",
    )
    revoke.add_argument("--principal", metavar="NAME", help="remove all of this principal's tokens")
    revoke.add_argument("--id", metavar="HEX", help="remove the token with this id (token list)")
    for action in (add, listing, revoke):
        action.add_argument("--state-dir", metavar="DIR", help="as for serve (FSNOTES_STATE_DIR)")
        action.add_argument("--config", metavar="FILE", help="as for serve (FSNOTES_CONFIG)")

    rotate = sub.add_parser("rotate-key", help="add a new active sealing key to the state dir")
    rotate.add_argument("--state-dir", metavar="DIR", help="as for serve (FSNOTES_STATE_DIR)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        logging.basicConfig(
            stream=sys.stderr,
            level=logging.DEBUG if args.verbose else logging.INFO,
            format="fsnotes %(levelname)s %(name)s: %(message)s",
        )
        from fsnotes.app.config import ConfigError, load
        from fsnotes.app.server import main_error, serve

        try:
            config = load(
                workspaces=args.workspace,
                read_only=args.read_only,
                state_dir=args.state_dir,
                principal=args.principal,
                config_file=args.config,
                no_landlock=args.no_landlock,
                setup_allow=args.setup_allow,
                setup_port=args.setup_port,
                no_history=args.no_history,
                http=args.http,
                http_expose=args.http_expose,
            )
            return serve(config)
        except ConfigError as exc:
            return main_error(str(exc))
    if args.command == "doctor":
        from fsnotes.app.config import ConfigError, load
        from fsnotes.app.doctor import format_text, history_facts, report
        from fsnotes.app.principals import configured_has_grant, ungranted
        from fsnotes.app.server import main_error
        from fsnotes.security.tokens import BearerTokens

        try:
            config = load(
                workspaces=args.workspace,
                state_dir=args.state_dir,
                principal=args.principal,
                config_file=args.config,
                http=args.http,
                http_expose=args.http_expose,
                require_workspace=False,
            )
        except ConfigError as exc:
            return main_error(str(exc))
        principals = missing = None
        if config.http is not None:
            principals = BearerTokens(config.http.tokens, config.state_dir).principals()
            missing = ungranted(principals, configured_has_grant(config))
        history = history_facts(
            config_file=args.config, state_dir=args.state_dir, no_history=args.no_history
        )
        data = report(
            history=history,
            http=config.http,
            http_principals=principals,
            served_principal=config.principal,
            ungranted_principals=missing,
        )
        print(json.dumps(data, indent=2) if args.json else format_text(data))
        return 0
    if args.command == "demo":
        from fsnotes.app.demo_session import main as demo_main

        return demo_main()
    if args.command == "grant":
        from fsnotes.app.cli_grant import run_grant
        from fsnotes.app.config import ConfigError, load
        from fsnotes.app.server import main_error

        try:
            config = load(
                state_dir=args.state_dir,
                principal=args.principal,
                config_file=args.config,
                setup_allow=args.setup_allow,
                require_workspace=False,
            )
            return run_grant(
                config,
                folder=args.workspace,
                access=args.access,
                revoke=args.revoke,
                show=args.list,
            )
        except ConfigError as exc:
            return main_error(str(exc))
    if args.command in ("audit", "token"):
        from fsnotes.app.cli_audit import run_audit, run_chain
        from fsnotes.app.cli_token import run_token
        from fsnotes.app.config import ConfigError, load
        from fsnotes.app.server import main_error

        try:
            config = load(
                state_dir=args.state_dir, config_file=args.config, require_workspace=False
            )
            if args.command == "audit":
                if args.verify or args.checkpoint or args.against:
                    return run_chain(config, verify=args.verify, against=args.against,
                                     checkpoint=args.checkpoint)  # fmt: skip
                return run_audit(
                    config, since=args.since, principal=args.principal, as_json=args.json
                )
            return run_token(
                config,
                args.action,
                principal=getattr(args, "principal", None),
                token_id=getattr(args, "id", None),
            )
        except ConfigError as exc:
            return main_error(str(exc))
    if args.command == "rotate-key":
        from pathlib import Path

        from fsnotes.app.config import default_state_dir
        from fsnotes.security.seal import Keyring
        from fsnotes.state import statedir

        state = Path(
            args.state_dir or os.environ.get("FSNOTES_STATE_DIR") or default_state_dir(os.environ)
        )
        try:
            statedir.prepare_dir(state)
            ring = Keyring.load_or_create(state).rotated()
            ring.save(state)
        except (OSError, ValueError) as exc:
            advice = ""
            if isinstance(exc, OSError) and exc.errno in (errno.EPERM, errno.EACCES):
                from fsnotes.app.state_dir import ownership_advice

                advice = ownership_advice(state)
            print(
                f"fsnotes: cannot rotate the sealing key in {state}: {exc}{advice}",
                file=sys.stderr,
            )
            return 2
        print(f"new active sealing key {ring.active}; {len(ring.keys)} key(s) verify")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
