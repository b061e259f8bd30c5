"""Outgoing e-mail (docs/people.md): STARTTLS with a certificate trusted only through SSL_CERT_FILE, refused
without it, retried until the server answers, given up after the last wait, `.eml` files without SMTP_URL, and
written in the transaction of the change it announces."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from email import message_from_bytes
from email import policy as mail_policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from rpc.core.types import Connection
from rpc.mail.compose import WIRE, Composer
from rpc.mail.outbox import Mail
from rpc.mail.transport import SmtpTransport
from rpc.outbox.queue import Queue
from rpc.settings import Settings, SettingsError
from tests.smtp import SmtpServer
from tests.support import Admin, LiveServer, eventually, free_port, settings_for
from tests.test_people import new_email, sign_up

SettingsFor = Callable[..., Settings]
ENDPOINT_DISABLED = {
    "days": 5,
    "url": "https://receiver.example/hook",
    "last_error": "could not connect",
    "failing_since": "2026-11-20",
    "link": "https://hire.example/panel/webhooks/1",
}


@pytest.fixture
def configured(database: str, tmp_path: Path) -> SettingsFor:
    def make(**env: str) -> Settings:
        return settings_for(database, DATA_DIR=str(tmp_path / "data"), **env)

    return make


def message_row(
    admin: Admin, email: str, wanted: Callable[[dict[str, Any]], bool], timeout: float = 30
) -> dict[str, Any]:
    """The mail row of `email` once `wanted` holds for it (the worker records each attempt)."""
    query = "SELECT status, attempts, last_error, message_sealed FROM mail_messages WHERE recipient = %(e)s"

    def row() -> dict[str, Any] | None:
        rows = admin.sql(query, {"e": email})
        return rows[0] if rows and wanted(rows[0]) else None

    found: dict[str, Any] = eventually(row, lambda: f"the mail to {email}: {admin.sql(query, {'e': email})}", timeout)
    return found


def test_starttls_with_a_certificate_trusted_through_ssl_cert_file(configured: SettingsFor, tmp_path: Path) -> None:
    with SmtpServer(tls_dir=tmp_path) as smtp:
        assert smtp.cert_file is not None
        settings = configured(
            SMTP_URL=smtp.url(credentials="mailer:s3cret%20p%40ss@"), SSL_CERT_FILE=str(smtp.cert_file)
        )
        email = new_email()
        with LiveServer(settings) as live, live.client() as http:
            sign_up(http, email)
            mail = smtp.inbox.wait_for(email)
        assert mail.tls, "upgraded with STARTTLS"
        assert mail.login == "mailer", "the URL's credentials, percent-decoded"


def test_an_untrusted_certificate_is_refused_and_retried(configured: SettingsFor, admin: Admin, tmp_path: Path) -> None:
    with SmtpServer(tls_dir=tmp_path) as smtp:
        settings = configured(SMTP_URL=smtp.url(credentials="mailer:s3cret%20p%40ss@"))
        email = new_email()
        with LiveServer(settings) as live, live.client() as http:
            sign_up(http, email)
            row = message_row(admin, email, lambda row: row["attempts"] >= 1)
        assert "CERTIFICATE_VERIFY_FAILED" in row["last_error"], row
        assert row["status"] == "pending", "it will be tried again"
        assert smtp.inbox.to(email) == []


def test_a_failed_send_is_retried_until_the_server_answers(configured: SettingsFor, admin: Admin) -> None:
    port = free_port()
    settings = configured(SMTP_URL=f"smtp://127.0.0.1:{port}", MAIL_RETRY_WAITS="0,0.5,0.5,0.5,0.5,0.5,0.5,0.5")
    email = new_email()
    with LiveServer(settings) as live, live.client() as http:
        sign_up(http, email)
        message_row(admin, email, lambda row: row["attempts"] >= 1 and row["last_error"])
        with SmtpServer(port=port) as smtp:
            mail = smtp.inbox.wait_for(email)
            row = message_row(admin, email, lambda row: row["status"] == "sent")
    assert mail.link().startswith("/web/verify?token=")
    assert row["attempts"] >= 2 and row["message_sealed"] is None


def test_after_the_last_wait_the_message_is_given_up(configured: SettingsFor, admin: Admin) -> None:
    settings = configured(SMTP_URL=f"smtp://127.0.0.1:{free_port()}", MAIL_RETRY_WAITS="0,0.2")
    email = new_email()
    with LiveServer(settings) as live, live.client() as http:
        sign_up(http, email)
        row = message_row(admin, email, lambda row: row["status"] == "failed")
    assert row["attempts"] == 2 and row["message_sealed"] is None, "nothing with a live link is kept"


def test_without_smtp_each_message_is_an_eml_file(
    configured: SettingsFor, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = configured()
    email = new_email()
    with caplog.at_level("INFO", logger="rpc.mail.transport"), LiveServer(settings) as live, live.client() as http:
        sign_up(http, email)
        eventually(lambda: list((tmp_path / "data" / "mail").glob("*.eml")), "an .eml file", timeout=30)
        [path] = (tmp_path / "data" / "mail").glob("*.eml")
        content = path.read_text()
        assert f"To: {email}" in content and "/web/verify?token=" in content
        assert path.stat().st_mode & 0o077 == 0, "the file, with its live link, is the operator's alone"
        readable = path.with_suffix(".txt")
        link = next(word for word in readable.read_text().split() if "/web/verify?token=" in word)
        parsed = message_from_bytes(path.read_bytes(), policy=mail_policy.default)
        assert isinstance(parsed, EmailMessage)
        plain = parsed.get_body(preferencelist=("plain",))
        assert plain is not None and link in plain.get_content(), "the link as it can be followed"
        assert readable.stat().st_mode & 0o077 == 0 and f"To: {email}" in readable.read_text()
        eventually(lambda: str(path) in caplog.text, "where the message was written, logged", timeout=5)
        assert "token=" not in caplog.text, "a live link never reaches a log"


def test_mail_is_written_with_its_transaction(admin: Admin) -> None:
    recipient = f"rolled-back-{uuid.uuid4().hex[:8]}@example.test"

    class Abandon(Exception):
        pass

    async def write_then_roll_back(conn: Connection) -> int:
        try:
            async with conn.transaction():
                await Mail(admin.settings, Queue()).send(conn, "verify", recipient, link="http://x/web/verify?token=t")
                raise Abandon
        except Abandon:
            pass
        cursor = await conn.execute("SELECT count(*) AS n FROM mail_messages WHERE recipient = %(r)s", {"r": recipient})
        row = await cursor.fetchone()
        assert row is not None
        return int(row["n"])

    assert admin.run(write_then_roll_back) == 0
    jobs_before = admin.sql("SELECT count(*) AS n FROM procrastinate_jobs WHERE task_name = 'hire.send_mail'")[0]["n"]

    async def write(conn: Connection) -> None:
        async with conn.transaction():
            await Mail(admin.settings, Queue()).send(conn, "verify", recipient, link="http://x/web/verify?token=t")

    admin.run(write)
    assert admin.sql("SELECT count(*) AS n FROM mail_messages WHERE recipient = %(r)s", {"r": recipient})[0]["n"] == 1
    jobs = admin.sql("SELECT count(*) AS n FROM procrastinate_jobs WHERE task_name = 'hire.send_mail'")[0]["n"]
    assert jobs == jobs_before + 1


def test_a_settings_typo_stops_the_start(database: str) -> None:
    with pytest.raises(SettingsError, match="SMTP_URL"):
        settings_for(database, SMTP_URL="smtpx://mail.example")


def test_production_refuses_to_start_without_smtp(database: str) -> None:
    """Without a mail server every link would only be written to files (and, once, logged): never in production."""
    with pytest.raises(SettingsError, match="production deployment needs SMTP_URL"):
        Settings.from_env({"DATABASE_URL": database, "SERVICE_ENV": "production", "SERVICE_SECRET_KEY": "k" * 40})


def test_production_refuses_to_start_without_an_https_address(database: str) -> None:
    """Its mail's links (the alerts' one-click unsubscribe among them) and its pages are made from PUBLIC_URL."""
    env = {"DATABASE_URL": database, "SERVICE_ENV": "production", "SERVICE_SECRET_KEY": "k" * 40}
    with pytest.raises(SettingsError, match="needs an https:// PUBLIC_URL"):
        Settings.from_env({**env, "SMTP_URL": "smtp://mail.example.test", "PUBLIC_URL": "http://hire.example"})
    assert Settings.from_env({**env, "SMTP_URL": "smtp://mail.example.test", "PUBLIC_URL": "https://hire.example"})


def test_the_envelope_names_the_one_recipient_whatever_the_headers_say(smtp: SmtpServer) -> None:
    """Recipients are given to the SMTP server, not read from the headers of a message."""
    recipient, other = f"one-{uuid.uuid4().hex[:8]}@example.test", f"other-{uuid.uuid4().hex[:8]}@evil.test"
    message = EmailMessage()
    message["From"] = "Hire <hello@hire.test>"
    message["To"] = f"{recipient}, {other}"
    message["Subject"] = "Two names in To"
    message.set_content("body")
    asyncio.run(SmtpTransport(smtp.url(), None).deliver(message.as_bytes(), recipient))
    assert smtp.inbox.wait_for(recipient).recipients == [recipient]
    assert smtp.inbox.to(other) == []


def test_every_header_reaches_the_server_as_written(smtp: SmtpServer, database: str, tmp_path: Path) -> None:
    """The postman hands the transport the bytes the message was sealed as; nothing parses and writes them out
    again (which folded long headers and wrote `List-Unsubscribe` as RFC 2047 encoded words)."""
    settings = settings_for(database, DATA_DIR=str(tmp_path), MAIL_FROM="Şirket İK <jobs@hire.test>")
    recipient = new_email()
    long_link = "<https://hire.example/alerts/unsubscribe/" + "A" * 43 + ">"
    headers = {"List-Unsubscribe": long_link, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}
    composed = Composer(settings).compose("endpoint_disabled", recipient, headers, **ENDPOINT_DISABLED)
    written = composed.as_bytes(policy=WIRE)
    asyncio.run(SmtpTransport(smtp.url(), None).deliver(written, recipient))
    received = smtp.inbox.wait_for(recipient)
    assert received.raw_headers == written.partition(b"\r\n\r\n")[0].split(b"\r\n")
    assert f"List-Unsubscribe: {long_link}".encode() in received.raw_headers
    assert not [line for line in received.raw_headers if line[:1] in (b" ", b"\t")], "no header is folded"
