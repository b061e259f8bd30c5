"""A page of rows and its exact total, in one statement."""

from __future__ import annotations

from typing import Any

from rpc.db.pool import one_row
from rpc.dispatch.context import Context


async def page_and_total(
    ctx: Context, columns: str, source: str, order: str, values: dict[str, Any], total: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """`SELECT columns source ORDER BY order`, one page of it (`limit` and `offset` in `values`), and its exact
    total: the number of rows `source` gives (groups, when it ends in `GROUP BY`), unless `total` is a query of
    the one value that keeps it.

    One statement, where each row also carries the total (evaluated once): the driver's cost is per statement.
    Only a page past the end, which has no row to carry it, asks for the total alone.
    """
    facts = f"({total or f'SELECT count(*) FROM (SELECT 1 {source}) AS counted'}) AS _total"
    cursor = await ctx.conn.execute(
        f"SELECT {columns}, {facts} {source} ORDER BY {order} LIMIT %(limit)s OFFSET %(offset)s", values
    )
    page = await cursor.fetchall()
    if page:
        first = page[0]
    else:
        cursor = await ctx.conn.execute(f"SELECT {facts}", values)
        first = await one_row(cursor)
    count = int(first["_total"] or 0)  # no row of job_totals yet: no job was ever published
    for row in page:
        del row["_total"]
    return page, count
