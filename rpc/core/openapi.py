"""`/openapi.json`, generated from the registry: each procedure's Structs become its schemas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from rpc.core.envelope import ErrorBody, Result, encoder
from rpc.core.registry import Registry

_ERRORS = {
    "401": "Missing or invalid credentials.",
    "403": "Insufficient scope, or the role or ownership forbids it.",
    "404": "Unknown procedure, or no such object.",
    "409": "Invalid transition or conflict.",
    "422": "Invalid parameters.",
    "429": "Rate limited.",
}


def openapi_document(registry: Registry, public_url: str, version: str, scopes: Mapping[str, str]) -> bytes:
    """The document; `scopes` (name: what it allows) are offered to third-party apps by the OAuth scheme."""
    procedures = list(registry)
    types: list[Any] = [ErrorBody]
    for proc in procedures:
        types += [proc.params_type, Result[proc.result_type]]  # type: ignore[name-defined]
    refs, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    error_ref = refs[0]
    paths: dict[str, Any] = {}
    for index, proc in enumerate(procedures):
        params_ref, result_ref = refs[1 + 2 * index], refs[2 + 2 * index]
        responses: dict[str, Any] = {"200": {"description": "Success.", "content": _json(result_ref)}}
        responses |= {code: {"description": text, "content": _json(error_ref)} for code, text in _ERRORS.items()}
        common = {
            "summary": proc.doc.splitlines()[0],
            "description": proc.doc + _who(proc.roles),
            "security": [{"bearer": [proc.scope]}, {"oauth2": [proc.scope]}],
            "responses": responses,
        }
        item = {"post": {**common, "operationId": proc.name, "requestBody": {"content": _json(params_ref)}}}
        if not proc.write:
            query = {"in": "query", "name": "params", "schema": params_ref, "style": "form", "explode": True}
            item["get"] = {**common, "operationId": f"{proc.name}.get", "parameters": [query]}
        paths[f"/v1/{proc.name}"] = item
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Hire API", "version": version},
        "servers": [{"url": public_url}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
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
            },
        },
    }
    return encoder.encode(document)


def _json(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _who(roles: frozenset[str] | None) -> str:
    return f"\n\nRoles: {', '.join(sorted(roles))}." if roles else ""
