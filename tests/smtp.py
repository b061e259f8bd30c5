"""A real SMTP server for tests (aiosmtpd, in a thread of the test process): it keeps every message it receives,
with whether it came over TLS and who authenticated; optionally it offers STARTTLS with a self-signed
certificate (which a client trusts only through SSL_CERT_FILE) and requires it, and requires a login."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import ssl
import threading
from dataclasses import dataclass
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from rpc.settings import Settings
from tests.support import free_port, settings_for

LINK = re.compile(r"https?://\S+/web/[a-z]+\?token=[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Received:
    message: EmailMessage
    recipients: list[str]
    tls: bool
    login: str | None
    raw: bytes  # the message's bytes as the server received them

    @property
    def raw_headers(self) -> list[bytes]:
        """The header lines as received, each as sent on the wire (a folded header is several lines)."""
        return self.raw.partition(b"\r\n\r\n")[0].split(b"\r\n")

    @property
    def text(self) -> str:
        part = self.message.get_body(("plain",))
        assert part is not None
        return str(part.get_content())  # type: ignore[attr-defined]

    @property
    def html(self) -> str:
        part = self.message.get_body(("html",))
        assert part is not None
        return str(part.get_content())  # type: ignore[attr-defined]

    def link(self) -> str:
        """The path and query of the one token link of the message (the host is PUBLIC_URL's, not the test
        server's)."""
        links = set(LINK.findall(self.text))
        assert len(links) == 1, links
        url = links.pop()
        return url[url.index("/web/") :]


class Inbox:
    """The messages received, and a way to wait for the next one to an address."""

    def __init__(self) -> None:
        self.messages: list[Received] = []
        self._arrived = threading.Condition()

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        message = message_from_bytes(envelope.content, policy=default)  # type: ignore[arg-type]
        assert isinstance(message, EmailMessage)
        tls = server.transport is not None and server.transport.get_extra_info("ssl_object") is not None
        login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else None
        with self._arrived:
            raw = bytes(envelope.original_content or b"")
            self.messages.append(Received(message, list(envelope.rcpt_tos), tls, login, raw))
            self._arrived.notify_all()
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[Received]:
        with self._arrived:
            return self._to(address)

    def wait_for(self, address: str, count: int = 1, timeout: float = 30) -> Received:
        """The `count`-th message to `address`, once it has arrived."""
        with self._arrived:
            arrived = self._arrived.wait_for(lambda: len(self._to(address)) >= count, timeout)
            assert arrived, f"no message #{count} to {address} within {timeout} s: {self.messages}"
            return self._to(address)[count - 1]

    def _to(self, address: str) -> list[Received]:
        return [m for m in self.messages if address in m.recipients]


def _authenticate(server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (b"mailer", b"s3cret p@ss")
    return AuthResult(success=ok, auth_data=data)


class SmtpServer:
    """`with SmtpServer() as smtp:` a server on a free loopback port; `tls_dir` makes it offer (and require)
    STARTTLS with a new self-signed certificate written there as `cert.pem`, and require a login."""

    def __init__(self, tls_dir: Path | None = None, port: int | None = None) -> None:
        self.inbox = Inbox()
        self.port = port or free_port()
        self.cert_file: Path | None = None
        kwargs: dict[str, Any] = {}
        if tls_dir is not None:
            self.cert_file, key_file = _self_signed(tls_dir)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self.cert_file, key_file)
            kwargs = {
                "tls_context": context,
                "require_starttls": True,
                "auth_required": True,
                "authenticator": _authenticate,
            }
        self._controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port, **kwargs)

    def url(self, scheme: str = "smtp", credentials: str = "") -> str:
        return f"{scheme}://{credentials}127.0.0.1:{self.port}"

    def __enter__(self) -> SmtpServer:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()


def mailing_settings(database: str, smtp: SmtpServer, data_dir: Path, **env: str) -> Settings:
    """Settings of a service that mails through `smtp` and writes under `data_dir`, with the per-e-mail sign-in
    limit out of the way (a test that measures it passes its own)."""
    mailing = {"DATA_DIR": str(data_dir), "SMTP_URL": smtp.url(), "SIGNIN_LIMIT_PER_EMAIL": "100000/minute"}
    return settings_for(database, **{**mailing, **env})


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hire test smtp")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file
