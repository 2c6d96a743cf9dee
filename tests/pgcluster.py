"""A real PostgreSQL 15 from Debian, started for the tests (and the benchmark) on loopback.

``initdb`` in a temporary directory (readable by the ``postgres`` user, which runs the server
when we are root: PostgreSQL refuses to run as root), ``pg_ctl start`` on a free loopback port
with its Unix socket in that directory, and a stop by process id (the postmaster's pid from
``postmaster.pid``; SIGINT is PostgreSQL's "fast" shutdown), then the directory removed.

Nothing else on the machine is touched: no system cluster, no service, no port but the one
picked here.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql/15/bin")
INSTALL_HINT = (
    "PostgreSQL 15 is not installed (/usr/lib/postgresql/15/bin/initdb is missing); "
    "`make sysdeps` (.ci/sysdeps.sh) installs Debian's postgresql-15"
)
START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 30
PASSWORD = "s3cret-pw-for-tests"


def missing() -> str | None:
    """Why no cluster can be started here, or None."""
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "pg_ctl").exists():
        return INSTALL_HINT
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, but there is no 'postgres' user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root, but runuser (util-linux) is missing"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One PostgreSQL server in its own temporary directory."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fsnotes-pg-"))
        self.data = self.dir / "data"
        self.socket_dir = self.dir / "run"
        self.socket_dir.mkdir()
        self.port = free_port()
        self.pid: int | None = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            for path in (self.dir, self.socket_dir):
                os.chown(path, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        else:
            self._as = []
        self.dir.chmod(0o755)  # the postgres user reaches its data directory through it
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._as:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        pwfile.chmod(0o600)
        self._run(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--pwfile",
            str(pwfile),
            "--auth=scram-sha-256",
            "--auth-local=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",  # a test cluster: no fsync of the fresh files
        )
        pwfile.unlink()

    def _run(self, *argv: str) -> None:
        proc = subprocess.run(
            [*self._as, *argv], capture_output=True, text=True, timeout=120, cwd=self.dir
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")

    def start(self, *, durable: bool = False) -> None:
        """Start (again) on the same port. ``durable``: fsync on, as in production (the
        benchmark); the tests run without it, a crash of a test cluster loses nothing."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.socket_dir} -c fsync={'on' if durable else 'off'} "
            "-c max_connections=200 -c shared_buffers=32MB"
        )
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.dir / "log"),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "start",
        )
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        """Fast shutdown by process id: sessions are ended, the server exits."""
        pid, self.pid = self.pid, None
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def dsn(self, dbname: str = "postgres", *, user: str = "postgres") -> str:
        return f"postgresql://{user}:{PASSWORD}@127.0.0.1:{self.port}/{dbname}"

    def socket_dsn(self, dbname: str) -> str:
        return f"postgresql://postgres:{PASSWORD}@/{dbname}?host={self.socket_dir}&port={self.port}"

    def new_database(self) -> str:
        """A fresh, empty database; its DSN."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def drop_database(self, dsn: str) -> None:
        import psycopg

        name = dsn.rsplit("/", 1)[1]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def running(*, durable: bool = False) -> Iterator[Cluster]:
    cluster = Cluster()
    try:
        cluster.start(durable=durable)
        yield cluster
    finally:
        cluster.close()
