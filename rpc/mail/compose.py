"""The messages of the people flows, each rendered from two Jinja templates: `<kind>.txt` and `<kind>.html`.

Nothing in them reaches outside the message: no images, no web fonts, no tracking pixels or rewritten links;
the HTML carries its few styles inline. Every link is the service's own (`PUBLIC_URL`).
"""

from __future__ import annotations

import email.utils
import urllib.parse
from collections.abc import Mapping, Sequence
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
}  # never any text a user wrote (an account's or a person's name): a subject is where phishing text would go


def _environment(autoescape: bool, packages: Sequence[str]) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader([jinja2.PackageLoader(package, "templates") for package in (*packages, "rpc.mail")]),
        autoescape=autoescape,  # noqa: S701 - off only for the plain-text part, never HTML
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


class Composer:
    """Builds the `EmailMessage` of one kind of mail for one recipient. The business's own kinds come with their
    subjects and the packages whose `templates/` hold their two templates (in front of this package's)."""

    def __init__(
        self, settings: Settings, subjects: Mapping[str, str] | None = None, packages: Sequence[str] = ()
    ) -> None:
        self.public_url = settings.public_url
        self._host = urllib.parse.urlsplit(settings.public_url).hostname or "localhost"
        self.sender = settings.mail_from or f"{PRODUCT} <no-reply@{self._host}>"
        self._subjects = {**SUBJECTS, **(subjects or {})}
        self._text = _environment(False, packages)
        self._html = _environment(True, packages)

    def link(self, path: str, token: str) -> str:
        """`{PUBLIC_URL}{path}?token=...`."""
        return f"{self.public_url}{path}?{urllib.parse.urlencode({'token': token})}"

    def compose(
        self, kind: str, recipient: str, headers: Mapping[str, str] | None = None, **context: Any
    ) -> EmailMessage:
        """The message; `headers` are added as given (`List-Unsubscribe`, ...)."""
        values = {"product": PRODUCT, "public_url": self.public_url, **context}
        message = EmailMessage(policy=SMTP)
        message["From"] = self.sender
        message["To"] = recipient
        message["Subject"] = self._subjects[kind].format(**values)
        message["Date"] = email.utils.formatdate(usegmt=True)
        message["Message-ID"] = email.utils.make_msgid(domain=self._host)
        message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation auto-replies to these
        for name, value in (headers or {}).items():
            message[name] = value
        message.set_content(self._text.get_template(f"{kind}.txt").render(values))
        message.add_alternative(self._html.get_template(f"{kind}.html").render(values), subtype="html")
        return message
