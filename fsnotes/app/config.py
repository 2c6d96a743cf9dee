"""Server configuration from the command line, the environment and a TOML file.

Precedence: command-line flags, then ``FSNOTES_*`` environment variables (meant for the
container), then the config file. Workspaces from ``--workspace``/``FSNOTES_WORKSPACE`` are
granted to the serving principal (``delete`` access, or ``read`` with ``--read-only``);
the config file can declare more workspaces, principals and grants::

    principal = "ada"                 # whom this stdio process serves (default: OS user)
    state_dir = "/var/lib/fsnotes"    # default: $XDG_STATE_HOME/fsnotes
    extensions = [".md", ".txt"]      # what counts as a note

    [[workspace]]
    name = "notes"
    path = "/home/ada/notes"

    [[grant]]
    principal = "ada"
    workspace = "notes"
    access = "write"                  # read < write < delete

    [state]                           # state shared by several instances (docs/team.md)
    database = "postgresql://fsnotes:...@db:5432/fsnotes"   # default: SQLite files in state_dir
    instance = "notes-a"              # names this process in the audit log (host:pid)

    [history]                         # copies of what notes tools replace (history_store)
    enabled = true                    # or --no-history / FSNOTES_NO_HISTORY=1
    max_size_mib = 256                # FSNOTES_HISTORY_MAX_SIZE_MIB
    max_age_days = 30                 # FSNOTES_HISTORY_MAX_AGE_DAYS

    [prompts]                         # the daily_note prompt
    daily_template = "templates/daily.md"   # a note in the workspace (default: built in)
    daily_path = "journal/{date}.md"        # where a day's note goes

    [setup]                           # run-time grants from the setup page (notes_setup)
    allow = ["/home/ada/shared"]      # folders strictly below these may be granted
    max_access = "write"              # the most the page may grant (default delete)
    port = 8765                       # the loopback page's port
    bind = "127.0.0.1"                # 0.0.0.0 only inside a container (docs/setup.md)

    [http]                            # fsnotes serve --http [HOST:]PORT (docs/http.md)
    allowed_hosts = ["notes.example.com"]      # Host values answered besides loopback names
    allowed_origins = ["https://app.example"]  # Origin values allowed besides our own

    [[http.token]]                    # a bearer token, by its SHA-256 (fsnotes token add)
    principal = "ada"
    sha256 = "<64 hex digits>"

    [http.oauth]                      # OAuth access tokens too (security/oauth.py, docs/http.md)
    issuer = "https://id.example.com/realms/notes"
    audience = "https://notes.example.com/mcp"   # this resource's URL (RFC 8707)
    jwks_uri = "https://id.example.com/realms/notes/certs"  # default: the issuer's metadata
    scopes_supported = ["notes:read", "notes:write", "notes:delete"]
    principal_claim = "sub"
    jwks_max_age = 600                # s: a key removed at the issuer stops verifying within it

Setup keys also come from ``--setup-allow``/``FSNOTES_SETUP_ALLOW`` (os.pathsep-separated),
``--setup-port``/``FSNOTES_SETUP_PORT`` (the flag also keeps the page up from start-up),
``FSNOTES_SETUP_MAX_ACCESS`` and ``FSNOTES_SETUP_BIND``; the state keys from
``FSNOTES_DATABASE`` and ``FSNOTES_INSTANCE``. The database DSN may hold a password: it is
kept out of the configuration's repr, and named everywhere else without it. HTTP comes from
``--http``/``FSNOTES_HTTP`` and ``--http-expose``/``FSNOTES_HTTP_EXPOSE=1``.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsnotes.notes.index.indexer import DEFAULT_RESCAN_INTERVAL_S
from fsnotes.notes.store import DEFAULT_EXTENSIONS, MAX_NOTE_BYTES
from fsnotes.notes.text.daily import DEFAULT_DAILY_PATH, DailySettings, daily_settings
from fsnotes.security.grants import Access, Grant, Workspace
from fsnotes.security.oauth_settings import OAuthConfigError
from fsnotes.security.tokens import TokenEntry
from fsnotes.setup.policy import DEFAULT_SETUP_PORT, SetupPolicy
from fsnotes.state.history_store import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES, HistorySettings
from fsnotes.transport.http_settings import (
    HttpSettings,
    SettingsError,
    config_tokens,
    http_settings_from,
)
from sandbox import uri as lexical
from sandbox.errors import SandboxError


class ConfigError(Exception):
    """A configuration problem, explained for the person who wrote it."""


@dataclass(frozen=True)
class WorkspaceSpec:
    name: str
    path: str  # absolute, normalised, as the server sees it


@dataclass
class Config:
    principal: str
    state_dir: Path
    workspaces: list[WorkspaceSpec]
    grants: list[Grant]
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS
    landlock: bool = True
    allow_hardlinked_reads: bool = False
    notes: list[str] = field(default_factory=list)  # remarks for the start-up log
    setup: SetupPolicy = field(default_factory=SetupPolicy)
    config_file: str | None = None
    # The search index (fsnotes/notes/index/indexer.py): full rescan interval, inotify hints.
    rescan_interval: float = DEFAULT_RESCAN_INTERVAL_S
    watch: bool = True
    # The shared store (fsnotes/state/shared.py): a PostgreSQL DSN, or None for the state
    # directory's SQLite files. Out of repr: it may carry a password.
    database: str | None = field(default=None, repr=False)
    instance: str | None = None  # the audit log's name for this process (default host:pid)
    # Copies of what notes_update, notes_move and notes_delete replace (history_store.py).
    history: HistorySettings = field(default_factory=HistorySettings)
    daily: DailySettings = field(default_factory=DailySettings)  # [prompts]
    # Streamable HTTP (--http): None serves stdio.
    http: HttpSettings | None = None
    # The configuration file's [[http.token]] entries, read whether or not --http is given:
    # `fsnotes token list` shows them beside the state directory's.
    config_tokens: tuple[TokenEntry, ...] = ()

    def workspace_objects(self) -> list[Workspace]:
        return [Workspace(w.name, lexical.path_components(w.path)) for w in self.workspaces]


def default_principal() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        # No passwd entry (e.g. `docker run --user 12345`): name the uid instead.
        return f"uid-{os.getuid()}"


def default_state_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "fsnotes"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _normalise(path: str, what: str) -> str:
    expanded = os.path.expanduser(path)
    if not expanded:
        raise ConfigError(f"{what} is empty")
    return os.path.normpath(os.path.abspath(expanded))


def load(
    *,
    workspaces: Sequence[str] = (),
    read_only: bool = False,
    state_dir: str | None = None,
    principal: str | None = None,
    config_file: str | None = None,
    no_landlock: bool = False,
    setup_allow: Sequence[str] = (),
    setup_port: int | None = None,
    no_history: bool = False,
    http: str | None = None,
    http_expose: bool = False,
    require_workspace: bool = True,
    env: Mapping[str, str] | None = None,
) -> Config:
    env = os.environ if env is None else env
    file_cfg: dict[str, Any] = {}
    config_file = config_file or env.get("FSNOTES_CONFIG")
    if config_file:
        try:
            with open(config_file, "rb") as f:
                file_cfg = tomllib.load(f)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {config_file} is not valid TOML: {exc}") from None
        unknown = set(file_cfg) - {
            "principal",
            "state_dir",
            "extensions",
            "workspace",
            "grant",
            "allow_hardlinked_reads",
            "setup",
            "index",
            "state",
            "history",
            "prompts",
            "http",
        }
        if unknown:
            raise ConfigError(f"unknown keys in {config_file}: {', '.join(sorted(unknown))}")

    who = principal or env.get("FSNOTES_PRINCIPAL") or file_cfg.get("principal")
    who = str(who) if who else default_principal()

    state = state_dir or env.get("FSNOTES_STATE_DIR") or file_cfg.get("state_dir")
    state_path = Path(_normalise(str(state), "state_dir")) if state else default_state_dir(env)

    specs: list[WorkspaceSpec] = []
    grants: list[Grant] = []
    for i, entry in enumerate(file_cfg.get("workspace", []) or []):
        if not isinstance(entry, dict) or "path" not in entry:
            raise ConfigError(f"[[workspace]] #{i + 1} needs a 'path'")
        path = _normalise(str(entry["path"]), "workspace path")
        specs.append(WorkspaceSpec(str(entry.get("name") or _name_for(path)), path))
    for i, entry in enumerate(file_cfg.get("grant", []) or []):
        try:
            grants.append(
                Grant(
                    str(entry["principal"]), str(entry["workspace"]), Access.parse(entry["access"])
                )
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"[[grant]] #{i + 1} needs principal, workspace, access") from exc
        except ValueError as exc:
            raise ConfigError(f"[[grant]] #{i + 1}: {exc}") from None

    cli_paths = list(workspaces)
    if not cli_paths and env.get("FSNOTES_WORKSPACE"):
        cli_paths = [p for p in env["FSNOTES_WORKSPACE"].split(os.pathsep) if p]
    level = Access.READ if (read_only or _truthy(env.get("FSNOTES_READ_ONLY"))) else Access.DELETE
    for raw in cli_paths:
        path = _normalise(raw, "--workspace")
        existing = next((s for s in specs if s.path == path), None)
        if existing is None:
            existing = WorkspaceSpec(_unique_name(_name_for(path), specs), path)
            specs.append(existing)
        grants.append(Grant(who, existing.name, level))

    if read_only or _truthy(env.get("FSNOTES_READ_ONLY")):
        # --read-only caps every grant, including those from the config file.
        grants = [Grant(g.principal, g.workspace, min(g.access, Access.READ)) for g in grants]

    if not specs and require_workspace:
        raise ConfigError(
            "no workspace: pass --workspace PATH, set FSNOTES_WORKSPACE, or use --config FILE"
        )
    _check_layout(specs, state_path)
    setup = _setup_policy(
        file_cfg.get("setup", {}),
        setup_allow,
        setup_port,
        env,
        read_only=read_only or _truthy(env.get("FSNOTES_READ_ONLY")),
    )
    _check_setup_layout(setup, state_path)

    extensions = file_cfg.get("extensions", DEFAULT_EXTENSIONS)
    if not isinstance(extensions, list | tuple) or not all(
        isinstance(e, str) and e.startswith(".") and len(e) > 1 for e in extensions
    ):
        raise ConfigError("extensions must be a list like ['.md', '.txt']")

    rescan_interval, watch = _index_settings(file_cfg.get("index", {}), env)
    database, instance = _state_settings(file_cfg.get("state", {}), env)
    history = _history_settings(file_cfg.get("history", {}), env, no_history=no_history)
    daily = _prompt_settings(file_cfg.get("prompts", {}), tuple(extensions))
    http_table = file_cfg.get("http", {})
    try:
        http_settings = http_settings_from(
            http_table,
            http or env.get("FSNOTES_HTTP") or None,
            http_expose or _truthy(env.get("FSNOTES_HTTP_EXPOSE")),
        )
        tokens = config_tokens(http_table)
    except (SettingsError, OAuthConfigError) as exc:
        raise ConfigError(str(exc)) from None

    return Config(
        principal=who,
        state_dir=state_path,
        workspaces=specs,
        grants=grants,
        extensions=tuple(extensions),
        landlock=not (no_landlock or _truthy(env.get("FSNOTES_NO_LANDLOCK"))),
        allow_hardlinked_reads=bool(file_cfg.get("allow_hardlinked_reads", False)),
        setup=setup,
        config_file=os.path.abspath(config_file) if config_file else None,
        rescan_interval=rescan_interval,
        watch=watch,
        database=database,
        instance=instance,
        history=history,
        daily=daily,
        http=http_settings,
        config_tokens=tokens,
    )


STATE_KEYS = {"database", "instance"}
DSN_SCHEMES = ("postgresql://", "postgres://")
# An instance name shows in every audit row; a longer one is a mistake, not a name.
MAX_INSTANCE_CHARS = 100


def _state_settings(table: Any, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    if not isinstance(table, dict):
        raise ConfigError("[state] must be a table")
    unknown = set(table) - STATE_KEYS
    if unknown:
        raise ConfigError(f"unknown keys in [state]: {', '.join(sorted(unknown))}")
    database = env.get("FSNOTES_DATABASE") or table.get("database") or None
    # Never echo the value: it may hold a password.
    if database is not None and (
        not isinstance(database, str) or not database.startswith(DSN_SCHEMES)
    ):
        raise ConfigError(
            "[state] database (or FSNOTES_DATABASE) must be a PostgreSQL URI: "
            "postgresql://user:password@host:port/dbname"
        )
    instance = env.get("FSNOTES_INSTANCE") or table.get("instance") or None
    if instance is not None and (
        not isinstance(instance, str)
        or len(instance) > MAX_INSTANCE_CHARS
        or not instance.isprintable()
        or not instance.strip()
    ):
        raise ConfigError(
            f"[state] instance must be a printable name of at most {MAX_INSTANCE_CHARS} characters"
        )
    return database, instance


PROMPTS_KEYS = {"daily_template", "daily_path"}


def _prompt_settings(table: Any, extensions: tuple[str, ...]) -> DailySettings:
    if not isinstance(table, dict):
        raise ConfigError("[prompts] must be a table")
    unknown = set(table) - PROMPTS_KEYS
    if unknown:
        raise ConfigError(f"unknown keys in [prompts]: {', '.join(sorted(unknown))}")
    template = table.get("daily_template")
    path = table.get("daily_path", DEFAULT_DAILY_PATH)
    if template is not None and not isinstance(template, str):
        raise ConfigError("[prompts] daily_template must be a note's path in the workspace")
    if not isinstance(path, str):
        raise ConfigError("[prompts] daily_path must be a path such as 'journal/{date}.md'")
    try:
        return daily_settings(template, path, extensions)
    except ValueError as exc:
        raise ConfigError(f"[prompts] {exc}") from None


INDEX_KEYS = {"rescan_interval", "watch"}
# A full rescan more often than this would keep a core busy on a large vault; the watcher
# covers the seconds in between where it works.
MIN_RESCAN_INTERVAL_S = 1.0


def _index_settings(table: Any, env: Mapping[str, str]) -> tuple[float, bool]:
    if not isinstance(table, dict):
        raise ConfigError("[index] must be a table")
    unknown = set(table) - INDEX_KEYS
    if unknown:
        raise ConfigError(f"unknown keys in [index]: {', '.join(sorted(unknown))}")
    raw = env.get("FSNOTES_RESCAN_INTERVAL") or table.get(
        "rescan_interval", DEFAULT_RESCAN_INTERVAL_S
    )
    try:
        interval = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"rescan_interval must be a number of seconds, not {raw!r}") from None
    if not interval >= MIN_RESCAN_INTERVAL_S or interval == float("inf"):
        raise ConfigError(
            f"rescan_interval must be at least {MIN_RESCAN_INTERVAL_S:g} seconds, not {raw!r}"
        )
    watch = table.get("watch", True)
    if not isinstance(watch, bool):
        raise ConfigError("[index] watch must be true or false")
    if _truthy(env.get("FSNOTES_NO_WATCH")):
        watch = False
    return interval, watch


HISTORY_KEYS = {"enabled", "max_size_mib", "max_age_days"}
MIB = 1024 * 1024
DAY_S = 24 * 3600.0
# One version of the largest note must fit, or every change of such a note would be refused.
MIN_HISTORY_BYTES = MAX_NOTE_BYTES


def _history_settings(table: Any, env: Mapping[str, str], *, no_history: bool) -> HistorySettings:
    if not isinstance(table, dict):
        raise ConfigError("[history] must be a table")
    unknown = set(table) - HISTORY_KEYS
    if unknown:
        raise ConfigError(f"unknown keys in [history]: {', '.join(sorted(unknown))}")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError("[history] enabled must be true or false")
    if no_history or _truthy(env.get("FSNOTES_NO_HISTORY")):
        enabled = False
    size_raw = env.get("FSNOTES_HISTORY_MAX_SIZE_MIB") or table.get(
        "max_size_mib", DEFAULT_MAX_BYTES / MIB
    )
    age_raw = env.get("FSNOTES_HISTORY_MAX_AGE_DAYS") or table.get(
        "max_age_days", DEFAULT_MAX_AGE_S / DAY_S
    )
    try:
        max_bytes = int(float(size_raw) * MIB)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"history max_size_mib must be a number, not {size_raw!r}") from None
    if max_bytes < MIN_HISTORY_BYTES:
        raise ConfigError(
            f"history max_size_mib must be at least {MIN_HISTORY_BYTES / MIB:g} (one copy of "
            f"the largest note), not {size_raw!r}"
        )
    try:
        max_age_s = float(age_raw) * DAY_S
    except (TypeError, ValueError):
        raise ConfigError(f"history max_age_days must be a number, not {age_raw!r}") from None
    if not 0 < max_age_s < float("inf"):
        raise ConfigError(f"history max_age_days must be more than 0, not {age_raw!r}")
    return HistorySettings(enabled=enabled, max_bytes=max_bytes, max_age_s=max_age_s)


SETUP_KEYS = {"allow", "max_access", "port", "bind"}


def _setup_policy(
    table: Any,
    cli_allow: Sequence[str],
    cli_port: int | None,
    env: Mapping[str, str],
    *,
    read_only: bool,
) -> SetupPolicy:
    if not isinstance(table, dict):
        raise ConfigError("[setup] must be a table")
    unknown = set(table) - SETUP_KEYS
    if unknown:
        raise ConfigError(f"unknown keys in [setup]: {', '.join(sorted(unknown))}")
    raw_allow: list[str] = list(cli_allow)
    if not raw_allow and env.get("FSNOTES_SETUP_ALLOW"):
        raw_allow = [p for p in env["FSNOTES_SETUP_ALLOW"].split(os.pathsep) if p]
    if not raw_allow:
        file_allow = table.get("allow", [])
        if not isinstance(file_allow, list) or not all(isinstance(p, str) for p in file_allow):
            raise ConfigError("[setup] allow must be a list of folder paths")
        raw_allow = file_allow
    allow: list[str] = []
    for raw in raw_allow:
        path = _normalise(raw, "setup allow path")
        if path == "/":
            raise ConfigError("the setup allowlist cannot be '/': name the parent folders")
        try:
            lexical.path_components(path)
        except SandboxError as exc:
            raise ConfigError(f"setup allow path {raw!r}: {exc}") from None
        if path not in allow:
            allow.append(path)

    max_raw = env.get("FSNOTES_SETUP_MAX_ACCESS") or table.get("max_access") or "delete"
    try:
        max_access = Access.parse(str(max_raw))
    except ValueError as exc:
        raise ConfigError(f"setup max_access: {exc}") from None
    if read_only:
        max_access = Access.READ  # --read-only caps run-time grants too

    always_on = cli_port is not None
    port_raw: Any = cli_port
    if port_raw is None:
        port_raw = env.get("FSNOTES_SETUP_PORT") or table.get("port") or DEFAULT_SETUP_PORT
    try:
        port = int(port_raw)
    except (TypeError, ValueError):
        raise ConfigError(f"setup port must be a number, not {port_raw!r}") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"setup port {port} is out of range 1-65535")
    bind = str(env.get("FSNOTES_SETUP_BIND") or table.get("bind") or "127.0.0.1")
    try:
        ipaddress.ip_address(bind)
    except ValueError:
        raise ConfigError(f"setup bind must be an IP address, not {bind!r}") from None
    return SetupPolicy(
        allow=tuple(allow), max_access=max_access, port=port, bind=bind, always_on=always_on
    )


def _check_setup_layout(setup: SetupPolicy, state_dir: Path) -> None:
    """The state directory (keys, grants, the setup code) can never become grantable."""
    state_real = lexical.path_components(os.path.realpath(state_dir))
    for parent in setup.allow:
        real = lexical.path_components(os.path.realpath(parent))
        if _nested(real, state_real) or _nested(state_real, real):
            raise ConfigError(
                f"the state directory must be outside the setup allowlist folder {parent} "
                "(and not contain it): a grant could otherwise reach the keys and the setup code"
            )


def _name_for(path: str) -> str:
    return os.path.basename(path.rstrip("/")) or "root"


def _unique_name(name: str, specs: Sequence[WorkspaceSpec]) -> str:
    taken = {s.name for s in specs}
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}-{n}", n + 1
    return candidate


def _check_layout(specs: Sequence[WorkspaceSpec], state_dir: Path) -> None:
    """Workspaces may not nest or overlap, and the state directory lives outside all of them.

    Compared on real paths (symlinks resolved), because this is about where bytes land.
    """
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError("workspace names must be unique")
    real = []
    for s in specs:
        try:
            real.append((s, lexical.path_components(os.path.realpath(s.path))))
        except SandboxError as exc:
            raise ConfigError(f"workspace {s.name}: {exc}") from None
    state_real = lexical.path_components(os.path.realpath(state_dir))
    for i, (a, ac) in enumerate(real):
        if _nested(ac, state_real) or _nested(state_real, ac):
            raise ConfigError(
                f"the state directory must be outside workspace '{a.name}' (and not contain it)"
            )
        for b, bc in real[i + 1 :]:
            if _nested(ac, bc) or _nested(bc, ac):
                raise ConfigError(
                    f"workspaces '{a.name}' and '{b.name}' overlap; they must not nest"
                )


def _nested(base: tuple[str, ...], other: tuple[str, ...]) -> bool:
    return other[: len(base)] == base
