"""The embedded PostgreSQL: real clusters in temporary directories, real processes, a real kill -9."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Iterator

import psutil  # type: ignore[import-untyped]
import psycopg
import pytest

from rpc.db.embedded import EmbeddedPostgres
from tests.support import eventually

REPO = pathlib.Path(__file__).resolve().parent.parent

# A second process: start the cluster, report the URI and the postmaster pid, then stop: at once ("stop"),
# when told on stdin ("wait"), or never ("hang": it waits to be killed).
CHILD = """
import pathlib, sys, time
from rpc.db.embedded import EmbeddedPostgres
db = EmbeddedPostgres(pathlib.Path(sys.argv[1]))
uri = db.start()
pid = (pathlib.Path(sys.argv[1]) / "postmaster.pid").read_text().split()[0]
print(uri, pid, flush=True)
if sys.argv[2] == "hang":
    time.sleep(60)
if sys.argv[2] == "wait":
    sys.stdin.readline()
db.stop()
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A cold start (initdb, missing parents, CREATE DATABASE) once; tests start from copies of its result,
    which is quicker than initdb each time."""
    path = tmp_path_factory.mktemp("template") / ".data" / "pgdata"
    db = EmbeddedPostgres(path)
    db.start()
    db.stop()
    assert (path / "PG_VERSION").exists()
    return path


@pytest.fixture
def fresh_dir(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A data directory whose postgres processes are killed afterwards, whatever the test left behind."""
    path = tmp_path / "pgdata"
    yield path
    for proc in psutil.process_iter():
        if _cwd(proc) == path.resolve():
            proc.kill()


@pytest.fixture
def data_dir(template: pathlib.Path, fresh_dir: pathlib.Path) -> pathlib.Path:
    """An initialised, stopped cluster (cp -a keeps the owner: the pgserver user when running as root)."""
    subprocess.run(["cp", "-a", str(template), str(fresh_dir)], check=True)
    return fresh_dir


def _cwd(proc: psutil.Process) -> pathlib.Path | None:
    try:
        return pathlib.Path(proc.cwd()) if proc.name() == "postgres" else None
    except psutil.Error:
        return None


def postmaster_pid(data_dir: pathlib.Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


def exited(pid: int) -> bool:
    """Gone or a zombie: an orphan's zombie lingers until PID 1 reaps it, which may be late (or never)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def assert_stopped(pid: int) -> None:
    eventually(lambda: exited(pid), f"postmaster {pid} stopped", timeout=5)


def select_one(uri: str) -> int:
    with psycopg.connect(uri) as conn:
        row = conn.execute("SELECT 1").fetchone()
    assert row is not None
    return int(row[0])


def started_child(data_dir: pathlib.Path, mode: str = "hang") -> tuple[subprocess.Popen[str], int]:
    """A child that started the cluster and still runs, and the postmaster's pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data_dir), mode],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    _uri, pid = proc.stdout.readline().split()
    return proc, int(pid)


def kill9(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=5)
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.close()
    proc.stdout.close()


def test_start_gives_a_working_database_with_the_extensions(data_dir: pathlib.Path) -> None:
    db = EmbeddedPostgres(data_dir)
    uri = db.start()
    try:
        assert uri.startswith("postgresql://")
        assert db.start() == uri  # idempotent
        with psycopg.connect(uri, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert conn.execute("SELECT current_database()").fetchone() == ("hire",)
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
            row = conn.execute("SELECT similarity('recruiter', 'recruiters') > 0.5").fetchone()
            assert row == (True,)
        pid = postmaster_pid(data_dir)
    finally:
        db.stop()
    assert_stopped(pid)
    db.stop()  # a second stop is harmless


def test_two_objects_in_one_process_share_one_cluster(data_dir: pathlib.Path) -> None:
    first, second = EmbeddedPostgres(data_dir), EmbeddedPostgres(data_dir, database="other")
    first_uri = first.start()
    pid = postmaster_pid(data_dir)
    second_uri = second.start()
    assert postmaster_pid(data_dir) == pid
    first.stop()
    assert select_one(second_uri) == 1  # still up: the second object holds it
    assert select_one(first_uri) == 1
    second.stop()
    assert_stopped(pid)


def test_a_second_process_reuses_the_running_cluster(data_dir: pathlib.Path) -> None:
    db = EmbeddedPostgres(data_dir)
    uri = db.start()
    pid = postmaster_pid(data_dir)
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(data_dir), "stop"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.split()
        assert out == [uri, str(pid)]  # same cluster, same URI
        assert select_one(uri) == 1  # the child's stop left it running for us
    finally:
        db.stop()
    assert_stopped(pid)


def test_the_last_process_out_stops_the_cluster(data_dir: pathlib.Path) -> None:
    proc, pid = started_child(data_dir, "wait")  # the child starts it ...
    db = EmbeddedPostgres(data_dir)
    uri = db.start()  # ... we join ...
    proc.communicate("\n", timeout=30)  # ... the child stops and exits ...
    assert proc.returncode == 0
    assert postmaster_pid(data_dir) == pid
    assert select_one(uri) == 1  # ... leaving it running for us ...
    db.stop()  # ... and we, the last user, stop it
    assert_stopped(pid)


def test_an_orphan_postmaster_after_kill_9_is_reused(data_dir: pathlib.Path) -> None:
    proc, pid = started_child(data_dir)
    kill9(proc)
    assert not exited(pid)  # the orphan
    db = EmbeddedPostgres(data_dir)
    uri = db.start()
    assert postmaster_pid(data_dir) == pid  # reused, not restarted
    assert select_one(uri) == 1
    db.stop()  # the dead owner no longer counts as a user, so this stops it
    assert_stopped(pid)


def test_a_dead_orphan_is_cleaned_up_and_replaced(data_dir: pathlib.Path) -> None:
    proc, pid = started_child(data_dir)
    kill9(proc)
    os.kill(pid, signal.SIGKILL)  # the postmaster dies too; postmaster.pid and maybe its children remain
    assert_stopped(pid)
    db = EmbeddedPostgres(data_dir)
    uri = db.start()
    new_pid = postmaster_pid(data_dir)
    assert new_pid != pid
    assert select_one(uri) == 1
    db.stop()
    assert_stopped(new_pid)


def test_a_postmaster_pid_naming_another_live_process_is_stale(data_dir: pathlib.Path) -> None:
    db = EmbeddedPostgres(data_dir)
    db.start()
    pid_file = data_dir / "postmaster.pid"
    lines = pid_file.read_text().splitlines()
    db.stop()
    assert_stopped(int(lines[0]))
    pid_file.write_text("\n".join([str(os.getpid()), *lines[1:]]) + "\n")  # as after a reboot and pid reuse
    uri = db.start()
    assert postmaster_pid(data_dir) != os.getpid()
    assert select_one(uri) == 1
    db.stop()
