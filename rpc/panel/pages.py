"""Rendering panel pages: a Jinja2 environment that finds the panel's templates and, behind them, the web
sign-in's (whose `base.html` every panel page extends), the panel's static files, and the headers every panel
response carries — the web pages' (no framing, no referrer, no caching) with a Content-Security-Policy that
allows the panel's own script and nothing inline."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.resources
import uuid
from collections.abc import Mapping
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from rpc.panel.audit_labels import short_agent
from rpc.web.pages import PAGE_HEADERS

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'none'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {**PAGE_HEADERS, "Content-Security-Policy": CONTENT_SECURITY_POLICY}

_STATIC_TYPES = {"panel.css": "text/css; charset=utf-8", "panel.js": "text/javascript; charset=utf-8"}
STATIC = {
    name: importlib.resources.files("rpc.panel").joinpath(f"static/{name}").read_bytes() for name in _STATIC_TYPES
}
# The address of each static file carries a digest of its content: a new version is never read from a cache.
_ASSET_URLS = {name: f"/panel/static/{name}?v={hashlib.sha256(body).hexdigest()[:12]}" for name, body in STATIC.items()}


def when(moment: dt.datetime | None, empty: str = "—") -> str:
    """A timestamp as the panel shows it: UTC, to the second."""
    if moment is None:
        return empty
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def secure(response: Response) -> Response:
    """`response` with the headers every panel response carries (pages, redirects, errors)."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return response


class PanelPages:
    """The panel's template environment (autoescaped, strict about undefined names); a business module that
    adds pages makes its own with its package's `templates/` in front."""

    def __init__(self, *packages: str) -> None:
        loaders = [jinja2.PackageLoader(package, "templates") for package in (*packages, "rpc.panel", "rpc.web")]
        self._env = jinja2.Environment(
            loader=jinja2.ChoiceLoader(loaders),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters["when"] = when
        self._env.filters["agent"] = short_agent
        self._env.globals["asset"] = _ASSET_URLS.__getitem__
        self._env.globals["new_form_key"] = lambda: str(uuid.uuid4())

    def render(self, template: str, context: Mapping[str, Any], status: int = 200) -> HTMLResponse:
        html = self._env.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


PAGES = PanelPages()  # templates are loaded on first use and cached by Jinja2


async def static(request: Request) -> Response:
    """`GET /panel/static/{name}`: the panel's stylesheet and script."""
    name = request.path_params["name"]
    if name not in STATIC:
        return secure(Response("Not found", status_code=404, media_type="text/plain"))
    response = Response(STATIC[name], media_type=_STATIC_TYPES[name])
    response.headers.update({**SECURITY_HEADERS, "Cache-Control": "public, max-age=86400"})
    return response
