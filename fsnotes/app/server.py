"""Assemble the notes server from a configuration: open, jail, serve.

Start-up order matters for layer 3: every workspace and the state directory are opened
(and the keyring and replay database created) first, then Landlock is applied while the
process still has a single thread, and only then does the event loop start its worker
threads. After that the process cannot open anything outside its workspaces, its state
directory and the read-only runtime, whatever the code above it does.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import shlex
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread

import fsnotes as fsnotes_pkg
import sandbox
from fsnotes import __version__
from fsnotes.app.config import Config, ConfigError
from fsnotes.app.config_tokens import ConfigTokens
from fsnotes.app.principals import ungranted, ungranted_advice
from fsnotes.app.state_dir import prepare_state_dir
from fsnotes.notes.history import History
from fsnotes.notes.index.indexer import Catalogs
from fsnotes.notes.store import NoteStore, WorkspaceStores
from fsnotes.notes.tools.build import build_tools
from fsnotes.notes.tools.confirm import DeleteFlow
from fsnotes.notes.tools.prompts import NotesPrompts
from fsnotes.notes.tools.resources import NotesResources
from fsnotes.notes.tools.service import NotesService
from fsnotes.protocol import limits
from fsnotes.protocol.registry import App
from fsnotes.runtime.tasks import STOPPED, TaskHost
from fsnotes.security.grants import Access, Grants
from fsnotes.security.seal import Keyring, Sealer
from fsnotes.security.tokens import BearerTokens, TokenEntry
from fsnotes.setup import code as setup_code
from fsnotes.state.audit import Auditor, AuditUnavailable, default_instance, open_audit
from fsnotes.state.history_store import HistoryStore, HistoryUnavailable
from fsnotes.state.moves import MoveJournalError, open_moves
from fsnotes.state.replay import SQLReplayStore, StoreBusy, open_replay
from fsnotes.state.shared import SharedState, StateUnavailable
from fsnotes.state.tasks import TaskStoreError, open_tasks
from sandbox.errors import SandboxError
from sandbox.jail import JailError, JailReport, apply_landlock, runtime_read_only_paths
from sandbox.root import Root

if TYPE_CHECKING:
    from fsnotes.security.oauth import Chained
from fsnotes.setup.part import SetupError, SetupPart, build_setup
from fsnotes.setup.policy import PageUnavailable

log = logging.getLogger("fsnotes")

INSTRUCTIONS = (
    "fsnotes gives you the person's Markdown notes. Call workspaces_list first to learn the "
    "workspace URIs you may use, then notes_search or notes_list to find notes and notes_read "
    "to read one (keep its etag). Pass the etag to notes_update and notes_move so a note that "
    "changed meanwhile is never overwritten. notes_delete always asks the person to confirm; "
    "you cannot confirm for them."
)
# Said only when copies are kept (not with --no-history).
HISTORY_INSTRUCTIONS = (
    " What notes_update, notes_move and notes_delete replace is kept: notes_history lists a "
    "note's versions (also of a deleted note, by its old uri) and notes_restore brings one back."
)


@dataclass
class Server:
    app: App
    service: NotesService
    catalogs: Catalogs
    deletes: DeleteFlow
    roots: list[Root]
    replay: SQLReplayStore
    config: Config
    history: History  # copies of what changes replace; History.off() with --no-history
    setup: SetupPart  # notes_setup, its store, the allowlisted folders, the page
    shared: SharedState  # where the replay store, the setup store and the audit log live
    audit: Auditor

    def close(self) -> None:
        """Close what :func:`build` opened: the indexes, the setup page's store, the
        workspaces, every state store's connections (each thread's)."""
        self.catalogs.close()
        self.setup.close()
        for root in self.roots:
            root.close()
        self.history.close()
        self.shared.close()


def build(config: Config, *, clock: Any = time.time) -> Server:
    """Open everything the server needs. Raises ConfigError with a readable reason."""
    prepare_state_dir(config)
    roots: list[Root] = []
    stores = WorkspaceStores()
    try:
        for spec in config.workspaces:
            try:
                root = Root.open(spec.path, allow_hardlinked_reads=config.allow_hardlinked_reads)
            except (SandboxError, OSError) as exc:
                raise ConfigError(
                    f"cannot open workspace '{spec.name}' ({spec.path}): {exc}"
                ) from None
            roots.append(root)
            stores.add(spec.name, NoteStore(root, extensions=config.extensions))
        try:
            keyring = Keyring.load_or_create(config.state_dir)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot use the sealing keys in {config.state_dir}: {exc}") from None
        try:
            # No pool yet: its threads must start inside the jail (serve starts it).
            shared = SharedState.open(config.state_dir, config.database, pooled=False)
        except StateUnavailable as exc:
            raise ConfigError(str(exc)) from None
        try:
            replay = open_replay(shared, clock=clock)
        except StoreBusy as exc:
            raise ConfigError(f"cannot open the replay database ({shared.where}): {exc}") from None
        try:
            audit = Auditor(
                open_audit(shared, clock=clock), instance=config.instance or default_instance()
            )
        except AuditUnavailable as exc:
            raise ConfigError(f"cannot open the audit log ({shared.where}): {exc}") from None
        history = open_history(config, clock, shared)
        try:
            task_store = open_tasks(
                shared, clock=clock, stale_after=limits.TASK_STALE_S, lost=STOPPED
            )
        except TaskStoreError as exc:
            raise ConfigError(f"cannot open the task store ({shared.where}): {exc}") from None
        try:
            moves = open_moves(shared, clock=clock)
        except MoveJournalError as exc:
            raise ConfigError(f"cannot open the move journal ({shared.where}): {exc}") from None
        # Follows seal-keys.json while serving: a rotated key seals at the next question, a
        # retired one stops verifying (fsnotes/security/seal.py).
        sealer = Sealer(
            keyring,
            reload=lambda: Keyring.load(config.state_dir),
            version=lambda: Keyring.version(config.state_dir),
        )
        try:
            setup = build_setup(
                policy=config.setup,
                state_dir=config.state_dir,
                workspaces=config.workspace_objects(),
                grants=config.grants,
                stores=stores,
                extensions=config.extensions,
                sealer=sealer,
                clock=clock,
                grant_command=grant_command(config),
                allow_hardlinked_reads=config.allow_hardlinked_reads,
                shared=shared,
                audit=audit,
            )
        except SetupError as exc:
            raise ConfigError(str(exc)) from None
    except BaseException:
        for root in roots:
            root.close()
        raise

    grants = setup.grants
    catalogs = Catalogs(
        config.state_dir,
        config.extensions,
        lambda: [(ws, stores[ws.name]) for ws in grants.all_workspaces() if ws.name in stores],
        rescan_interval=config.rescan_interval,
        watch=config.watch,
    )
    service = NotesService(
        grants=grants,
        stores=stores,
        catalogs=catalogs,
        audit=audit,
        history=history,
        moves=moves,
    )
    deletes = DeleteFlow(sealer, replay, clock)
    tasks = TaskHost(task_store)
    app = App(
        name="fsnotes",
        version=__version__,
        title="fsnotes",
        instructions=INSTRUCTIONS + (HISTORY_INSTRUCTIONS if history.enabled else ""),
        tools=[*build_tools(service, deletes), *setup.tools],
        resources=NotesResources(service),
        prompts=NotesPrompts(service, config.daily),
        lifespan=_lifespan(catalogs, setup.lifespan, tasks),
        tasks=tasks,
    )
    return Server(
        app=app,
        service=service,
        catalogs=catalogs,
        deletes=deletes,
        roots=roots,
        replay=replay,
        config=config,
        history=history,
        setup=setup,
        shared=shared,
        audit=audit,
    )


def open_history(config: Config, clock: Any, shared: SharedState | None = None) -> History:
    """The history store (pruned to its bounds now): in ``shared``'s PostgreSQL database
    when it has one (every instance's), else in the state directory; none with
    --no-history, and then no history file is created or opened at all."""
    settings = config.history
    if not settings.enabled:
        log.info("history off (--no-history): changes keep no copy of what they replace")
        return History.off()
    where = (
        f"in {config.state_dir}"
        if shared is None or shared.postgres is None
        else f"({shared.where})"
    )
    try:
        store = HistoryStore(
            config.state_dir,
            max_bytes=settings.max_bytes,
            max_age_s=settings.max_age_s,
            clock=clock,
            shared=shared,
        )
        store.prune()  # a bound lowered since the last run, or versions that aged meanwhile
    except HistoryUnavailable as exc:
        raise ConfigError(
            f"cannot open the history database {where}: {exc} (--no-history starts without it)"
        ) from None
    return History(store)


def _lifespan(
    catalogs: Catalogs,
    page: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None,
    tasks: TaskHost,
) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    """What runs as long as the server serves, in the background (nothing waits for it to
    start: initialize is answered at once): the search indexes built and kept fresh (the
    first full scan also removes what killed writes left behind), the MCP tasks' host, and
    the setup page's runner when setup is on."""

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with tasks.serving(), anyio.create_task_group() as tg:
            tg.start_soon(catalogs.run)
            try:
                if page is None:
                    yield
                else:
                    async with page():
                        yield
            finally:
                tg.cancel_scope.cancel()  # a sweep still running stops at its next checkpoint

    return lifespan


def grant_command(config: Config) -> str:
    """The ``fsnotes grant`` prefix that reaches this server's state and allowlist."""
    words = ["fsnotes", "grant"]
    if config.config_file:
        words += ["--config", config.config_file]
    words += ["--state-dir", str(config.state_dir)]
    for parent in config.setup.allow:
        words += ["--setup-allow", parent]
    return " ".join(shlex.quote(w) for w in words)


def announce_setup_code(config: Config) -> None:
    """Make a fresh setup code, write it to the state dir and print it on stderr."""
    code = setup_code.new_code()
    try:
        path = setup_code.write_code(config.state_dir, code)
    except OSError as exc:
        raise ConfigError(f"cannot write the setup code in {config.state_dir}: {exc}") from None
    # Printed, not logged: it must reach the person whatever the log level.
    print(
        f"fsnotes: setup code {code} (also in {path}); the setup page at "
        f"{config.setup.origin} asks for it before granting any folder",
        file=sys.stderr,
        flush=True,
    )


def http_authenticator(config: Config) -> BearerTokens | Chained:
    """What an HTTP server accepts: the configuration's and the state directory's bearer
    tokens (see :mod:`fsnotes.security.tokens`), then OAuth access tokens when
    ``[http.oauth]`` is configured (:mod:`fsnotes.security.oauth`). Raises ConfigError when
    nothing would be accepted, the tokens file is unusable, or OAuth needs its extra."""
    settings = config.http
    configured: Sequence[TokenEntry] | ConfigTokens = settings.tokens if settings else ()
    if settings is not None and config.config_file is not None:
        # Asked at every request: a token removed from the configuration is refused at the
        # next one, without a restart (fsnotes/app/config_tokens.py).
        configured = ConfigTokens(config.config_file)
        if configured.problem is not None:
            raise ConfigError(configured.problem)
    tokens = BearerTokens(configured, config.state_dir)
    if tokens.problem is not None:
        raise ConfigError(tokens.problem)
    if settings is not None and settings.oauth is not None:
        try:
            from fsnotes.security.oauth import Chained, OAuthTokens
        except ImportError as exc:
            raise ConfigError(
                f"[http.oauth] needs PyJWT ({exc.name} is missing): pip install 'fsnotes[oauth]'"
            ) from None
        # The tokens file is read again when it changes: one added later counts at once.
        return Chained(tokens, OAuthTokens(settings.oauth))
    if not tokens.entries:
        raise ConfigError(
            "--http needs at least one bearer token: run `fsnotes token add --principal NAME` "
            "(with the same --state-dir), or add [[http.token]] to the configuration, or "
            "configure [http.oauth]"
        )
    return tokens


def _oauth_jail_needs(authenticator: BearerTokens | Chained) -> tuple[list[str], list[int]]:
    """What fetching the issuer's keys needs inside the jail: the resolver's files and the CA
    certificates (read-only), and the TCP ports of the issuer and of its JWKS (connect)."""
    if isinstance(authenticator, BearerTokens):
        return [], []
    from fsnotes.security.oauth_settings import RESOLVER_FILES

    verify = ssl.get_default_verify_paths()
    candidates = [*RESOLVER_FILES, "/etc/ssl", verify.cafile, verify.capath]
    paths = [p for p in candidates if p and os.path.exists(p)]
    return paths, authenticator.oauth.tcp_ports()


def _config_dir(config: Config) -> list[str]:
    """The configuration file's directory, read-only, for an HTTP server: it reads the file's
    ``[[http.token]]`` entries again while serving, and a save by rename makes a new inode,
    which a rule on the file itself would not cover (fsnotes/app/config_tokens.py)."""
    if config.http is None or config.config_file is None:
        return []
    folder = os.path.dirname(config.config_file)
    if folder == "/":
        raise ConfigError(
            f"--http reads {config.config_file} again while serving, so its folder must be "
            "readable in the jail: keep the configuration in a folder of its own, not in /"
        )
    return [folder]


def jail(
    server: Server,
    *,
    extra_read_only: Sequence[str] = (),
    extra_connect_tcp: Sequence[int] = (),
) -> JailReport | None:
    """Apply Landlock for this server's workspaces and state directory (layer 3)."""
    if not server.config.landlock:
        log.warning("Landlock disabled by --no-landlock: layer 3 is off for this process")
        return None
    # The packages' own directories: with an editable install (a checkout) they are outside
    # the runtime prefix, and modules imported lazily later must still load.
    own = [os.path.dirname(os.path.abspath(m.__file__ or "")) for m in (sandbox, fsnotes_pkg)]
    setup = server.config.setup
    # The setup allowlist's parents bound what can ever be granted at run time; they are
    # writable only when the page may grant write access.
    parent_fds = [root.fileno() for root in server.setup.parents]
    writable_parents = parent_fds if setup.max_access >= Access.WRITE else []
    report = apply_landlock(
        # The descriptors the Roots resolve from, not the configured paths re-opened by name:
        # the rules then cover exactly the directories layer 2 works in.
        writable=[*(root.fileno() for root in server.roots), *writable_parents],
        state_dirs=[str(server.config.state_dir)],
        read_only=[
            *runtime_read_only_paths(),
            *own,
            *extra_read_only,
            *(fd for fd in parent_fds if fd not in writable_parents),
            # What libpq reads on a later connection (the pool reconnects after the jail).
            *server.shared.read_paths(),
            *_config_dir(server.config),
        ],
        allow_bind_tcp=[setup.port] if setup.enabled else [],
        # The shared database's port, when it is reached over TCP.
        allow_connect_tcp=[*server.shared.tcp_ports(), *extra_connect_tcp],
    )
    if report.applied:
        log.info("Landlock ABI %s applied", report.abi)
    for gap in report.not_applied:
        log.warning("Landlock: %s", gap)
    for gap in report.not_yet:
        # Only a kernel not released yet closes these: nothing to act on, so not a warning
        # at every start; `fsnotes doctor` states them.
        log.debug("Landlock: %s", gap)
    return report


def serve(config: Config) -> int:
    """Run the server (stdio, or HTTP with ``--http``) until stdin closes or SIGTERM; returns
    the exit status."""
    # Imported before the jail goes up: after it, only the runtime paths stay readable, and
    # a project checkout (an editable install) may not be among them.
    from fsnotes.transport.stdio import run_stdio

    if config.http is not None:
        return _serve_http(config)
    server = build(config)
    try:
        _announce_setup(config)
        try:
            jail(server)
        except JailError as exc:
            # Nothing was restricted; refuse to serve rather than run unjailed by surprise.
            raise ConfigError(
                f"cannot apply the Landlock jail ({exc}{': ' + exc.detail if exc.detail else ''}); "
                "fix the cause or pass --no-landlock knowingly"
            ) from None
        # The jail is up (or knowingly off): the database pool's threads may start now.
        server.shared.start_pool()
        server.setup.start_watching()
        log.info(
            "serving %d workspace(s) for principal %r over stdio; shared state: %s",
            len(config.workspaces),
            config.principal,
            server.shared.where,
        )
        try:
            run_stdio(server.app, principal=config.principal)
        except PageUnavailable as exc:  # --setup-port: the always-on page could not start
            raise ConfigError(f"{exc}; choose another --setup-port") from None
        except BaseExceptionGroup as group:
            unavailable = group.subgroup(PageUnavailable)
            if unavailable is None:
                raise
            raise ConfigError(f"{_first_leaf(unavailable)}; choose another --setup-port") from None
    finally:
        server.close()
    return 0


def _announce_setup(config: Config) -> None:
    if not config.setup.enabled:
        return
    announce_setup_code(config)
    if not ipaddress.ip_address(config.setup.bind).is_loopback:
        # Meant for a container whose port is published to the host's loopback only;
        # on a host it exposes the page (still code-protected) to the network.
        log.warning(
            "the setup page listens on %s, not a loopback address: publish its port "
            "to 127.0.0.1 only (docker run -p 127.0.0.1:%d:%d)",
            config.setup.bind,
            config.setup.port,
            config.setup.port,
        )


def _serve_http(config: Config) -> int:
    """Serve Streamable HTTP (``--http``): the socket is bound and the tokens read before the
    jail, so Landlock needs no rule for this port and allows binding no other."""
    try:
        from fsnotes.transport.http_server import HttpUnavailable, bind, run_http
    except ImportError as exc:
        raise ConfigError(
            f"--http needs the HTTP stack ({exc.name} is missing): starlette and uvicorn are "
            "dependencies of fsnotes; reinstall it (pip install --force-reinstall fsnotes)"
        ) from None
    settings = config.http
    assert settings is not None
    authenticator = http_authenticator(config)
    if not isinstance(authenticator, BearerTokens):
        # The keys are fetched once before the jail; later fetches (rotation, refresh) go to
        # the ports the jail allows connecting to (see _oauth_jail_needs).
        authenticator.oauth.prefetch()
    oauth_paths, oauth_ports = _oauth_jail_needs(authenticator)
    server = build(config)
    try:
        principals = authenticator.principals()
        _warn_ungranted(config, principals, server.setup.grants)
        try:
            sock = bind(settings.host, settings.port)
        except HttpUnavailable as exc:
            raise ConfigError(f"{exc}; choose another --http port") from None
        try:
            port = sock.getsockname()[1]
            _announce_setup(config)
            if not settings.loopback:
                log.warning(
                    "exposing %d workspace(s) over HTTP at %s to principals %s (--http-expose)",
                    len(config.workspaces),
                    settings.describe(port),
                    _names(principals, oauth=not isinstance(authenticator, BearerTokens)),
                )
            try:
                jail(server, extra_read_only=oauth_paths, extra_connect_tcp=oauth_ports)
            except JailError as exc:
                raise ConfigError(
                    f"cannot apply the Landlock jail ({exc}"
                    f"{': ' + exc.detail if exc.detail else ''}); "
                    "fix the cause or pass --no-landlock knowingly"
                ) from None
            server.shared.start_pool()  # the database pool's threads start inside the jail
            server.setup.start_watching()  # so does the grants' change feed
            log.info(
                "serving %d workspace(s) over HTTP at %s for principal(s) %s; shared state: %s",
                len(config.workspaces),
                settings.url(port),
                _names(principals, oauth=not isinstance(authenticator, BearerTokens)),
                server.shared.where,
            )
            try:
                run_http(server.app, settings, authenticator, sock)
            except PageUnavailable as exc:
                raise ConfigError(f"{exc}; choose another --setup-port") from None
            except BaseExceptionGroup as group:
                unavailable = group.subgroup(PageUnavailable)
                if unavailable is None:
                    raise
                raise ConfigError(
                    f"{_first_leaf(unavailable)}; choose another --setup-port"
                ) from None
        finally:
            sock.close()
    finally:
        server.close()
    return 0


def _names(principals: Sequence[str], *, oauth: bool) -> str:
    """The principals an HTTP server acts for, as its start-up lines name them."""
    named = ", ".join(repr(p) for p in principals)
    if oauth:
        return f"{named} and the OAuth subjects" if named else "the OAuth subjects"
    return named


def _warn_ungranted(config: Config, principals: Sequence[str], grants: Grants) -> None:
    """Warn when a token acts for a principal to whom nothing is granted (see
    :mod:`fsnotes.app.principals`): its calls would all answer "no workspace"."""
    missing = ungranted(principals, lambda p: bool(grants.granted(p)))
    if missing:
        log.warning("%s", ungranted_advice(missing, config.principal))


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def main_error(message: str) -> int:
    print(f"fsnotes: {message}", file=sys.stderr)
    return 2
