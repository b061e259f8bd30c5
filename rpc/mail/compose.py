"""The messages of the people flows, each rendered from two Jinja templates: `<kind>.txt` and `<kind>.html`.

Nothing in them reaches outside the message: no images, no web fonts, no tracking pixels or rewritten links;
the HTML carries its few styles inline. Every link is the service's own (`PUBLIC_URL`).
"""

from __future__ import annotations

import email.utils
import urllib.parse
from email.message import EmailMessage
from email.policy import SMTP
from typing import Any

import jinja2

from rpc.settings import Settings

PRODUCT = "Hire"
SUBJECTS = {
    "verify": "Confirm your e-mail address",
    "account_exists": "You already have an account",
    "reset": "Reset your password",
    "invite": "You are invited to join a team on {product}",
    "application_received": "Your application was received",
    "endpoint_disabled": "A webhook endpoint of your account was disabled",
}  # never any text a user wrote (an account's or a person's name): a subject is where phishing text would go


def _environment(autoescape: bool) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("rpc.mail", "templates"),
        autoescape=autoescape,  # noqa: S701 - off only for the plain-text part, never HTML
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


class Composer:
    """Builds the `EmailMessage` of one kind of mail for one recipient."""

    def __init__(self, settings: Settings) -> None:
        self.public_url = settings.public_url
        self._host = urllib.parse.urlsplit(settings.public_url).hostname or "localhost"
        self.sender = settings.mail_from or f"{PRODUCT} <no-reply@{self._host}>"
        self._text = _environment(autoescape=False)
        self._html = _environment(autoescape=True)

    def link(self, path: str, token: str) -> str:
        """`{PUBLIC_URL}{path}?token=...`."""
        return f"{self.public_url}{path}?{urllib.parse.urlencode({'token': token})}"

    def compose(self, kind: str, recipient: str, **context: Any) -> EmailMessage:
        values = {"product": PRODUCT, "public_url": self.public_url, **context}
        message = EmailMessage(policy=SMTP)
        message["From"] = self.sender
        message["To"] = recipient
        message["Subject"] = SUBJECTS[kind].format(**values)
        message["Date"] = email.utils.formatdate(usegmt=True)
        message["Message-ID"] = email.utils.make_msgid(domain=self._host)
        message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation auto-replies to these
        message.set_content(self._text.get_template(f"{kind}.txt").render(values))
        message.add_alternative(self._html.get_template(f"{kind}.html").render(values), subtype="html")
        return message
