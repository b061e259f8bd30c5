"""The files mechanisms one process uses, built once from the settings: the store and the download links."""

from __future__ import annotations

from dataclasses import dataclass

from rpc.files.links import DownloadLinks
from rpc.files.s3 import S3Store
from rpc.files.store import EmbeddedStore, Store
from rpc.settings import Settings


@dataclass(frozen=True, slots=True)
class Files:
    store: Store
    links: DownloadLinks

    @classmethod
    def of(cls, settings: Settings) -> Files:
        return cls(store=open_store(settings), links=DownloadLinks(settings))


def open_store(settings: Settings) -> Store:
    """The store the settings name: `FILES_STORE=s3://...`, or the embedded one under DATA_DIR/files/."""
    return S3Store(settings) if settings.files_store else EmbeddedStore(settings.files_path)
