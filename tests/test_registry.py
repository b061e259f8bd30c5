"""Registration is strict at import time: what cannot be served as declared fails there."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec
import pytest
from starlette.requests import Request

from rpc.app import load_registry
from rpc.core.envelope import Empty, Params, Struct
from rpc.core.params import query_object
from rpc.core.registry import RegistrationError, Registry
from rpc.dispatch.context import Context


class Out(Struct, frozen=True, kw_only=True):
    value: int


def test_a_well_formed_procedure_registers() -> None:
    registry = Registry()

    @registry.procedure("things.get", scope="read:things")
    async def get(ctx: Context, params: Empty) -> Out:
        """Get a thing."""
        return Out(value=1)

    proc = registry.get("things.get")
    assert proc is not None
    assert proc.handler is get  # the decorator returns the function unchanged
    assert (proc.scope, proc.write, proc.methods) == ("read:things", False, ("GET", "HEAD", "POST"))


def test_duplicate_name_fails() -> None:
    registry = Registry()

    @registry.procedure("things.get", scope="read:things")
    async def first(ctx: Context, params: Empty) -> Out:
        """First."""
        return Out(value=1)

    with pytest.raises(RegistrationError, match="already registered"):

        @registry.procedure("things.get", scope="read:things")
        async def second(ctx: Context, params: Empty) -> Out:
            """Second."""
            return Out(value=2)


def test_missing_scope_fails() -> None:
    with pytest.raises(RegistrationError, match="scope"):

        @Registry().procedure("things.get", scope="")
        async def get(ctx: Context, params: Empty) -> Out:
            """Get."""
            return Out(value=1)


def test_missing_docstring_fails() -> None:
    with pytest.raises(RegistrationError, match="docstring"):

        @Registry().procedure("things.get", scope="read:things")
        async def get(ctx: Context, params: Empty) -> Out:
            return Out(value=1)


def test_params_must_be_a_params_struct() -> None:
    with pytest.raises(RegistrationError, match="Params Struct"):

        @Registry().procedure("things.get", scope="read:things")
        async def get(ctx: Context, params: dict) -> Out:  # type: ignore[type-arg]
            """Get."""
            return Out(value=1)


def test_result_must_be_a_struct() -> None:
    with pytest.raises(RegistrationError, match="Struct"):

        @Registry().procedure("things.get", scope="read:things")
        async def get(ctx: Context, params: Empty) -> dict:  # type: ignore[type-arg]
            """Get."""
            return {}


def test_procedures_must_be_async() -> None:
    with pytest.raises(RegistrationError, match="async"):

        @Registry().procedure("things.get", scope="read:things")
        def get(ctx: Context, params: Empty) -> Out:  # type: ignore[arg-type, type-var]
            """Get."""
            return Out(value=1)


@pytest.mark.parametrize("name", ["Things.get", "things", "things..get", "things.get!"])
def test_names_are_dotted_lower_case(name: str) -> None:
    with pytest.raises(RegistrationError, match="dotted"):

        @Registry().procedure(name, scope="read:things")
        async def get(ctx: Context, params: Empty) -> Out:
            """Get."""
            return Out(value=1)


def test_roles_must_be_known() -> None:
    with pytest.raises(RegistrationError, match="roles"):

        @Registry().procedure("things.get", scope="read:things", roles=("owner",))  # type: ignore[arg-type]
        async def get(ctx: Context, params: Empty) -> Out:
            """Get."""
            return Out(value=1)


def test_every_shipped_procedure_is_strict() -> None:
    """Every registered procedure forbids unknown parameters and says which scope it needs."""
    registry = load_registry()
    assert len(registry) >= 8
    for proc in registry:
        assert issubclass(proc.params_type, Params)
        assert proc.params_type.__struct_config__.forbid_unknown_fields, proc.name
        assert proc.scope.split(":")[0] in ("read", "write"), proc.name
        assert msgspec.json.schema(proc.params_type)


class Bad(Params, frozen=True, kw_only=True):
    title: str

    example: ClassVar[Mapping[str, Any]] = {"titel": "Backend engineer"}


def test_an_example_the_decoder_refuses_fails() -> None:
    with pytest.raises(RegistrationError, match=r"Bad\.example is refused"):

        @Registry().procedure("things.create", scope="write:things", write=True)
        async def create(ctx: Context, params: Bad) -> Out:
            """Create."""
            return Out(value=1)


def test_every_shipped_procedure_has_an_example_its_decoders_accept() -> None:
    """/openapi.json shows each Params type's example (and Swagger UI's "Try it out" sends it): every procedure
    that takes a parameter has one, and it reads as a JSON body and, for a read, as a query string too."""
    for proc in load_registry():
        example = proc.params_type.example
        fields = msgspec.structs.fields(proc.params_type)
        assert example or not fields, f"{proc.name}: {proc.params_type.__name__} has no example"
        assert {f.encode_name for f in fields if f.required} <= set(example), f"{proc.name}: the example is complete"
        proc.decoder.decode(msgspec.json.encode(example))
        if not proc.write:
            query = urllib.parse.urlencode(
                [(name, _text(value)) for name, value in example.items()], doseq=True
            ).encode()
            request = Request({"type": "http", "method": "GET", "query_string": query, "headers": []})
            assert msgspec.convert(query_object(proc.params_type, request), proc.params_type, strict=False)


def _text(value: Any) -> Any:
    """A value as a query string spells it (booleans as `true`/`false`, lists repeated)."""
    if isinstance(value, bool):
        return str(value).lower()
    return value
