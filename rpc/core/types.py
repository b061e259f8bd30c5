"""Type aliases shared across the framework."""

from __future__ import annotations

from typing import Any, Literal

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Role = Literal["candidate", "employer", "admin"]
ROLES: tuple[Role, ...] = ("candidate", "employer", "admin")

JSONObject = dict[str, Any]
Connection = AsyncConnection[DictRow]
