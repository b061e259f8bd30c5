"""Everything a procedure's module needs from the framework, in one import.

    from rpc.api import Context, IdParams, NotFound, Struct, procedure

    @procedure("notes.get", scope="read:applications")
    async def get_note(ctx: Context, params: IdParams) -> Note:
        \"\"\"One note by its id.\"\"\"

Each name here is defined in the room that owns it (`rpc/core/`, `rpc/db/`, `rpc/dispatch/`); this module only
gathers them, and `__all__` is the whole surface (a test keeps the two in step). docs/adding-a-procedure.md walks
through a procedure written with it.
"""

from __future__ import annotations

from rpc.core.database_errors import on_duplicate
from rpc.core.envelope import Empty, FieldError, Page, PageParams, Params, Struct
from rpc.core.errors import (
    Conflict,
    Forbidden,
    InsufficientScope,
    InvalidParams,
    InvalidTransition,
    NotFound,
    RpcError,
    Unavailable,
    UnsupportedMediaType,
)
from rpc.core.fields import (
    EXAMPLE_ID,
    NO_NUL,
    SPACE,
    Id,
    IdParams,
    LongText,
    Moment,
    PersonName,
    PlainText,
    ShortText,
    changes,
    like_pattern,
    moment,
    parse_id,
    set_clause,
)
from rpc.core.multipart import Upload
from rpc.core.principal import Principal
from rpc.core.registry import on_conflict, procedure
from rpc.core.types import ROLES, Connection, Role
from rpc.db.pool import one_row
from rpc.dispatch.context import Context
from rpc.dispatch.paging import page_and_total

__all__ = [
    "EXAMPLE_ID",
    "NO_NUL",
    "ROLES",
    "SPACE",
    "Conflict",
    "Connection",
    "Context",
    "Empty",
    "FieldError",
    "Forbidden",
    "Id",
    "IdParams",
    "InsufficientScope",
    "InvalidParams",
    "InvalidTransition",
    "LongText",
    "Moment",
    "NotFound",
    "Page",
    "PageParams",
    "Params",
    "PersonName",
    "PlainText",
    "Principal",
    "Role",
    "RpcError",
    "ShortText",
    "Struct",
    "Unavailable",
    "UnsupportedMediaType",
    "Upload",
    "changes",
    "like_pattern",
    "moment",
    "on_conflict",
    "on_duplicate",
    "one_row",
    "page_and_total",
    "parse_id",
    "procedure",
    "set_clause",
]
