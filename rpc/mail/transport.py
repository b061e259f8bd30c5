"""Where mail goes: an SMTP server (`SMTP_URL`), or `.eml` files under `$DATA_DIR/mail/` (the embedded default).

`smtp://user:pass@host:port` upgrades with STARTTLS whenever the server offers it; `smtps://` speaks TLS from the
first byte. Certificates are verified against the system's trust store, or only against `SSL_CERT_FILE` when set.

A message goes out as the bytes it was written as, never parsed and written out again: `email`'s writer folds and
encodes headers anew (`List-Unsubscribe: <https://...>` left as RFC 2047 encoded words, which mail providers read
as no unsubscribe address at all).
"""

from __future__ import annotations

import datetime as dt
import email.policy
import email.utils
import logging
import os
import ssl
import urllib.parse
from email import message_from_bytes
from email.message import EmailMessage, Message
from email.parser import BytesHeaderParser
from email.policy import compat32
from pathlib import Path
from typing import Protocol

import aiosmtplib

from rpc.settings import Settings

log = logging.getLogger(__name__)

SMTP_TIMEOUT = 30.0


class Transport(Protocol):
    description: str

    async def deliver(self, message: bytes, recipient: str) -> None:
        """Hand the message over, its bytes as they are, for `recipient` alone (whatever its headers say); raises
        when it could not be (the caller retries)."""


def headers_of(message: bytes) -> Message:
    """The message's headers, read without touching its bytes (nothing is written back from them)."""
    return BytesHeaderParser(policy=compat32).parsebytes(message)


class SmtpTransport:
    """Sends through the SMTP server of `SMTP_URL`."""

    def __init__(self, url: str, cert_file: str | None) -> None:
        parts = urllib.parse.urlsplit(url)
        self._implicit_tls = parts.scheme == "smtps"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (465 if self._implicit_tls else 25)
        self._username = urllib.parse.unquote(parts.username) if parts.username else None
        self._password = urllib.parse.unquote(parts.password) if parts.password else None
        # cafile replaces the default trust store rather than adding to it (create_default_context loads the
        # system's certificates only when given no cafile).
        self._tls = ssl.create_default_context(cafile=cert_file)
        self.description = f"SMTP server {self._host}:{self._port} ({'TLS' if self._implicit_tls else 'STARTTLS'})"

    async def deliver(self, message: bytes, recipient: str) -> None:
        # The envelope is given, not read from the headers: the message goes to its one recipient only.
        await aiosmtplib.send(
            message,
            sender=email.utils.parseaddr(str(headers_of(message)["From"] or ""))[1],
            recipients=[recipient],
            hostname=self._host,
            port=self._port,
            username=self._username,
            password=self._password,
            use_tls=self._implicit_tls,
            start_tls=False if self._implicit_tls else None,  # None: STARTTLS whenever the server offers it
            tls_context=self._tls,
            timeout=SMTP_TIMEOUT,
        )


class FileTransport:
    """Writes each message as `<time>-<id>.eml` under a directory, with its plain-text part decoded beside it as
    `<time>-<id>.txt` (an `.eml` encodes its text, so a link read from it with `cat` is broken across lines and
    `=3D`s), and logs where: development without a mail server. Written under a temporary name, then renamed, so a
    reader never sees half a message. The log names the file, never its links: they are live credentials (the
    files, readable by the operator only, have them)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self.description = f".eml files in {directory}"

    async def deliver(self, message: bytes, recipient: str) -> None:
        self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        headers = headers_of(message)
        message_id = str(headers["Message-ID"]).strip("<>").partition("@")[0]
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        path = self._directory / f"{stamp}-{message_id}.eml"
        _write(path.with_suffix(".txt"), _readable(message))
        _write(path, message)
        log.info("mail to %s (%s) written to %s (its text: .txt beside it)", recipient, headers["Subject"], path)


def _readable(message: bytes) -> bytes:
    """The message as a person reads it: who, what, and its plain text decoded (parsed for this file alone)."""
    parsed = message_from_bytes(message, policy=email.policy.default)
    assert isinstance(parsed, EmailMessage)
    body = parsed.get_body(preferencelist=("plain",))
    text = body.get_content() if isinstance(body, EmailMessage) else ""
    head = "".join(f"{name}: {parsed[name]}\n" for name in ("From", "To", "Subject", "Date") if parsed[name])
    return f"{head}\n{text}".encode()


def _write(path: Path, content: bytes) -> None:
    """`content` at `path`, for the operator alone, whole or not at all."""
    draft = path.with_suffix(".part")
    with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:
        file.write(content)
    os.replace(draft, path)


def transport_for(settings: Settings) -> Transport:
    """The SMTP server of `SMTP_URL`, else the `.eml` directory."""
    if settings.smtp_url:
        return SmtpTransport(settings.smtp_url, settings.ssl_cert_file)
    return FileTransport(mail_directory(settings))


def mail_directory(settings: Settings) -> Path:
    """Where the `.eml` files go when no `SMTP_URL` is set."""
    return settings.data_path / "mail"


def local_mailbox(settings: Settings) -> Path | None:
    """The `.eml` directory a person trying a local install should look in for "check your e-mail", or None:
    mail goes to a real server, or this is production (whose pages name no path of the machine)."""
    return None if settings.smtp_url or settings.production else mail_directory(settings)
