"""`/openapi.json`, generated from the registry: each procedure's Structs become its schemas, described as exactly
as the server checks them, so that a generated client (and schemathesis) can trust the document.

Beyond what msgspec derives from the Structs: required bodies and query parameters (one by one, as generated
clients expect them); every status the dispatcher answers (400, 405, 413, 415, 503 included) with the headers
each carries; the `Idempotency-Key` header of writes; HEAD wherever GET works. One rule is said in words only:
`page × per_page ≤ 10,000`. JSON Schema cannot multiply two values; spelled out as a hundred `if`/`then`
branches it would turn every generated client's paging model into a hundred variants.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from rpc.core import idempotency, multipart
from rpc.core.envelope import PAGE_DEPTH, Empty, ErrorBody, Result, encoder
from rpc.core.registry import Procedure, Registry

_ERRORS = {
    "400": "The body is not a JSON object.",
    "401": "Missing or invalid credentials.",
    "403": "Insufficient scope, or the role or ownership forbids it.",
    "404": "Unknown procedure, or no such object.",
    "405": "The procedure does not take this method.",
    "409": "Invalid transition, conflict, or the Idempotency-Key is in use.",
    "413": "The body is larger than 1 MiB (an upload: than FILES_MAX_BYTES).",
    "415": "The body is not application/json (an upload: not multipart/form-data, or a file of no accepted type).",
    "422": "Invalid parameters (or an Idempotency-Key reused for another call).",
    "429": "Over the account's request budget.",
    "503": "The database cannot be reached; retry.",
}
_INTEGER = {"type": "integer"}
_TEXT = {"type": "string"}
_HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-Id": {"description": "The client's, if sane, else one made for this call.", "schema": _TEXT},
    "X-RateLimit-Limit": {
        "description": "The tighter window's limit (calls that passed the limit step).",
        "schema": _INTEGER,
    },
    "X-RateLimit-Remaining": {"description": "Calls left in that window.", "schema": _INTEGER},
    "X-RateLimit-Reset": {"description": "Unix seconds when that window resets.", "schema": _INTEGER},
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": _INTEGER},
    "WWW-Authenticate": {"description": "The Bearer challenge (RFC 6750).", "schema": _TEXT},
    "Allow": {"description": "The methods the procedure takes.", "schema": _TEXT},
    idempotency.REPLAYED: {
        "description": "`true` when the answer is the one an Idempotency-Key kept.",
        "schema": _TEXT,
    },
}
_COUNTED = ("X-Request-Id", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
_HEADERS_OF = {
    "200": _COUNTED,
    "401": ("X-Request-Id", "WWW-Authenticate"),
    "405": ("X-Request-Id", "Allow"),
    "409": (*_COUNTED, "Retry-After"),
    "429": (*_COUNTED, "Retry-After"),
    "503": ("X-Request-Id", "Retry-After"),
}
_KEY = {
    "in": "header",
    "name": idempotency.HEADER,
    "required": False,
    "description": "Replays the first answer of this key (24 hours, per account) instead of writing again.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
}


def openapi_document(registry: Registry, public_url: str, version: str, scopes: Mapping[str, str]) -> bytes:
    """The document; `scopes` (name: what it allows) are offered to third-party apps by the OAuth scheme."""
    procedures = list(registry)
    types: list[Any] = [ErrorBody]
    for proc in procedures:
        # An upload's Struct is what the dispatcher makes of the multipart body, not what a client sends.
        params_type = Empty if proc.upload else proc.params_type
        types += [params_type, Result[proc.result_type]]  # type: ignore[name-defined]
    refs, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    error_ref = refs[0]
    paths = {
        f"/v1/{proc.name}": _operations(proc, refs[1 + 2 * index], refs[2 + 2 * index], error_ref, components)
        for index, proc in enumerate(procedures)
    }
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Hire API", "version": version},
        "servers": [{"url": public_url}],
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": _security(public_url, scopes)},
    }
    return encoder.encode(document)


_MULTIPART = {
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "required": [multipart.FIELD],
            "properties": {multipart.FIELD: {"type": "string", "format": "binary", "description": "The file."}},
            "additionalProperties": False,
        },
        "encoding": {multipart.FIELD: {"contentType": "application/octet-stream"}},
    }
}


def _operations(
    proc: Procedure, params_ref: Any, result_ref: Any, error_ref: Any, components: Mapping[str, Any]
) -> dict[str, Any]:
    responses = {"200": _response("Success.", result_ref, "200", replayed=proc.write)}
    responses |= {code: _response(text, error_ref, code, replayed=proc.write) for code, text in _ERRORS.items()}
    common = {
        "summary": proc.doc.splitlines()[0],
        "description": proc.doc + _who(proc.roles),
        # Requirements are alternatives (OpenAPI 3.1 §4.8.30): any one scope of the procedure's will do.
        "security": [{scheme: [scope]} for scope in proc.scopes for scheme in ("bearer", "oauth2")],
        "responses": responses,
    }
    params = components[params_ref["$ref"].rsplit("/", 1)[-1]]
    # A read sent with no body means `{}`, which serves only when no parameter is required.
    body = {"required": proc.write or bool(params.get("required")), "content": _json(params_ref)}
    if proc.upload:
        body = {"required": True, "content": _MULTIPART}
    post = {**common, "operationId": proc.name, "requestBody": body}
    if proc.write:
        return {"post": {**post, "parameters": [_KEY]}}
    query = _query_parameters(params)
    bare = {code: {k: v for k, v in answer.items() if k != "content"} for code, answer in responses.items()}
    return {
        "get": {**common, "operationId": f"{proc.name}.get", "parameters": query},
        "head": {**common, "operationId": f"{proc.name}.head", "parameters": query, "responses": bare},
        "post": post,
    }


def _query_parameters(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One query parameter per field of the parameters' schema (a list field is repeated: `?a=1&a=2`)."""
    required = set(params.get("required", ()))
    described = []
    for name, schema in params.get("properties", {}).items():
        parameter = {"in": "query", "name": name, "required": name in required, "schema": _without_null(schema)}
        if name == "page":
            parameter["description"] = PAGE_DEPTH
        if schema.get("type") == "array":
            parameter |= {"style": "form", "explode": True}
        described.append(parameter)
    return described


def _without_null(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A field's schema as a query string can carry it: no `null` (leaving the parameter out is its absence)."""
    choices = [choice for choice in schema.get("anyOf", ()) if choice != {"type": "null"}]
    if "anyOf" not in schema or not choices:
        return dict(schema)
    rest = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**rest, **choices[0]} if len(choices) == 1 else {**rest, "anyOf": choices}


def _response(description: str, schema: Any, code: str, *, replayed: bool) -> dict[str, Any]:
    names = _HEADERS_OF.get(code, ("X-Request-Id",) if code in ("400", "413", "415") else _COUNTED)
    if replayed and code in ("200", "403", "404", "409"):
        names = (*names, idempotency.REPLAYED)
    return {"description": description, "headers": {name: _HEADERS[name] for name in names}, "content": _json(schema)}


def _security(public_url: str, scopes: Mapping[str, str]) -> dict[str, Any]:
    return {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "A session JWT, an API key (service_live_/service_test_), or an OAuth access token.",
        },
        "oauth2": {
            "type": "oauth2",
            "description": "Third-party apps: the authorization code flow with PKCE (S256).",
            "flows": {
                "authorizationCode": {
                    "authorizationUrl": f"{public_url}/oauth/authorize",
                    "tokenUrl": f"{public_url}/oauth/token",
                    "refreshUrl": f"{public_url}/oauth/token",
                    "scopes": dict(scopes),
                }
            },
        },
    }


def _json(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _who(roles: frozenset[str] | None) -> str:
    return f"\n\nRoles: {', '.join(sorted(roles))}." if roles else ""
