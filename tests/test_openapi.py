"""The schemas' names in /openapi.json: plain (what a generated client makes its classes' names of), one schema
per name, and every `$ref` leading to one."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec
import pytest

from rpc.app import load_registry
from rpc.core.envelope import Empty, Page, Struct
from rpc.core.openapi import openapi_document
from rpc.core.registry import Registry
from rpc.dispatch.context import Context

PLAIN = re.compile(r"[A-Z][A-Za-z0-9]*")


def document(registry: Registry) -> dict[str, Any]:
    return json.loads(openapi_document(registry, "http://127.0.0.1", "test", {}))  # type: ignore[no-any-return]


def refs(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*map(refs, node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"]} if "$ref" in node else set()
    return found.union(*map(refs, node.values()))


def test_every_schema_has_a_plain_name_and_every_ref_leads_to_one() -> None:
    shipped = document(load_registry())
    schemas = shipped["components"]["schemas"]
    for name, schema in schemas.items():
        assert PLAIN.fullmatch(name), f"{name}: no module path, brackets, dots or underscores"
        assert schema["title"] == name
    assert refs(shipped) == {f"#/components/schemas/{name}" for name in schemas}
    assert {"Job", "JobResult", "JobSummaryPage", "JobSummaryPageResult", "ApplicationResult", "ErrorBody"} <= set(
        schemas
    )
    assert shipped["paths"]["/v1/jobs.list"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/JobSummaryPageResult"
    }


class Thing(Struct, frozen=True, kw_only=True):
    count: int


# Another class of the same name (as if from another module).
OtherThing = msgspec.defstruct("Thing", [("name", str)], bases=(Struct,), frozen=True, kw_only=True)


class ThingPage(Struct, frozen=True, kw_only=True):
    pages: int


def registered(*results: Any) -> Registry:
    """A registry of one read per result type."""
    registry = Registry()
    for index, result in enumerate(results):

        async def read(ctx: Context, params: Empty) -> Any:
            """A read."""

        read.__annotations__ = {"ctx": Context, "params": Empty, "return": result}
        registry.procedure(f"things.read_{'abcdefgh'[index]}", scope="read:things")(read)
    return registry


def test_two_schemas_that_would_share_a_name_fail() -> None:
    """Two classes of one name, or a class named as a generic's schema is: refused, not told apart by a module
    path or a suffix (a client's class names would change with the order of the procedures)."""
    assert {"Thing", "ThingPage", "ThingPageResult"} <= set(
        document(registered(Thing, Page[Thing]))["components"]["schemas"]
    )
    with pytest.raises(ValueError, match=r"would be named Thing(Result)?:"):
        document(registered(Thing, OtherThing))
    with pytest.raises(ValueError, match=r"would be named ThingPage(Result)?:"):
        document(registered(Page[Thing], ThingPage))
