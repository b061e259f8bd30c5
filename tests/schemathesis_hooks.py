"""What /openapi.json cannot say, told to schemathesis (`SCHEMATHESIS_HOOKS=tests.schemathesis_hooks`):

- `page × per_page ≤ 10,000`: JSON Schema cannot multiply two values, so the document says it in words. A
  generated call that pages deeper is brought back to the deepest page allowed — still a call the document
  describes — instead of being sent as one the fuzzer would wrongly expect to succeed.
- An `Idempotency-Key` already used means "the same call as before" (state that no schema holds). Each call
  gets a fresh key, as a client making a new call does; tests/test_idempotency.py covers the replays.
- A `cursor` is a `next_cursor` the same procedure handed out (state again; a feed's is signed): a generated one
  is left out, as a client asking for a first page does. tests/test_search.py and tests/test_sync.py cover
  following cursors and refusing made-up ones (`422`).
"""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis

MAX_PAGE_DEPTH = 10_000
DEFAULT_PER_PAGE = 20


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    if case.headers and "Idempotency-Key" in case.headers:
        case.headers["Idempotency-Key"] = str(uuid.uuid4())
    for params in (case.query, case.body):
        if isinstance(params, dict):
            params.pop("cursor", None)
            _within_depth(params)


def _within_depth(params: dict[str, Any]) -> None:
    page, per_page = params.get("page", 1), params.get("per_page", DEFAULT_PER_PAGE)
    try:
        page, per_page = int(page), int(per_page)
    except (TypeError, ValueError):
        return  # a value of the wrong type: the server's 422 is what the fuzzer expects
    if 1 <= per_page <= 100 and page >= 1 and page * per_page > MAX_PAGE_DEPTH:
        params["page"] = MAX_PAGE_DEPTH // per_page
