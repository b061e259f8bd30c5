"""The messages of the people flows, each rendered from two Jinja templates: `<kind>.txt` and `<kind>.html`.

Nothing in them reaches outside the message: no images, no web fonts, no tracking pixels or rewritten links;
the HTML carries its few styles inline. Every link is the service's own (`PUBLIC_URL`).
"""

from __future__ import annotations

import email.utils
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.charset import QP, Charset
from email.message import Message
from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart
from email.policy import compat32
from typing import Any

import jinja2

from rpc.settings import Settings

PRODUCT = "Hire"
# How a message is written out: RFC 5322 line ends; headers as set (ours are ASCII but for the sender's display
# name, encoded below), each on one line up to RFC 5322's 998 characters (folded at 78, a long List-Unsubscribe
# would leave its address alone on a line of its own). The bytes are sealed and sent as they are.
WIRE = compat32.clone(linesep="\r\n", max_line_length=998)
_LINE = 78
SUBJECTS = {
    "verify": "Confirm your e-mail address",
    "account_exists": "You already have an account",
    "reset": "Reset your password",
    "invite": "You are invited to join a team on {product}",
    "application_received": "Your application was received",
    "endpoint_disabled": "A webhook endpoint of your account was disabled",
}  # never any text a user wrote (an account's or a person's name): a subject is where phishing text would go


@dataclass(frozen=True, slots=True)
class Alternative:
    """One more rendering of a message beside its text and HTML (RFC 2046 section 5.1.4): a calendar object, say, as
    `text/calendar; method=REQUEST` (RFC 6047), which mail clients offer to put in the calendar."""

    subtype: str
    text: str
    params: Mapping[str, str] = field(default_factory=dict)


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
    """Builds the message of one kind of mail for one recipient. The business's own kinds come with their
    subjects and the packages whose `templates/` hold their two templates (in front of this package's)."""

    def __init__(
        self, settings: Settings, subjects: Mapping[str, str] | None = None, packages: Sequence[str] = ()
    ) -> None:
        self.public_url = settings.public_url
        self._host = urllib.parse.urlsplit(settings.public_url).hostname or "localhost"
        self.sender = settings.mail_from or f"{PRODUCT} <no-reply@{self._host}>"
        # The display name encoded on its own (RFC 2047), the address as it is.
        self._from = email.utils.formataddr(email.utils.parseaddr(self.sender), charset="utf-8")
        self._subjects = {**SUBJECTS, **(subjects or {})}
        self._text = _environment(False, packages)
        self._html = _environment(True, packages)

    def link(self, path: str, token: str) -> str:
        """`{PUBLIC_URL}{path}?token=...`."""
        return f"{self.public_url}{path}?{urllib.parse.urlencode({'token': token})}"

    def compose(
        self,
        kind: str,
        recipient: str,
        headers: Mapping[str, str] | None = None,
        *,
        alternatives: Sequence[Alternative] = (),
        **context: Any,
    ) -> Message:
        """The message (`multipart/alternative`: plain text, then HTML, then the `alternatives`); `headers` are
        added as given (`List-Unsubscribe`, ...). Built with the `email.mime` classes and written out with `WIRE`:
        the header objects of `EmailMessage` cost a millisecond a message, and job alerts send thousands a minute."""
        values = {"product": PRODUCT, "public_url": self.public_url, **context}
        message = MIMEMultipart("alternative")
        message["From"] = self._from
        message["To"] = recipient
        message["Subject"] = self._subjects[kind].format(**values)
        message["Date"] = email.utils.formatdate(usegmt=True)
        message["Message-ID"] = email.utils.make_msgid(domain=self._host)
        message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation auto-replies to these
        for name, value in (headers or {}).items():
            message[name] = value
        message.attach(_part(self._text.get_template(f"{kind}.txt").render(values), "plain"))
        message.attach(_part(self._html.get_template(f"{kind}.html").render(values), "html"))
        for alternative in alternatives:
            message.attach(_part(alternative.text, alternative.subtype, alternative.params))
        return message


def _part(text: str, subtype: str, params: Mapping[str, str] | None = None) -> MIMENonMultipart:
    """A UTF-8 `text/<subtype>` part, readable as it travels: as written when every line fits in 78 characters (7
    or 8 bit), else quoted-printable (as `EmailMessage.set_content` chooses)."""
    charset = Charset("utf-8")
    if all(len(line) <= _LINE for line in text.splitlines()):
        charset.body_encoding = None  # type: ignore[assignment]  # typeshed: int; None means as written
    else:
        charset.body_encoding = QP
    part = MIMENonMultipart("text", subtype)
    part.set_payload(text, charset)
    for name, value in (params or {}).items():  # tokens as tokens: `method=REQUEST`, as calendars write it
        part.set_param(name, value, requote=False)
    return part
