"""Rendering the few HTML pages: Jinja2 templates (autoescaped), one stylesheet, and the headers every page
carries (a strict Content-Security-Policy without scripts, no framing, no referrer, no caching)."""

from __future__ import annotations

import importlib.resources
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from rpc.core.errors import RateLimited

STYLESHEET = importlib.resources.files("rpc.web").joinpath("static/style.css").read_bytes()
# Where a sign-in without `?next=` goes: `/web`, which sends each person on to a page of their own (`landing`).
DEFAULT_LANDING = "/web"
_CSP_SOURCE = re.compile(r"^[a-z][a-z0-9+.-]*:(//[A-Za-z0-9.:\[\]-]+)?$")

PAGE_HEADERS = {
    "X-Frame-Options": "DENY",  # clickjacking of the consent page (RFC 9700 section 4.16)
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


def content_security_policy(form_targets: Iterable[str] = ()) -> str:
    """No script, no frame, styles from here only; forms post here (and, for the consent form, whatever the
    browser is redirected to afterwards: the client's redirect URI origin)."""
    form_action = " ".join(["'self'", *form_targets])
    return (
        "default-src 'none'; style-src 'self'; img-src 'self'; "
        f"form-action {form_action}; frame-ancestors 'none'; base-uri 'none'"
    )


def origin_source(uri: str) -> list[str]:
    """A CSP source expression for the origin of `uri` (`https://host:port`, or `com.example.app:`)."""
    parts = urllib.parse.urlsplit(uri)
    source = f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"
    return [source] if _CSP_SOURCE.match(source) else []


class Pages:
    """The template environment; `render` answers with a page and its headers."""

    def __init__(self) -> None:
        self._env = jinja2.Environment(
            loader=jinja2.PackageLoader("rpc.web", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def render(
        self, template: str, status: int = 200, *, form_targets: Iterable[str] = (), **context: Any
    ) -> HTMLResponse:
        context.setdefault("user", None)
        html = self._env.get_template(template).render(**context)
        headers = {**PAGE_HEADERS, "Content-Security-Policy": content_security_policy(form_targets)}
        return HTMLResponse(html, status_code=status, headers=headers)

    def error(self, status: int, title: str, message: str, **context: Any) -> HTMLResponse:
        return self.render("error.html", status, title=title, message=message, **context)

    def forbidden(self) -> HTMLResponse:
        return self.error(
            403,
            "This form has expired",
            "The form was missing its security token or it no longer matches your session. "
            "Go back, reload the page and try again.",
        )

    def rate_limited(self, error: RateLimited) -> HTMLResponse:
        response = self.error(429, "Too many attempts", f"Please wait {error.retry_after} seconds and try again.")
        response.headers.update(error.headers())
        return response


def redirect(location: str) -> Response:
    """303 See Other (RFC 9700 section 4.12: never 307 after a POST), with no referrer and no caching."""
    response = RedirectResponse(location, status_code=303)
    response.headers.update({"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})
    return response


def local_path(target: str | None, default: str = DEFAULT_LANDING) -> str:
    """`target` if it is a path on this site (for `?next=`), else `default`: never another origin."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in target):
        return default
    parts = urllib.parse.urlsplit(target)
    if parts.scheme or parts.netloc:
        return default
    return target


def signin_url(next_path: str) -> str:
    return "/web/signin?" + urllib.parse.urlencode({"next": next_path})


async def stylesheet(request: Request) -> Response:
    return Response(
        STYLESHEET,
        media_type="text/css",
        headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"},
    )
