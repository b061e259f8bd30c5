"""The wire shapes: the base Structs, the success and list envelopes, the error body, and the one encoder.

`Struct` is the base of every result: frozen (results are values), keyword-only (field order is free).
`Params` adds `forbid_unknown_fields`, so a misspelt parameter is a 422, not silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Generic, TypeVar

import msgspec

T = TypeVar("T")

MAX_PAGE_DEPTH = 10_000
PAGE_DEPTH = f"Page number, from 1; page × per_page may not exceed {MAX_PAGE_DEPTH:,} (narrow the filters instead)."


class Struct(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every result Struct."""


class Params(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every parameter Struct."""

    # A realistic call's parameters: /openapi.json shows them as the example of the body and of each query
    # parameter (Swagger UI's "Try it out" starts from them); the registry refuses one its decoder refuses.
    example: ClassVar[Mapping[str, Any]] = {}


class FieldError(ValueError):
    """Raised from a Params `__post_init__` to blame one field for a cross-field rule."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class PageParams(Params, frozen=True, kw_only=True):
    """Paging of every list: `page` from 1, `per_page` 1..100, never deeper than 10,000 rows."""

    page: Annotated[int, msgspec.Meta(ge=1, description=PAGE_DEPTH)] = 1
    per_page: Annotated[int, msgspec.Meta(ge=1, le=100, description="Items per page, 1..100.")] = 20

    example: ClassVar[Mapping[str, Any]] = {"page": 1, "per_page": 20}

    def __post_init__(self) -> None:
        if self.page * self.per_page > MAX_PAGE_DEPTH:
            raise FieldError("page", f"page × per_page may not exceed {MAX_PAGE_DEPTH}; narrow the filters")

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page


class Page(Struct, Generic[T], frozen=True, kw_only=True):
    """One page of a list: the items, the exact total, and the paging that produced it."""

    data: list[T]
    total: int
    page: int
    per_page: int


class Empty(Params, frozen=True, kw_only=True):
    """Parameters of a procedure that takes none."""


class Result(Struct, Generic[T], frozen=True, kw_only=True):
    """The success envelope."""

    result: T


class ErrorDetail(Struct, frozen=True, kw_only=True):
    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorBody(Struct, frozen=True, kw_only=True):
    """The error envelope."""

    error: ErrorDetail


encoder = msgspec.json.Encoder()


def encode_result(value: Any) -> bytes:
    """`{"result": value}` as JSON bytes."""
    return encoder.encode(Result(result=value))


def encode_error(code: str, message: str, details: dict[str, Any] | None = None) -> bytes:
    """The contract's error body as JSON bytes."""
    return encoder.encode(ErrorBody(error=ErrorDetail(code=code, message=message, details=details)))
