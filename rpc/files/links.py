"""Download links: `/files/{id}/download?expires=..&signature=..`, served to whoever holds one, for a short time.

The signature is an HMAC-SHA256, keyed from SERVICE_SECRET_KEY for this purpose alone, over the file id, the
expiry and, for a link an employer asked for, the account and actor whose audit log records the download
(`file.downloaded`): changing any of them breaks the signature. It is checked in constant time, then the expiry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from rpc.settings import Settings

PATH = "/files/{id}/download"


class LinkRefused(Exception):
    """A link that was altered or has expired: `403`, never the bytes."""


@dataclass(frozen=True, slots=True)
class Downloader:
    """Whose download the audit log records: the account it concerns, and the actor (`user:<id>` or
    `oauth_client:<id>`)."""

    account_id: str
    actor: str


class DownloadLinks:
    """Makes and checks signed download links of one deployment."""

    def __init__(self, settings: Settings) -> None:
        self._key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"hire-api file links v1").derive(
            settings.secret_key.encode()
        )
        self._base = settings.public_url.rstrip("/")
        self._lifetime = settings.files_link_lifetime

    def url(self, file_id: str, downloader: Downloader | None = None, *, now: float | None = None) -> str:
        """A link to the file's bytes, valid for FILES_LINK_LIFETIME seconds from `now`."""
        expires = str(int((time.time() if now is None else now) + self._lifetime))
        query = {"expires": expires}
        if downloader is not None:
            query |= {"account": downloader.account_id, "actor": downloader.actor}
        query["signature"] = self._sign(file_id, query)
        return f"{self._base}{PATH.format(id=file_id)}?{urllib.parse.urlencode(query)}"

    def check(self, file_id: str, query: Mapping[str, str], *, now: float | None = None) -> Downloader | None:
        """The downloader a valid link names (None for the uploader's own); `LinkRefused` when it was altered or
        has expired."""
        expires, signature = query.get("expires", ""), query.get("signature", "")
        named = {name: query[name] for name in ("account", "actor") if name in query}
        expected = self._sign(file_id, {"expires": expires, **named})
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            raise LinkRefused("altered")
        if not expires.isdigit() or int(expires) < (time.time() if now is None else now):
            raise LinkRefused("expired")
        if len(named) == 2:
            return Downloader(account_id=named["account"], actor=named["actor"])
        return None

    def _sign(self, file_id: str, fields: Mapping[str, str]) -> str:
        message = "\n".join([file_id, fields["expires"], fields.get("account", ""), fields.get("actor", "")])
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def attachment(filename: str) -> str:
    """`Content-Disposition: attachment` naming `filename` as RFC 6266 says: an ASCII `filename` for old clients
    (anything else, quotes, backslashes and `%` as `_`) and the exact name as UTF-8 in `filename*` (RFC 8187)."""
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\%' else "_" for c in filename)
    exact = urllib.parse.quote(filename, safe="!#$&+-.^_`|~")
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{exact}"
