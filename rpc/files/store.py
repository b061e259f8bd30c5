"""Where the bytes of files live, under each file's id: the embedded store (a directory under DATA_DIR, the
default: `bin/serve` needs nothing else) or an S3-compatible bucket (`FILES_STORE=s3://bucket/prefix`,
rpc/files/s3.py). Bytes are always written before the File's row commits, and deleted only after it is gone."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

CHUNK = 256 * 1024


class Store(Protocol):
    """The bytes of files by key (the file's id)."""

    async def put(self, key: str, source: Path) -> None:
        """Keep the bytes of `source` under `key`, durably, before returning."""

    def read(self, key: str) -> AsyncIterator[bytes]:
        """The bytes under `key`, a chunk at a time."""

    async def delete(self, key: str) -> None:
        """Forget `key`; nothing under it is no error."""

    def listing(self) -> AsyncIterator[tuple[str, dt.datetime]]:
        """Every key held, with when it was written: file ids, and the drafts of writes a crash interrupted
        (any other key, which is no id)."""


class EmbeddedStore:
    """A directory: `<root>/<first two characters of the key>/<key>`, each file written beside its place, flushed
    to disk and renamed into it, so that a crash leaves either the whole file or none (and a draft to sweep)."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def _path(self, key: str) -> Path:
        """A file id's place, or a draft's (`.<id>.<random>`); a key is never a path of its own."""
        if key.startswith("."):
            file_id, _, rest = key[1:].partition(".")
            return self._root / file_id[:2] / f".{uuid.UUID(file_id)}.{uuid.UUID(rest).hex}"
        return self._root / key[:2] / str(uuid.UUID(key))

    async def put(self, key: str, source: Path) -> None:
        await asyncio.to_thread(self._put, self._path(key), source)

    @staticmethod
    def _put(target: Path, source: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        draft = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
        try:
            with source.open("rb") as reader, draft.open("wb") as writer:
                shutil.copyfileobj(reader, writer, CHUNK)
                writer.flush()
                os.fsync(writer.fileno())
            draft.replace(target)
        finally:
            draft.unlink(missing_ok=True)
        directory = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a crash
        finally:
            os.close(directory)

    async def read(self, key: str) -> AsyncIterator[bytes]:
        handle = await asyncio.to_thread(self._path(key).open, "rb")
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                yield chunk
        finally:
            handle.close()

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._path(key).unlink, missing_ok=True)

    async def listing(self) -> AsyncIterator[tuple[str, dt.datetime]]:
        for name, modified in await asyncio.to_thread(self._listing):
            yield name, modified

    def _listing(self) -> list[tuple[str, dt.datetime]]:
        """Every file under the root, drafts of interrupted writes included (they have no File either)."""
        if not self._root.is_dir():
            return []
        found = []
        for directory in self._root.iterdir():
            if directory.is_dir():
                for entry in directory.iterdir():
                    stamp = dt.datetime.fromtimestamp(entry.stat().st_mtime, dt.UTC)
                    found.append((entry.name, stamp))
        return found


def is_file_id(key: str) -> bool:
    """Whether `key` is a file id as the store names bytes (a UUID in its canonical form)."""
    try:
        return str(uuid.UUID(key)) == key
    except ValueError:
        return False
