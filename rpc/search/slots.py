"""Where a process keeps its index: `DATA_DIR/search/<corpus>/slot-N`, one per process at a time.

The slots of one corpus sit under the corpus's fingerprint (its shape) and the database's identity (the
cluster's system identifier and the database's oid), so an index is never read against another database than
the one it was built from — a restored backup, or the test suite's many databases.

Each server process takes the first slot no other process holds (an exclusive `flock` on its `lock` file, let go
by the kernel when the process ends, however it ends), so several processes of one host never share a writer,
and a restarted process finds an index a few moments old and catches up instead of building anew.

Inside a slot, `current` names the generation being served (`gen-<stamp>/`: the index files and
`position.json`); `incoming` names a newer generation that `bin/admin rebuild-search` left for the holder to
take up.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_SLOTS = 64
_POSITION_FILE = "position.json"
IDENTITY_SQL = """
SELECT (SELECT system_identifier FROM pg_control_system())::text || '/' || oid::text AS identity
FROM pg_database WHERE datname = current_database()
"""


class NoFreeSlot(RuntimeError):
    """Every slot is held: more processes on this host than MAX_SLOTS."""


@dataclass(frozen=True, slots=True)
class Generation:
    """One complete index on disk and the position it holds."""

    path: Path

    def position(self, fingerprint: str) -> int | None:
        """The position written when it was committed, or None when it is missing or of another shape."""
        try:
            kept = json.loads((self.path / _POSITION_FILE).read_text())
        except (OSError, ValueError):
            return None
        if kept.get("fingerprint") != fingerprint or not isinstance(kept.get("position"), int):
            return None
        return int(kept["position"])

    def record(self, fingerprint: str, position: int) -> None:
        """Written after each commit (atomically): a crash between the two leaves an older position, and
        replaying changes onto an index that has them already changes nothing."""
        _write(self.path / _POSITION_FILE, json.dumps({"fingerprint": fingerprint, "position": position}))


class Slot:
    """A slot held by this process until `release`."""

    def __init__(self, path: Path, lock: int) -> None:
        self.path = path
        self._lock = lock

    @classmethod
    def take(cls, root: Path) -> Slot:
        """The first slot under `root` that no process holds."""
        for number in range(MAX_SLOTS):
            held = try_hold(root / f"slot-{number}")
            if held is not None:
                return cls(root / f"slot-{number}", held)
        raise NoFreeSlot(f"all {MAX_SLOTS} search index slots under {root} are held by running processes")

    def release(self) -> None:
        os.close(self._lock)

    @property
    def current(self) -> Generation | None:
        return current_generation(self.path)

    @property
    def incoming(self) -> Generation | None:
        return _named(self.path, "incoming")

    def new_generation(self) -> Generation:
        path = self.path / f"gen-{time.time_ns()}"
        path.mkdir(parents=True)
        return Generation(path)

    def serve(self, generation: Generation) -> None:
        """Make `generation` the one served, dropping every other (an `incoming` one taken up included)."""
        _write(self.path / "current", generation.path.name)
        with contextlib.suppress(FileNotFoundError):
            (self.path / "incoming").unlink()
        for other in self.path.glob("gen-*"):
            if other != generation.path:
                shutil.rmtree(other, ignore_errors=True)


def corpus_root(root: Path, corpus: str, fingerprint: str, identity: str) -> Path:
    """Where the slots of `corpus` of this shape, built from the database of `identity`, live."""
    return root / corpus / fingerprint / hashlib.sha256(identity.encode()).hexdigest()[:16]


def try_hold(path: Path) -> int | None:
    """The slot's lock, held; None when another process holds it."""
    path.mkdir(parents=True, exist_ok=True)
    lock = os.open(path / "lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return None
    return lock


def slots(root: Path) -> Iterator[Path]:
    """Every slot made so far under `root`."""
    return iter(sorted(root.glob("slot-*")))


def offer(slot: Path, built: Generation) -> Generation:
    """A copy of `built` in `slot` (hard links: index files are never changed once written), named `incoming`
    for the process that holds the slot to take up."""
    copy = slot / f"gen-{time.time_ns()}"
    shutil.copytree(built.path, copy, copy_function=os.link)
    _write(slot / "incoming", copy.name)
    return Generation(copy)


def current_generation(slot: Path) -> Generation | None:
    """The generation a slot serves (readable while a process holds the slot: its files never change)."""
    return _named(slot, "current")


def _named(slot: Path, pointer: str) -> Generation | None:
    try:
        name = (slot / pointer).read_text().strip()
    except FileNotFoundError:
        return None
    path = slot / name
    return Generation(path) if name.startswith("gen-") and path.is_dir() else None


def _write(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(text)
    os.replace(scratch, path)
