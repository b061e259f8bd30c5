"""Where a person with a browser starts: `/` says what this is and where to go, and `/docs` is an interactive
reference of the API, rendered in the browser from `/openapi.json` by Swagger UI. Swagger UI's files come from the
`swagger-ui-bundle-v2` package and are served from here: the page loads nothing from anywhere else."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route
from swagger_ui_bundle import swagger_ui_path

from rpc.web.pages import PAGE_HEADERS
from rpc.web.state import web

# Swagger UI sets styles from its script and fetches the document (and "try it out" calls) from this origin.
DOCS_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_FILES = {
    "swagger-ui-bundle.js": Path(swagger_ui_path) / "swagger-ui-bundle.js",
    "swagger-ui.css": Path(swagger_ui_path) / "swagger-ui.css",
}
_START = importlib.resources.files("rpc.web").joinpath("static/docs.js").read_bytes()


async def home(request: Request) -> Response:
    """`GET /`: what the service is, and links to the API reference, the document, the panel."""
    return web(request).pages.render("home.html")


async def docs(request: Request) -> Response:
    """`GET /docs`: the interactive API reference."""
    response = web(request).pages.render("docs.html")
    response.headers["Content-Security-Policy"] = DOCS_POLICY
    return response


async def docs_file(request: Request) -> Response:
    """`GET /docs/static/{name}`: Swagger UI's script and stylesheet, and the script that starts it."""
    name = request.path_params["name"]
    headers = {**PAGE_HEADERS, "Cache-Control": "public, max-age=86400"}
    if name == "docs.js":
        return Response(_START, media_type="text/javascript", headers=headers)
    if name not in _FILES:
        return Response("Not found", status_code=404, media_type="text/plain")
    return FileResponse(_FILES[name], headers=headers)


routes = [
    Route("/", home, methods=["GET"]),
    Route("/docs", docs, methods=["GET"]),
    Route("/docs/static/{name}", docs_file, methods=["GET"]),
]
