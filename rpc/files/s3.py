"""The bytes in an S3-compatible bucket (`FILES_STORE=s3://bucket/prefix`), through obstore: the Rust
`object_store` crate's client, async, streaming both ways, with multipart uploads for large objects
(docs/decisions.md says why this client)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import obstore
from obstore.exceptions import NotFoundError
from obstore.store import S3Store as ObjectStore

from rpc.files.store import is_file_id

if TYPE_CHECKING:
    from obstore.store import S3Config  # a TypedDict of the type stubs only
from rpc.settings import Settings


class S3Store:
    """Each file's bytes as the object `<prefix>/<file id>`."""

    def __init__(self, settings: Settings) -> None:
        bucket, _, prefix = settings.files_store.removeprefix("s3://").partition("/")
        config: S3Config = {}
        if settings.s3_endpoint_url:
            config["endpoint"] = settings.s3_endpoint_url
        if settings.s3_region:
            config["region"] = settings.s3_region
        if settings.s3_access_key_id and settings.s3_secret_access_key:
            config["access_key_id"] = settings.s3_access_key_id
            config["secret_access_key"] = settings.s3_secret_access_key
        plain = (settings.s3_endpoint_url or "").startswith("http://")  # a local store (tests, a LAN MinIO)
        self._store = ObjectStore(
            bucket, prefix=prefix.strip("/") or None, config=config, client_options={"allow_http": plain}
        )

    async def put(self, key: str, source: Path) -> None:
        await obstore.put_async(self._store, key, source)

    async def read(self, key: str) -> AsyncIterator[bytes]:
        answer = await obstore.get_async(self._store, key)
        async for chunk in answer.stream():
            yield bytes(chunk)

    async def delete(self, key: str) -> None:
        with contextlib.suppress(NotFoundError):
            await obstore.delete_async(self._store, key)

    async def listing(self) -> AsyncIterator[tuple[str, dt.datetime]]:
        """The file ids under the prefix; any other object there is not ours, and left alone."""
        async for batch in obstore.list(self._store, chunk_size=1000):
            for meta in batch:
                key = meta["path"]
                if is_file_id(key):
                    yield key, meta["last_modified"]
