"""A real deployment for the tests (and the benchmark): HAProxy 2.6 from Debian on a free
loopback port, round-robin (a 2025-11-25 session kept on its instance) in front of N
``fsnotes serve --http`` processes.

What the instances share, as docs/team.md ("Shared state: several instances") says they must:
one PostgreSQL database (the replay store, the setup store, the audit log; ``[state]
database`` in one configuration file), one seal-keys.json (made once, copied into each state
directory), one bearer token (made by the real ``fsnotes token add``, its digest file copied
likewise), one notes directory. What each has of its own: its state directory (its search
index, its history copies), its loopback port, its name in the audit log
(``FSNOTES_INSTANCE``).

The balancer forwards the client's ``Host`` (``127.0.0.1:<balancer port>``), so the shared
configuration lists it in ``[http] allowed_hosts``; without it every instance answers 403 (the
DNS-rebinding guard). HAProxy names the instance that answered in an ``x-fsnotes-backend``
response header. Its health check is a TCP connect every :data:`CHECK_INTERVAL_MS`; a refused
connection is retried on another instance (``retry-on conn-failure`` with ``option
redispatch``), which is safe for any request: it never reached an instance. A request in
flight on an instance that dies is not retried by the balancer (it may have been executed);
the client sees a 502 and decides, as a client of any one server would.

Everything runs on loopback; processes are stopped by their process id (SIGTERM, then SIGKILL
after a bounded wait) and the temporary files are removed by the caller's tmp_path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pgcluster

from tests.transport.http_support import HttpServer, add_token

HAPROXY = "haproxy"
INSTALL_HINT = (
    "haproxy is not installed; `make sysdeps` (.ci/sysdeps.sh) installs Debian's haproxy 2.6"
)
# The TCP health check's period: a killed instance is out of the rotation within about this
# (and a refused connection is redispatched before that anyway).
CHECK_INTERVAL_MS = 200
# Bounds on the balancer's waits: far above any request of the tests, far below pytest's
# timeout, so a stuck request shows as a 504 rather than a hung test.
CONNECT_TIMEOUT_S = 2
SERVER_TIMEOUT_S = 60
START_TIMEOUT_S = 15
STOP_TIMEOUT_S = 15
PRINCIPAL = "ada"


def missing() -> str | None:
    """Why no deployment can be started here (HAProxy or PostgreSQL missing), or None."""
    if shutil.which(HAPROXY) is None and not Path("/usr/sbin/haproxy").exists():
        return INSTALL_HINT
    return pgcluster.missing()


def haproxy_binary() -> str:
    return shutil.which(HAPROXY) or "/usr/sbin/haproxy"


# 2026-07-28 requests carry no session: round-robin. A 2025-11-25 session lives in the
# instance that opened it: a stick table learns each Mcp-Session-Id from the response that
# issued it and sends every request naming it to that instance (deploy/haproxy.cfg does the
# same). A hash of the header would not do: the initialize request has none yet.
BALANCE = "roundrobin"
# Session ids are 32 random bytes in text (43 to 64 characters); a session idle this long is
# ended by the instance anyway (docs/http.md).
STICK_KEY_CHARS = 128
STICK_EXPIRE = "1h"


def haproxy_config(listen_port: int, backends: dict[str, int], balance: str = BALANCE) -> str:
    """The balancer's configuration: HTTP mode, ``balance`` over ``backends`` (name -> loopback
    port), TCP health checks, connection failures redispatched, the answering instance named
    in a response header."""
    servers = "\n".join(
        f"    server {name} 127.0.0.1:{port} check inter {CHECK_INTERVAL_MS}ms fall 1 rise 2"
        for name, port in backends.items()
    )
    return f"""\
global
    maxconn 512

defaults
    mode http
    timeout connect {CONNECT_TIMEOUT_S}s
    timeout client {SERVER_TIMEOUT_S}s
    timeout server {SERVER_TIMEOUT_S}s
    retries 3
    option redispatch 1
    retry-on conn-failure

frontend mcp
    bind 127.0.0.1:{listen_port}
    default_backend fsnotes

backend fsnotes
    balance {balance}
    stick-table type string len {STICK_KEY_CHARS} size 10k expire {STICK_EXPIRE}
    stick match req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
    http-response set-header x-fsnotes-backend %[srv_name]
{servers}
"""


class Balancer:
    """One HAProxy process in the foreground (``-db``), stopped by its process id."""

    def __init__(
        self, directory: Path, listen_port: int, backends: dict[str, int], balance: str = BALANCE
    ) -> None:
        self.port = listen_port
        self.config = directory / "haproxy.cfg"
        self.config.write_text(haproxy_config(listen_port, backends, balance))
        check = subprocess.run(
            [haproxy_binary(), "-c", "-f", str(self.config)], capture_output=True, text=True
        )
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused its configuration:\n{check.stderr}")
        self._log = open(directory / "haproxy.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [haproxy_binary(), "-db", "-f", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited: {self.log()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", listen_port), timeout=1),
            ):
                break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"haproxy did not listen on {listen_port}: {self.log()}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return (self.config.parent / "haproxy.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        stop_pid(self.proc)
        self._log.close()


def stop_pid(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop one process we started, by its id: ``sig``, then SIGKILL after a bounded wait."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


class Instance:
    """One ``fsnotes serve --http`` of the deployment."""

    def __init__(self, name: str, state: Path, server: HttpServer) -> None:
        self.name = name
        self.state = state
        self.server = server

    @property
    def pid(self) -> int:
        return int(self.server.proc.pid)

    def kill(self) -> None:
        """SIGKILL by process id: no shutdown of any kind (a crash, a lost machine)."""
        stop_pid(self.server.proc, signal.SIGKILL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Deployment:
    """N instances and the balancer in front of them; see the module docstring."""

    def __init__(
        self,
        root: Path,
        notes: Path,
        dsn: str,
        count: int = 3,
        balance: str = BALANCE,
        config_extra: str = "",
    ) -> None:
        from fsnotes.security.seal import KEYRING_NAME, Keyring
        from fsnotes.security.tokens import TOKENS_FILE

        self.root = root
        self.notes = notes
        self.dsn = dsn
        self.lb_port = free_port()
        names = [chr(ord("a") + i) for i in range(count)]
        states = [root / f"state-{n}" for n in names]
        self.token = add_token(states[0], PRINCIPAL)
        Keyring.load_or_create(states[0])
        for state in states[1:]:
            state.mkdir(mode=0o700)
            for name in (KEYRING_NAME, TOKENS_FILE):
                shutil.copy2(states[0] / name, state / name)
        self.config = root / "fsnotes.toml"
        self.config.write_text(
            "[state]\n"
            f"database = {json.dumps(dsn)}\n"
            "[http]\n"
            f"allowed_hosts = [{json.dumps(f'127.0.0.1:{self.lb_port}')}]\n" + config_extra
            # More of the shared configuration (e.g. [[http.token]] entries).
        )
        self.config.chmod(0o600)  # it holds the database password
        self.instances: dict[str, Instance] = {}
        self.balancer: Balancer | None = None
        try:
            failed: list[BaseException] = []

            def start(name: str, state: Path) -> None:
                try:
                    # Registered as soon as it runs, so that close() stops it whatever fails.
                    self.instances[name] = Instance(name, state, self.start_instance(name, state))
                except BaseException as exc:  # reported below, after every thread ended
                    failed.append(exc)

            pairs = list(zip(names, states, strict=True))
            threads = [threading.Thread(target=start, args=pair) for pair in pairs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if failed:
                raise failed[0]
            self.instances = {n: self.instances[n] for n in names}  # in name order
            self.balancer = Balancer(
                root,
                self.lb_port,
                {n: i.server.port for n, i in self.instances.items()},
                balance,
            )
        except BaseException:
            self.close()
            raise

    def start_instance(self, name: str, state: Path, port: int = 0) -> HttpServer:
        """``fsnotes serve --http 127.0.0.1:PORT`` of instance ``name`` (also to restart one
        on its old port)."""
        return HttpServer(
            [sys.executable, "-m", "fsnotes", "serve", "--config", str(self.config),
             "--workspace", str(self.notes), "--state-dir", str(state),
             "--principal", PRINCIPAL, "--http", f"127.0.0.1:{port}"],
            env={"FSNOTES_INSTANCE": name},
        )  # fmt: skip

    @property
    def url(self) -> str:
        assert self.balancer is not None
        return self.balancer.url

    def audit(self) -> list[dict[str, object]]:
        """Every audit row, read back with the real ``fsnotes audit --json``."""
        out = subprocess.run(
            [sys.executable, "-m", "fsnotes", "audit", "--json", "--config", str(self.config),
             "--state-dir", str(self.root / "state-a")],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]

    def close(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()
            self.balancer = None
        for instance in self.instances.values():
            instance.server.stop()


@contextlib.contextmanager
def deployed(
    root: Path,
    notes: Path,
    dsn: str,
    count: int = 3,
    balance: str = BALANCE,
    config_extra: str = "",
) -> Iterator[Deployment]:
    deployment = Deployment(root, notes, dsn, count, balance, config_extra)
    try:
        yield deployment
    finally:
        deployment.close()
