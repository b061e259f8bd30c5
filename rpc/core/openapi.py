"""`/openapi.json`, generated from the registry: each procedure's Structs become its schemas, described as exactly
as the server checks them, so that a generated client (and schemathesis) can trust the document.

Beyond what msgspec derives from the Structs: required bodies and query parameters (one by one, as generated
clients expect them), with the Params type's `example` (what Swagger UI's "Try it out" starts from: a write's
whole body, a read's required parameters only, so that a first try filters nothing); every
status the dispatcher answers (400, 405, 413, 415, 503 included) with the headers each carries; the
`Idempotency-Key` header of writes; a tag per resource (the name's first part).

Every method the server takes is declared (`Procedure.methods`): a write is its POST; a read is its GET
(operationId the procedure's name) and the same call's HEAD and POST (`<name>.head`, `<name>.post`, whose body is
the parameters as a JSON object), each marked `x-same-as: <name>`. The reference at /docs shows a read once, its
GET, whose description names the other two (rpc/web/static/docs.js leaves out what is `x-same-as`).

Schemas have plain names, stable as long as the classes' names are: a class's own name (`Job`, `CreateJob`), and
for a generic its parameters' plain names followed by its own (`Page[JobSummary]` is `JobSummaryPage`,
`Result[Page[JobSummary]]` is `JobSummaryPageResult`, `Result[Job]` is `JobResult`). Two schemas that would
share a name (two classes of one name in two modules, or a class `JobPage` beside a `Page[Job]`) fail the
document's generation: one of the classes is renamed.

One rule is said in words only: `page × per_page ≤ 10,000`. JSON Schema cannot multiply two values; spelled
out as a hundred `if`/`then` branches it would turn every generated client's paging model into a hundred variants.
"""

from __future__ import annotations

import re
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
    refs, components = _plainly_named(*msgspec.json.schema_components(types, ref_template=_REF.format(name="{name}")))
    components = _ids_as_text(components)
    error_ref = refs[0]
    paths = {
        f"/v1/{proc.name}": _operations(proc, refs[1 + 2 * index], refs[2 + 2 * index], error_ref, components)
        for index, proc in enumerate(procedures)
    }
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Hire API", "version": version},
        "servers": [{"url": public_url}],
        "tags": [{"name": tag} for tag in sorted({proc.resource for proc in procedures})],
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


_REF = "#/components/schemas/{name}"


def _plainly_named(refs: tuple[Any, ...], components: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """`refs` and `components` with each schema under its plain name (and that name as its title): msgspec's
    names of generics carry module paths, and it tells apart two classes of one name by their modules."""
    renamed: dict[str, str] = {}
    for name, schema in components.items():
        plain = _plain_name(schema["title"])
        if plain in renamed.values():
            raise ValueError(f"two schemas of /openapi.json would be named {plain}: rename one of the classes")
        renamed[name] = plain
    paths = {_REF.format(name=old): _REF.format(name=new) for old, new in renamed.items()}
    components = {renamed[name]: schema | {"title": renamed[name]} for name, schema in components.items()}
    return _with_refs(refs, paths), _with_refs(components, paths)


def _plain_name(title: str) -> str:
    """A schema's plain name from the title msgspec gives it: a class's name without its module, a generic's
    its parameters' plain names followed by its own (`Result[rpc.core.envelope.Page[procedures.jobs.JobSummary]]`
    is `JobSummaryPageResult`)."""
    name, rest = _parsed(title)
    if rest:
        raise ValueError(f"no plain name for the schema titled {title!r}")
    return name


def _parsed(text: str) -> tuple[str, str]:
    """The plain name of the type named at the start of `text`, and the text after it."""
    named = re.match(r"[A-Za-z_][\w.]*", text)
    if named is None:
        raise ValueError(f"no type name at the start of {text!r}")
    own, text = named.group().rsplit(".", 1)[-1], text[named.end() :]
    if not text.startswith("["):
        return own[:1].upper() + own[1:], text
    parameters = []
    while text[:1] in ("[", ","):
        parameter, text = _parsed(text[1:].lstrip())
        parameters.append(parameter)
    if not text.startswith("]"):
        raise ValueError(f"no closing bracket in {text!r}")
    return "".join(parameters) + own, text[1:]


def _with_refs(node: Any, paths: Mapping[str, str]) -> Any:
    """`node` with each `$ref` in `paths` replaced by its new one."""
    if isinstance(node, (list, tuple)):
        return type(node)(_with_refs(item, paths) for item in node)
    if not isinstance(node, dict):
        return node
    return {key: paths.get(value, value) if key == "$ref" else _with_refs(value, paths) for key, value in node.items()}


def _operations(
    proc: Procedure, params_ref: Any, result_ref: Any, error_ref: Any, components: Mapping[str, Any]
) -> dict[str, Any]:
    """The procedure's operations, one per method it takes (`Procedure.methods`): a write's POST; a read's GET,
    and its HEAD and POST, which carry `x-same-as` (the GET's operationId) and their own operationIds."""
    responses = {"200": _response("Success.", result_ref, "200", replayed=proc.write)}
    responses |= {code: _response(text, error_ref, code, replayed=proc.write) for code, text in _ERRORS.items()}
    common = {
        "operationId": proc.name,
        # A summary is plain text (only the description is Markdown): the docstring's backticks would show.
        "summary": proc.doc.splitlines()[0].replace("`", ""),
        "tags": [proc.resource],
        # Requirements are alternatives (OpenAPI 3.1 section 4.8.30): any one scope of the procedure's will do.
        "security": [{scheme: [scope]} for scope in proc.scopes for scheme in ("bearer", "oauth2")],
        "responses": responses,
    }
    example = dict(proc.params_type.example)
    description = proc.doc + _who(proc.roles)
    if proc.write:
        body = {"required": True, "content": _MULTIPART if proc.upload else _json(params_ref, example)}
        return {"post": {**common, "description": description, "requestBody": body, "parameters": [_KEY]}}
    params = components[params_ref["$ref"].rsplit("/", 1)[-1]]
    query = _query_parameters(params, example)
    twin = {"x-same-as": proc.name, "description": _TWIN.format(name=proc.name) + description}
    # No body answers a HEAD: its responses say the headers alone.
    headers_only = {
        code: {key: value for key, value in answer.items() if key != "content"} for code, answer in responses.items()
    }
    # A read's POST without a body is a call with no parameters: the body is needed where a parameter is.
    body = {"required": bool(params.get("required")), "content": _json(params_ref, example)}
    operations = {
        "get": {**common, "description": description + _TWINS.format(name=proc.name), "parameters": query},
        "head": {**common, **twin, "operationId": f"{proc.name}.head", "parameters": query, "responses": headers_only},
        "post": {**common, **twin, "operationId": f"{proc.name}.post", "requestBody": body},
    }
    return {method: operation for method, operation in operations.items() if method.upper() in proc.methods}


_TWINS = (
    "\n\nAlso `POST` (`{name}.post`), with the same parameters as a JSON object (`Content-Type: application/json`),"
    " and `HEAD` (`{name}.head`) for the headers alone."
)
_TWIN = "The same call as `GET` (`{name}`): see there.\n\n"


def _query_parameters(params: Mapping[str, Any], example: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One query parameter per field of the parameters' schema (a list field is repeated: `?a=1&a=2`). A required
    one carries its value in the example; an optional one none, since Swagger UI's "Try it out" fills in every
    parameter's example and a first try would silently filter (the description shows the whole example)."""
    required = set(params.get("required", ()))
    described = []
    for name, schema in params.get("properties", {}).items():
        carried = _without_null(schema)
        parameter = {"in": "query", "name": name, "required": name in required, "schema": carried}
        if name in example and name in required:
            parameter["example"] = example[name]
        if name == "page":
            parameter["description"] = PAGE_DEPTH
        elif "description" in carried:  # where Swagger UI shows a parameter's meaning: not inside its schema
            parameter["description"] = carried["description"]
        if schema.get("type") == "array":
            parameter |= {"style": "form", "explode": True}
        described.append(parameter)
    return described


# What msgspec writes for `rpc.core.fields.Id`: any JSON scalar, so that a malformed id is the `404` of an unknown
# one rather than a `422` that tells ids apart from other values. A client sends a string, and `null` where the
# field may be left out (a partial update's `null` clears it).
_ANY_SCALAR = [{"type": kind} for kind in ("string", "integer", "number", "boolean", "null")]
_TEXT_OR_NULL = [{"type": "string"}, {"type": "null"}]


def _ids_as_text(node: Any, required: bool = True) -> Any:
    """`node` with every id's schema said as what clients send: a string, or null where the id is optional."""
    if isinstance(node, list):
        return [_ids_as_text(item) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("anyOf") == _ANY_SCALAR:
        rest = {key: value for key, value in node.items() if key != "anyOf"}
        return {**rest, "anyOf": _TEXT_OR_NULL} if not required else {**rest, "type": "string"}
    needed = set(node.get("required", ()))
    shown = {key: _ids_as_text(value) for key, value in node.items() if key != "properties"}
    if "properties" in node:
        shown["properties"] = {name: _ids_as_text(value, name in needed) for name, value in node["properties"].items()}
    return shown


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


def _json(schema: Any, example: Any = None) -> dict[str, Any]:
    return {"application/json": {"schema": schema} | ({} if example is None else {"example": example})}


def _who(roles: frozenset[str] | None) -> str:
    return f"\n\nRoles: {', '.join(sorted(roles))}." if roles else ""
