"""Reading a procedure's parameters from a request: query string for GET (and HEAD), a JSON object for POST.

The checks run in the contract's order (415, 413, 400, 422), and a 422 names every offending field. Where JSON
Schema and msgspec disagree, the answer follows the published schema (/openapi.json): a number with no fraction
(`20.0`) is an integer; a query parameter may be repeated only where the parameter is a list.
"""

from __future__ import annotations

import functools
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


async def read_params(proc: Procedure, request: Request) -> tuple[Params, bytes | None]:
    """The call's parameters, and the JSON body they came from (None for a query string)."""
    if request.method in ("GET", "HEAD"):
        query = query_object(proc.params_type, request)
        try:
            params = msgspec.convert(query, proc.params_type, strict=False)
        except msgspec.ValidationError as exc:
            raise InvalidParams(field_errors(proc.params_type, query, exc, strict=False)) from exc
        # msgspec's lax conversion reads the text `null` as None; a query string has no null: leave it out.
        nulls = [name for name, value in query.items() if value == "null" and getattr(params, name, 0) is None]
        if nulls:
            raise InvalidParams([{"field": name, "message": "Not a value; leave the parameter out."} for name in nulls])
        return params, None
    body = await read_json_body(request, empty_is_object=not proc.write)
    return decode_body(body, proc.decoder, proc.params_type), body


async def read_json(
    request: Request, decoder: msgspec.json.Decoder[Any], params_type: type[P], *, empty_is_object: bool
) -> P:
    """A POST body decoded into `params_type`; an empty body means `{}` where `empty_is_object`."""
    return decode_body(await read_json_body(request, empty_is_object=empty_is_object), decoder, params_type)


async def read_json_body(request: Request, *, empty_is_object: bool) -> bytes:
    """A POST's JSON body as received (415, 413, 400 for a blank one); no body at all is `{}` where
    `empty_is_object`."""
    media_type = request.headers.get("content-type")
    if media_type is not None and not is_json(media_type):
        raise UnsupportedMediaType()
    body = await read_body(request)
    if media_type is None and (body or not empty_is_object):
        raise UnsupportedMediaType()
    if not body:
        if not empty_is_object:
            raise InvalidJson("The body is empty; send a JSON object.")
        return b"{}"
    if not body.strip():
        raise InvalidJson("The body is blank; send a JSON object (or, for a read, no body at all).")
    return body


def decode_body(body: bytes, decoder: msgspec.json.Decoder[Any], params_type: type[P]) -> P:
    """`body` as `params_type`; a number with no fraction where an integer is wanted counts as that integer."""
    try:
        return decoder.decode(body)  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        data = decode_json(body)
        if not isinstance(data, dict):
            raise InvalidJson("The body must be a JSON object.") from exc
        whole = _whole_numbers(data)
        try:
            return msgspec.convert(whole, params_type, strict=True)
        except msgspec.ValidationError as whole_exc:
            # What is wrong with the parameters read as JSON Schema reads them (`596809.0` an integer): a
            # cross-field rule, say, and never the float msgspec's first pass stopped at.
            raise InvalidParams(field_errors(params_type, whole, whole_exc, strict=True)) from whole_exc
    except UNDECODABLE as exc:
        raise not_json(exc) from exc


def query_object(params_type: type[Params], request: Request) -> dict[str, Any]:
    """The query string as the parameters' object: a list parameter collects its repeats, any other parameter
    sent twice is refused (last-wins would silently drop a value)."""
    lists = _list_parameters(params_type)
    query: dict[str, Any] = {}
    repeated: list[str] = []
    for name, value in request.query_params.multi_items():
        if name in lists:
            query.setdefault(name, []).append(value)
        elif name in query:
            repeated.append(name)
        else:
            query[name] = value
    if repeated:
        raise InvalidParams(
            [{"field": name, "message": "Sent more than once; send it once."} for name in sorted(set(repeated))]
        )
    return query


@functools.cache
def _list_parameters(params_type: type[Params]) -> frozenset[str]:
    """The parameters that take a list, once per type: msgspec evaluates the string annotations again on every
    `fields()` call, which cost a third of a cached `jobs.list` call's CPU."""
    return frozenset(field.encode_name for field in msgspec.structs.fields(params_type) if _is_list(field.type))


def _is_list(field_type: Any) -> bool:
    origin = typing.get_origin(field_type)
    if origin is typing.Annotated:
        return _is_list(typing.get_args(field_type)[0])
    if origin is typing.Union or origin is types.UnionType:
        return any(_is_list(member) for member in typing.get_args(field_type))
    return origin in (list, tuple, set, frozenset)


def _whole_numbers(value: Any) -> Any:
    """`value` with every float that has no fraction (`20.0`) as an int, as JSON Schema counts integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


# What msgspec raises for bytes that are not JSON it can decode: malformed JSON, strings that are not UTF-8
# (RFC 8259 section 8.1), and arrays or objects nested deeper than its decoder goes (RecursionError).
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
            errors.append({"field": name, "message": _explained(name, field.type, field_exc)})
    if not errors:  # a rule across fields, raised from __post_init__
        cause = exc.__cause__
        errors.append({"field": cause.field if isinstance(cause, FieldError) else "", "message": str(exc)})
    return errors


def _explained(name: str, field_type: Any, exc: msgspec.ValidationError) -> str:
    """msgspec's message, with the part of the field at fault when it is not the whole of it (`salary.currency`,
    `ratings[1].rating`: msgspec's path after `$`), and, for a field that takes one of a few values, which ones."""
    message, _, path = str(exc).partition(" - at `$")
    message = message.rstrip(".")  # a rule's own sentence (a nested struct's `FieldError`) ends with one
    if path:
        message += f" (at {name}{path.removesuffix('`')})"
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
