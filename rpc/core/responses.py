"""The few Response shapes the service sends; errors are rendered here and nowhere else."""

from __future__ import annotations

import logging

import psycopg
from psycopg_pool import PoolTimeout
from starlette.responses import Response

from rpc.core.database_errors import translate
from rpc.core.envelope import encode_error
from rpc.core.errors import RpcError
from rpc.core.registry import Registry

log = logging.getLogger(__name__)

JSON = "application/json"


def json_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, media_type=JSON, headers=headers)


def error_response(error: RpcError) -> Response:
    """The contract's error body, with the headers the error requires (Allow, Retry-After, WWW-Authenticate)."""
    return json_response(encode_error(error.code, error.message, error.details), error.status, error.headers())


def render(exc: Exception, where: str, registry: Registry | None = None) -> Response:
    """Any exception as the contract's error body; a bug is logged with its traceback and answered bare."""
    if isinstance(exc, RpcError):
        return error_response(exc)
    if isinstance(exc, psycopg.Error | PoolTimeout):
        error = translate(exc, registry)
        if error is not None:
            return error_response(error)
    log.error("unhandled error in %s", where, exc_info=exc)
    return error_response(RpcError())
