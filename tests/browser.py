"""A very small browser for tests: it keeps cookies, never follows a redirect by itself (the tests look at
every Location), and reads HTML forms the way a browser does — every named input with its value, plus the
one submit button pressed — then posts them to the form's action, form-encoded or, for a form of
`enctype="multipart/form-data"`, as multipart with its file inputs (empty unless a file was chosen)."""

from __future__ import annotations

import html
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import httpx

from tests.support import User, follow_link


@dataclass
class Form:
    action: str
    method: str
    enctype: str = "application/x-www-form-urlencoded"
    fields: list[tuple[str, str]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the names of its file inputs
    buttons: list[tuple[str, str]] = field(default_factory=list)

    def names(self) -> set[str]:
        return {name for name, _ in self.fields}

    def value(self, name: str) -> str:
        return next(value for field_name, value in self.fields if field_name == name)


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._current: Form | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "form":
            enctype = attributes.get("enctype") or "application/x-www-form-urlencoded"
            self._current = Form(attributes.get("action", ""), attributes.get("method", "get").lower(), enctype)
            self.forms.append(self._current)
        elif self._current is None or "name" not in attributes:
            return
        elif tag == "input" and attributes.get("type") == "file":
            self._current.files.append(attributes["name"])
        elif tag == "input" and attributes.get("type", "text") not in ("submit", "button", "checkbox", "radio"):
            self._current.fields.append((attributes["name"], attributes.get("value", "")))
        elif tag == "button" and attributes.get("type", "submit") == "submit":
            self._current.buttons.append((attributes["name"], attributes.get("value", "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None


def forms(page: str) -> list[Form]:
    parser = _FormParser()
    parser.feed(page)
    return parser.forms


def form(page: httpx.Response, action: str) -> Form:
    """The one form of the page that posts to `action`."""
    found = [f for f in forms(page.text) if urllib.parse.urlsplit(f.action).path == action]
    assert len(found) == 1, f"expected one form posting to {action}: {page.status_code} {page.text[:2000]}"
    return found[0]


def text(page: httpx.Response) -> str:
    """The page's text with entities resolved, for plain `in` checks."""
    return html.unescape(page.text)


def location(response: httpx.Response) -> str:
    assert response.status_code == 303, f"{response.status_code} {response.text[:2000]}"
    return response.headers["Location"]


def query(url: str) -> dict[str, str]:
    """The query parameters of a URL; each must appear once."""
    pairs = urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True)
    assert len(pairs) == len({name for name, _ in pairs}), pairs
    return dict(pairs)


def multipart(fields: Iterable[tuple[str, str]], files: Mapping[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    """A multipart/form-data body as browsers encode it (WHATWG HTML section 4.10.21.8): the fields, then each file
    input — with `filename=""` and no bytes when none was chosen; and its Content-Type."""
    boundary = f"----browser{uuid.uuid4().hex}"

    def quoted(value: str) -> str:
        return value.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")

    body = b""
    for name, value in fields:
        head = f'Content-Disposition: form-data; name="{quoted(name)}"\r\n\r\n'
        body += f"--{boundary}\r\n{head}".encode() + value.encode() + b"\r\n"
    for name, (filename, data) in files.items():
        head = (
            f'Content-Disposition: form-data; name="{quoted(name)}"; filename="{quoted(filename)}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        )
        body += f"--{boundary}\r\n{head}".encode() + data + b"\r\n"
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


class Browser:
    """One browser profile (its own cookie jar) against a live server."""

    def __init__(self, base_url: str, **headers: str) -> None:
        self.http = httpx.Client(base_url=base_url, follow_redirects=False, timeout=30, headers=headers)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, url: str, params: Mapping[str, Any] | None = None) -> httpx.Response:
        return self.http.get(url, params=params)

    def open_link(self, link: str) -> httpx.Response:
        """A mailed token link, followed to its page (`follow_link`)."""
        return follow_link(self.http, link)

    def submit(
        self,
        page: httpx.Response,
        action: str,
        *,
        fill: Mapping[str, str] | None = None,
        button: tuple[str, str] | None = None,
        drop: Iterable[str] = (),
        files: Mapping[str, tuple[str, bytes]] | None = None,
    ) -> httpx.Response:
        """Submit the page's form posting to `action`: its fields, changed by `fill`, without `drop`, and with
        `button` pressed (which must be one of the form's buttons); a multipart form with `files` chosen
        (input name → filename and bytes)."""
        chosen = form(page, action)
        assert chosen.method == "post"
        fill = dict(fill or {})
        dropped = set(drop)
        data = [(n, v) for n, v in chosen.fields if n not in fill and n not in dropped] + list(fill.items())
        if button is not None:
            assert button in chosen.buttons, (button, chosen.buttons)
            data.append(button)
        target = urllib.parse.urljoin(str(page.url), chosen.action)
        if chosen.enctype == "multipart/form-data":
            chosen_files = {name: (files or {}).get(name, ("", b"")) for name in chosen.files}
            body, content_type = multipart(data, chosen_files)
            return self.http.post(target, content=body, headers={"Content-Type": content_type})
        assert not files, "files need a multipart form"
        return self.http.post(
            target,
            content=urllib.parse.urlencode(data),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    def sign_in(self, user: User, next_path: str | None = None) -> httpx.Response:
        """Open the sign-in page and submit it; the answer (a 303 on success)."""
        page = self.get("/web/signin", params={"next": next_path} if next_path else None)
        assert page.status_code == 200, page.text
        return self.submit(page, "/web/signin", fill={"email": user.email, "password": user.password})

    def follow(self, response: httpx.Response) -> httpx.Response:
        """GET the Location of a 303 (on this site)."""
        return self.get(location(response))
