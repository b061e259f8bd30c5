"""The stack's ceiling for `bin/bench`: a bare Starlette app under uvicorn that answers every path with one
constant JSON body (the bytes of a real 20-job `jobs.list` page), so that the service can be measured beside
what Starlette, uvicorn and the loopback cost on their own in the same run.

    python -m bench.ceiling --port 8001 --body page.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import uuid
from pathlib import Path

import msgspec
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

PAGE_SIZE = 20


def create_app(body: bytes) -> Starlette:
    """Every GET or POST, whatever its path, query and headers, answers `body` as JSON."""

    async def constant(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", constant, methods=["GET", "POST"])])


def sample_page(jobs: int = PAGE_SIZE) -> bytes:
    """A stand-in page of the shape of `jobs.list`, for running the ceiling without a real page."""
    created = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    data = [
        {
            "id": str(uuid.UUID(int=n)),
            "title": "Senior Python Engineer",
            "company": "Anatolia Software",
            "location": "Istanbul",
            "status": "published",
            "created_at": created,
        }
        for n in range(jobs)
    ]
    return msgspec.json.encode({"result": {"data": data, "total": 9000, "page": 1, "per_page": jobs}})


def main(argv: list[str] | None = None) -> None:
    """Serve the constant page on one uvicorn process (loopback by default) until stopped."""
    parser = argparse.ArgumentParser(prog="python -m bench.ceiling", description=main.__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--body", type=Path, help="the JSON body to answer (default: a stand-in 20-job page)")
    args = parser.parse_args(argv)
    body = args.body.read_bytes() if args.body else sample_page()
    uvicorn.run(
        create_app(body), host=args.host, port=args.port, log_level="warning", access_log=False, server_header=False
    )


if __name__ == "__main__":
    main()
