"""``fsnotes doctor``: which containment layers are active here, and why not.

:func:`report` gathers the facts as a JSON-ready dict (for ``--json``);
:func:`format_text` turns that dict into plain sentences for people. Neither prints.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from fsnotes.notes.index.indexer import environment as index_environment
from fsnotes.transport.http_settings import LOOPBACK_NAMES, HttpSettings
from sandbox import probe
from sandbox.jail import JailReport, abi_gaps, applied_report

__all__ = ["format_text", "history_facts", "report"]

# Capabilities that would let a process step around file permissions or the jail.
_DANGEROUS_CAPS = frozenset(
    {"dac_override", "dac_read_search", "fowner", "sys_admin", "sys_ptrace", "setuid"}
)

_SECCOMP_NOTE = (
    "fsnotes installs no seccomp filter of its own: Landlock and the container already "
    "confine files, TCP and Unix-socket IPC, and the one well-known Python binding "
    "(pyseccomp) has had no release since 2021"
)


def history_facts(
    *,
    config_file: str | None = None,
    state_dir: str | None = None,
    no_history: bool = False,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Whether ``fsnotes serve`` with these settings (and the environment's) keeps history,
    where and within which bounds."""
    from fsnotes.app.config import ConfigError, load
    from fsnotes.state import history_store

    try:
        config = load(
            config_file=config_file,
            state_dir=state_dir,
            no_history=no_history,
            require_workspace=False,
            env=env,
        )
    except ConfigError as exc:
        return {"enabled": None, "detail": f"unknown: the configuration is not usable ({exc})"}
    h = config.history
    return {
        "enabled": h.enabled,
        "store": str(config.state_dir / history_store.DB_NAME),
        "max_size_bytes": h.max_bytes,
        "max_age_days": h.max_age_s / 86400,
    }


def report(
    applied: JailReport | None = None,
    *,
    history: dict[str, Any] | None = None,
    http: HttpSettings | None = None,
    http_principals: list[str] | None = None,
    served_principal: str | None = None,
    ungranted_principals: list[str] | None = None,
) -> dict[str, Any]:
    """The facts about this process and machine, as plain JSON types.

    ``applied``: the report of the jail this process applied, if any (defaults to the one
    :func:`sandbox.jail.apply_landlock` recorded in this process). ``history``: from
    :func:`history_facts` (defaults to the environment's settings). ``http``: the HTTP
    settings ``fsnotes serve`` would use (``None``: it would serve stdio), with the principals
    its tokens act for, the principal it would serve (the one ``--workspace`` grants to) and
    the token principals to whom no workspace is granted (a WARNING each time).
    """
    facts = probe.probe()
    jail = applied if applied is not None else applied_report()
    warnings: list[str] = []

    if jail is not None and jail.applied:
        landlock_state = "applied"
    elif facts.landlocked:
        landlock_state = "inherited"
    elif facts.landlock_abi is not None:
        landlock_state = "available"
    else:
        landlock_state = "unavailable"
        warnings.append(
            f"Landlock is unavailable ({facts.landlock_detail}): only layers 1 and 2 and any "
            "container or launcher protect files outside the workspaces."
        )

    if facts.euid == 0:
        warnings.append(
            "Running as root. Landlock still confines file access, but root may chmod, "
            "chown and stat outside it, and a root process in a container is one kernel "
            "bug away from the host. Run as a normal user (docker run --user)."
        )
    risky = sorted(_DANGEROUS_CAPS.intersection(facts.capabilities or ()))
    if risky:
        warnings.append(f"The process holds capabilities it does not need: {', '.join(risky)}.")
    if facts.openat2 is False:
        warnings.append(
            f"{facts.openat2_detail}: equally safe, a little slower per file operation."
        )

    gaps = abi_gaps(facts.landlock_abi) if facts.landlock_abi is not None else ([], [])
    setup_page = _setup_page(facts.landlock_abi)
    http_report = _http(http, http_principals, facts.landlock_abi)
    if http is not None:
        http_report["served_principal"] = served_principal
        http_report["ungranted_principals"] = sorted(ungranted_principals or [])
        if ungranted_principals and served_principal is not None:
            from fsnotes.app.principals import ungranted_advice

            warnings.append(ungranted_advice(sorted(ungranted_principals), served_principal))
    if http is not None and not http.loopback:
        warnings.append(
            f"--http binds {http.host}, not a loopback address: {http_report['exposes']}."
        )
    index = index_environment()
    if not index["fts5"]:
        warnings.append(
            "This Python's SQLite has no FTS5: fsnotes cannot build its search index here."
        )

    if history is None:
        history = history_facts()
    if history["enabled"] is False:
        warnings.append(
            "History is off: a note a model overwrites, moves or deletes cannot be restored."
        )

    return {
        "history": history,
        "http": http_report,
        "setup_page": setup_page,
        "search_index": index,
        "platform": facts.platform,
        "python": sys.version.split()[0],
        "layers": {
            "path_resolution": {
                "mechanism": "openat2" if facts.openat2 else "component walk",
                "openat2": facts.openat2,
                "detail": facts.openat2_detail,
            },
            "landlock": {
                "state": landlock_state,
                "abi": facts.landlock_abi,
                "detail": facts.landlock_detail,
                "detected_in_process": facts.landlocked,
                "detected_detail": facts.landlocked_detail,
                "applied": dataclasses.asdict(jail) if jail is not None else None,
                # What this kernel's ABI leaves unrestricted, as `fsnotes serve` would report.
                "gaps": gaps[0],
                "gaps_not_yet": gaps[1],
            },
            "container": {"kind": facts.container, "detail": facts.container_detail},
            "namespaces": {
                "user_namespaces": facts.user_namespaces,
                "detail": facts.user_namespaces_detail,
            },
            "seccomp": {
                "mode": facts.seccomp,
                "filters": facts.seccomp_filters,
                "own_filter": False,
                "note": _SECCOMP_NOTE,
            },
            "privileges": {
                "uid": facts.uid,
                "euid": facts.euid,
                "root": facts.euid == 0,
                "capabilities": facts.capabilities,
                "no_new_privs": facts.no_new_privs,
            },
        },
        "warnings": warnings,
    }


# starlette and uvicorn are dependencies of fsnotes: missing means a broken or --no-deps install.
_REINSTALL = "pip install --force-reinstall fsnotes (starlette and uvicorn are its dependencies)"

# Landlock handles TCP bind/connect from ABI 4 (Linux 6.7): only then can the jail limit the
# setup page to its one port.
_LANDLOCK_NET_ABI = 4


def _setup_page(abi: int | None) -> dict[str, Any]:
    """Whether the setup page (notes_setup) can run here, and how well it is confined."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for package in ("starlette", "uvicorn"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    installed = all(versions.values())
    return {
        "http_stack": versions,
        "available": installed,
        "landlock_limits_ports": abi is not None and abi >= _LANDLOCK_NET_ABI,
        "detail": (
            "the setup page can run (enable it with --setup-allow)"
            if installed
            else "the setup page's HTTP stack is not installed: " + _REINSTALL
        ),
    }


def _http(
    settings: HttpSettings | None, principals: list[str] | None, abi: int | None
) -> dict[str, Any]:
    """The HTTP endpoint's settings and what they expose (``enabled`` false: stdio)."""
    stack = _stack_versions()
    base: dict[str, Any] = {
        "enabled": settings is not None,
        "http_stack": stack,
        "available": all(stack.values()),
        "landlock_limits_ports": abi is not None and abi >= _LANDLOCK_NET_ABI,
    }
    if settings is None:
        base["exposes"] = "nothing: fsnotes serves stdio unless --http [HOST:]PORT is given"
        return base
    port = settings.port
    base.update(
        {
            "bind": settings.host,
            "port": port,
            "loopback": settings.loopback,
            "exposed_flag": settings.expose,
            "allowed_hosts": sorted(settings.allowed_hosts(port)),
            "allowed_origins": sorted(settings.allowed_origins(port)),
            "token_principals": sorted(principals or []),
            "exposes": settings.describe(port)
            + (
                f"; tokens act for {', '.join(repr(p) for p in sorted(principals))}"
                if principals
                else ""
                if settings.oauth is not None
                else "; no token is configured yet (fsnotes token add), so every request "
                "would be refused"
            ),
        }
    )
    oauth = settings.oauth
    base["oauth"] = (
        None
        if oauth is None
        else {
            "issuer": oauth.issuer,
            "audience": oauth.audience,
            "metadata_url": oauth.metadata_url,
            "scopes_supported": list(oauth.scopes_supported),
            "principal_claim": oauth.principal_claim,
            "connect_ports": oauth.tcp_ports(),
        }
    )
    if oauth is not None:
        base["exposes"] += (
            f"; OAuth access tokens of {oauth.issuer} for {oauth.audience} act for their "
            f"{oauth.principal_claim!r} claim"
        )
    return base


def _stack_versions() -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for package in ("starlette", "uvicorn"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _http_lines(info: dict[str, Any]) -> list[str]:
    if not info["enabled"]:
        stack = "installed" if info["available"] else f"not installed ({_REINSTALL})"
        return [f"HTTP: off; {info['exposes']}. The HTTP stack is {stack}."]
    lines = [f"HTTP: {info['exposes']}."]
    if info.get("served_principal") is not None:
        lines.append(
            f"  Serves principal {info['served_principal']!r}: --workspace grants to it "
            "(--principal, FSNOTES_PRINCIPAL, the configuration's principal, else the OS user)."
        )
    names = ", ".join(n for n in LOOPBACK_NAMES)
    lines.append(
        f"  Host must be one of {len(info['allowed_hosts'])} values (the loopback names "
        f"{names} with the port, and any configured); a present Origin one of "
        f"{len(info['allowed_origins'])}; anything else gets 403."
    )
    oauth = info.get("oauth")
    where = (
        "to the OAuth issuer's port(s) " + ", ".join(str(p) for p in oauth["connect_ports"])
        if oauth
        else "nowhere"
    )
    lines.append(
        "  Landlock: the endpoint's socket is bound before the jail, and the process may bind "
        f"no other port (but the setup page's) and connect {where}."
        if info["landlock_limits_ports"]
        else "  This kernel's Landlock cannot limit TCP ports (needs ABI 4, Linux 6.7)."
    )
    if not info["available"]:
        lines.append(f"  The HTTP stack is not installed: {_REINSTALL}.")
    return lines


def _index_lines(index: dict[str, Any]) -> list[str]:
    fts = "FTS5 available" if index["fts5"] else f"no FTS5 ({index.get('fts5_detail')})"
    lines = [f"Search index: SQLite {index['sqlite']}, {fts}."]
    interval = index["default_rescan_interval_s"]
    if index["inotify"]:
        kernel = index["max_user_watches"]
        lines.append(
            f"  Watcher: inotify, one watch per folder (about 1 KiB of kernel memory each), "
            f"at most {index['watch_budget']:,} per process (a quarter of this user's "
            f"max_user_watches, {kernel:,}, shared with editors and sync tools); folders "
            "past that are seen by the rescan only."
            if kernel is not None
            else f"  Watcher: inotify, at most {index['watch_budget']:,} folders per process."
        )
    else:
        lines.append(f"  Watcher: unavailable ({index.get('inotify_detail')}).")
    lines.append(
        f"  Rescan: every {interval:g} s by default ([index] rescan_interval, "
        "FSNOTES_RESCAN_INTERVAL), the freshness bound where inotify sees nothing: network "
        "filesystems and Docker Desktop bind mounts from macOS or Windows."
    )
    return lines


def _history_lines(history: dict[str, Any]) -> list[str]:
    if history["enabled"] is None:
        return [f"History: {history['detail']}."]
    if not history["enabled"]:
        return [
            "History: off (--no-history, FSNOTES_NO_HISTORY=1 or [history] enabled = false): "
            "notes_update, notes_move and notes_delete keep no copy of what they replace, and "
            "notes_restore has nothing to bring back."
        ]
    size_mib = history["max_size_bytes"] / (1024 * 1024)
    return [
        f"History: on; notes_update, notes_move and notes_delete keep what they replace in "
        f"{history['store']}, at most {size_mib:g} MiB and {history['max_age_days']:g} days "
        "(oldest pruned first; [history] max_size_mib, max_age_days).",
        "  --no-history (FSNOTES_NO_HISTORY=1) keeps no copies.",
    ]


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "no")


def format_text(report: dict[str, Any]) -> str:
    """Plain sentences for people, one layer per paragraph, warnings last."""
    layers = report["layers"]
    lines = [f"fsnotes doctor ({report['platform']}, Python {report['python']})", ""]

    path = layers["path_resolution"]
    lines.append(f"Path resolution (layer 2): {path['mechanism']}.")
    lines.append(f"  {path['detail']}.")

    ll = layers["landlock"]
    state = ll["state"]
    if state == "applied":
        applied = ll["applied"]
        lines.append(f"Landlock (layer 3): applied, ABI {applied['abi']}.")
        lines.append(f"  Files: the kernel mediates {', '.join(applied['handled_fs'])}.")
        if applied["handled_net"]:
            lines.append(f"  Network: {', '.join(applied['handled_net'])} denied unless allowed.")
        if applied["scoped"]:
            lines.append(f"  Scoped to this process: {', '.join(applied['scoped'])}.")
        for gap in applied["not_applied"]:
            lines.append(f"  Not restricted: {gap}.")
        for gap in applied.get("not_yet", []):
            lines.append(f"  Left to a kernel not released yet (nothing to do here): {gap}.")
    elif state == "inherited":
        lines.append(f"Landlock (layer 3): this process is restricted ({ll['detected_detail']}).")
    elif state == "available":
        lines.append(
            f"Landlock (layer 3): available ({ll['detail']}), not applied in this process; "
            "`fsnotes serve` applies it at start-up unless --no-landlock is given."
        )
        for gap in ll["gaps"]:
            lines.append(f"  Would not restrict: {gap}.")
        for gap in ll["gaps_not_yet"]:
            lines.append(f"  Left to a kernel not released yet (nothing to do here): {gap}.")
    else:
        lines.append(f"Landlock (layer 3): unavailable: {ll['detail']}.")

    container = layers["container"]
    if container["kind"]:
        lines.append(f"Container: yes, {container['kind']} ({container['detail']}).")
    else:
        lines.append(f"Container: no ({container['detail']}).")

    ns = layers["namespaces"]
    usable = {True: "usable", False: "not usable", None: "unknown"}[ns["user_namespaces"]]
    lines.append(f"User namespaces (for sandbox/fsnotes-bwrap.sh): {usable}; {ns['detail']}.")

    sc = layers["seccomp"]
    mode = sc["mode"] or "unknown"
    if mode == "filter":
        lines.append(
            f"Seccomp: {sc['filters']} filter(s) active, installed by the container runtime or "
            "a launcher."
        )
    else:
        lines.append(f"Seccomp: {mode}.")
    lines.append(f"  {sc['note']}.")

    page = report["setup_page"]
    lines.append(f"Setup page (notes_setup): {page['detail']}.")
    if page["available"]:
        stack = ", ".join(f"{k} {v}" for k, v in page["http_stack"].items())
        ports = (
            "Landlock limits binding to its one port"
            if page["landlock_limits_ports"]
            else "this kernel's Landlock cannot limit TCP ports (needs ABI 4, Linux 6.7)"
        )
        lines.append(f"  {stack}; {ports}.")

    lines.extend(_http_lines(report["http"]))
    lines.extend(_index_lines(report["search_index"]))
    lines.extend(_history_lines(report["history"]))

    priv = layers["privileges"]
    caps = priv["capabilities"]
    caps_text = "unknown" if caps is None else (", ".join(caps) if caps else "none")
    lines.append(
        f"Privileges: uid {priv['uid']} (effective {priv['euid']}), capabilities: {caps_text}; "
        f"no_new_privs: {_yes_no(priv['no_new_privs'])}."
    )

    if report["warnings"]:
        lines.append("")
        lines.extend(f"WARNING: {w}" for w in report["warnings"])
    return "\n".join(lines) + "\n"
