"""Reading a procedure's parameters from a request: query string for GET, a JSON object for POST.

The checks run in the contract's order (415, 413, 400, 422), and a 422 names every offending field.
"""

from __future__ import annotations

import types
import typing
from typing import Any, TypeVar

import msgspec
from starlette.requests import Request

from rpc.core.envelope import FieldError, Params
from rpc.core.errors import InvalidJson, InvalidParams, PayloadTooLarge, UnsupportedMediaType
from rpc.core.registry import Procedure

MAX_BODY_BYTES = 1024 * 1024

P = TypeVar("P", bound=Params)


async def read_params(proc: Procedure, request: Request) -> Params:
    if request.method == "GET":
        query = dict(request.query_params)
        try:
            return msgspec.convert(query, proc.params_type, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidParams(field_errors(proc.params_type, query, exc, strict=False)) from exc
    return await read_json(request, proc.decoder, proc.params_type, empty_is_object=not proc.write)


async def read_json(
    request: Request, decoder: msgspec.json.Decoder[Any], params_type: type[P], *, empty_is_object: bool
) -> P:
    """A POST body decoded into `params_type`; an empty body means `{}` where `empty_is_object`."""
    media_type = request.headers.get("content-type")
    if media_type is not None and not is_json(media_type):
        raise UnsupportedMediaType()
    body = await read_body(request)
    if media_type is None and (body or not empty_is_object):
        raise UnsupportedMediaType()
    if not body.strip():
        if not empty_is_object:
            raise InvalidJson("The body is empty; send a JSON object.")
        body = b"{}"
    try:
        return decoder.decode(body)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        data = decode_json(body)
        if not isinstance(data, dict):
            raise InvalidJson("The body must be a JSON object.") from exc
        raise InvalidParams(field_errors(params_type, data, exc, strict=True)) from exc
    except UNDECODABLE as exc:
        raise not_json(exc) from exc


# What msgspec raises for bytes that are not JSON it can decode: malformed JSON, strings that are not UTF-8
# (RFC 8259 §8.1), and arrays or objects nested deeper than its decoder goes (RecursionError).
UNDECODABLE = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def not_json(exc: Exception) -> InvalidJson:
    """The 400 that says what is wrong with a body msgspec could not decode, and where."""
    if isinstance(exc, RecursionError):
        return InvalidJson("The body nests arrays or objects too deeply to be read.")
    if isinstance(exc, UnicodeDecodeError):
        return InvalidJson("The body is not valid JSON: a string is not UTF-8.")
    reason = str(exc).removeprefix("JSON is malformed: ").rstrip(".")
    return InvalidJson(f"The body is not valid JSON: {reason}.")


def decode_json(body: bytes) -> Any:
    """Any JSON value; what msgspec cannot decode is `InvalidJson`, saying why."""
    try:
        return msgspec.json.decode(body)
    except UNDECODABLE as exc:
        raise not_json(exc) from exc


def is_json(content_type: str) -> bool:
    """`application/json`, optionally with `charset=utf-8`."""
    media_type, _, parameters = content_type.partition(";")
    if media_type.strip().lower() != "application/json":
        return False
    charset = parameters.strip().lower().removeprefix("charset=").strip('"')
    return charset in ("", "utf-8", "utf8")


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, refused as soon as more than `limit` bytes arrive (a Content-Length is not trusted)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


def field_errors(
    params_type: type[Params], data: dict[str, Any], exc: msgspec.ValidationError, *, strict: bool
) -> list[dict[str, str]]:
    """Every field at fault, not only the first one msgspec stopped at."""
    fields = {f.encode_name: f for f in msgspec.structs.fields(params_type)}
    known = ", ".join(fields) or "none"
    errors = [
        {"field": name, "message": f"Unknown parameter; the parameters are: {known}."}
        for name in data
        if name not in fields
    ]
    for name, field in fields.items():
        if name not in data:
            if field.required:
                errors.append({"field": name, "message": "This parameter is required."})
            continue
        try:
            msgspec.convert(data[name], field.type, strict=strict)
        except msgspec.ValidationError as field_exc:
            errors.append({"field": name, "message": _explained(field.type, field_exc)})
    if not errors:  # a rule across fields, raised from __post_init__
        cause = exc.__cause__
        errors.append({"field": cause.field if isinstance(cause, FieldError) else "", "message": str(exc)})
    return errors


def _explained(field_type: Any, exc: msgspec.ValidationError) -> str:
    """msgspec's message without the path (the field is named beside it), and, for a field that takes one of a
    few values, which ones."""
    message = str(exc).split(" - at `")[0]
    choices = _choices(field_type)
    return f"{message}; choose one of: {', '.join(choices)}." if choices else f"{message}."


def _choices(field_type: Any) -> list[str]:
    """The values of the Literal inside a field's type (through `Annotated` and unions), in declared order."""
    origin = typing.get_origin(field_type)
    if origin is typing.Literal:
        return [str(value) for value in typing.get_args(field_type)]
    if origin is typing.Annotated:
        return _choices(typing.get_args(field_type)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [choice for member in typing.get_args(field_type) for choice in _choices(member)]
    return []
