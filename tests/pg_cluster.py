"""A throwaway PostgreSQL server for tests: `initdb` + `pg_ctl` in a temp dir, on a free loopback port,
run as the `postgres` OS user (the server refuses root). Fails loudly when it cannot be started."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.loadgen_servers import free_port

OS_USER = "postgres"
HOW_TO_GET_IT = "install Debian's `postgresql` package (apt-get install postgresql) and run the tests as root"


class NoPostgres(RuntimeError):
    """The server binaries or the rights to start them are missing."""


def server_bin(root: str = "/usr/lib/postgresql") -> Path:
    """The newest ROOT/<major>/bin holding pg_ctl (Debian's layout)."""
    found = sorted(glob.glob(f"{root}/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise NoPostgres(f"no PostgreSQL server binaries under {root}/*/bin: {HOW_TO_GET_IT}")
    return Path(found[-1]).parent


@dataclass
class PgCluster:
    """A running cluster: superuser `postgres` with a random password, TCP on 127.0.0.1:port."""

    bin: Path
    data: Path
    port: int
    password: str

    def _as_postgres(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = ["runuser", "-u", OS_USER, "--", *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60)

    def start(self) -> None:
        """pg_ctl start and wait until it accepts connections."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-l", str(self.log), "start")

    def stop(self) -> None:
        """pg_ctl stop (fast: connections are dropped, as in an outage)."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m", "fast", "stop")

    @property
    def log(self) -> Path:
        """The server's log file."""
        return self.data.parent / "server.log"

    def url(self, database: str = "postgres", *, with_password: bool = True) -> str:
        """A libpq URI of the superuser on `database`."""
        secret = f":{self.password}" if with_password else ""
        return f"postgresql://postgres{secret}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A fresh empty database; returns its name."""
        import psycopg

        name = f"t_{secrets.token_hex(4)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name


def _init(root: Path, password: str) -> tuple[Path, Path, int]:
    data, socket_dir, pwfile = root / "data", root / "sock", root / "pwfile"
    socket_dir.mkdir()
    pwfile.write_text(password + "\n")
    user = pwd.getpwnam(OS_USER)
    for path in (root, socket_dir, pwfile):
        os.chown(path, user.pw_uid, user.pw_gid)
    bin_dir = server_bin()
    init = [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", f"--pwfile={pwfile}"]
    init += ["--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"]
    subprocess.run(["runuser", "-u", OS_USER, "--", *init], capture_output=True, text=True, check=True)
    port = free_port()
    conf = f"\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{socket_dir}'\n"
    conf += "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
    with (data / "postgresql.conf").open("a") as fh:
        fh.write(conf)
    return bin_dir, data, port


@contextmanager
def pg_cluster() -> Iterator[PgCluster]:
    """Start a cluster in a temp dir (readable by the postgres user), stop and remove it after."""
    if os.geteuid() != 0:
        raise NoPostgres(f"starting a test PostgreSQL needs root (to run it as {OS_USER!r}): {HOW_TO_GET_IT}")
    try:
        pwd.getpwnam(OS_USER)
    except KeyError:
        raise NoPostgres(f"no {OS_USER!r} OS user: {HOW_TO_GET_IT}") from None
    root = Path(tempfile.mkdtemp(prefix="infergauge-pg-"))  # not under pytest's root-only tmp dirs
    try:
        password = "pw-" + secrets.token_hex(8)
        bin_dir, data, port = _init(root, password)
        cluster = PgCluster(bin_dir, data, port, password)
        cluster.start()
        try:
            yield cluster
        finally:
            if (data / "postmaster.pid").exists():
                cluster.stop()
    except subprocess.CalledProcessError as exc:
        raise NoPostgres(f"{exc.cmd[3:5]} failed: {(exc.stderr or exc.stdout).strip()[-500:]}") from None
    finally:
        shutil.rmtree(root, ignore_errors=True)
