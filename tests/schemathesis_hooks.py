"""What /openapi.json cannot say, told to schemathesis (`SCHEMATHESIS_HOOKS=tests.schemathesis_hooks`):

- `page × per_page ≤ 10,000`: JSON Schema cannot multiply two values, so the document says it in words. A
  generated call that pages deeper is brought back to the deepest page allowed — still a call the document
  describes — instead of being sent as one the fuzzer would wrongly expect to succeed.
- An `Idempotency-Key` already used means "the same call as before" (state that no schema holds). Each call
  gets a fresh key, as a client making a new call does; tests/test_idempotency.py covers the replays.
- A `cursor` is a `next_cursor` the same procedure handed out (state again; a feed's is signed): a generated one
  is left out, as a client asking for a first page does. tests/test_search.py and tests/test_sync.py cover
  following cursors and refusing made-up ones (`422`).
- A job's `scorecard_attributes` are distinct whatever their case (`SQL` and `sql` are one), and a scorecard's
  `ratings` name each attribute once: `uniqueItems` says only that no two items are equal. A generated list keeps
  the first of each, as a client naming each once does; tests/test_scorecards.py covers the refusals.
- A file is sent once, as the résumé or as an attachment (`uniqueItems` says only that no two attachments are
  equal; no schema compares one field with another). A generated attachment that is the résumé is left out;
  tests/test_files.py covers the refusal.
- `scorecards.list` takes exactly one of `application_id` and `interview_id`: query parameters are described one
  by one and cannot say "one of two" (and its POST's body is kept the same call). A generated call that gives
  both keeps `application_id`; one that gives neither names a new id as `application_id` (no application: the
  `404` the fuzzer allows). tests/test_scorecards.py covers the refusals.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
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
            _each_once(params, "scorecard_attributes", _attribute_name)
            _each_once(params, "ratings", _rated_attribute)
            _not_attached_twice(params)
            if case.path.endswith("/scorecards.list"):
                _one_of(params, "application_id", "interview_id")


def _within_depth(params: dict[str, Any]) -> None:
    page, per_page = params.get("page", 1), params.get("per_page", DEFAULT_PER_PAGE)
    try:
        page, per_page = int(page), int(per_page)
    except (TypeError, ValueError):
        return  # a value of the wrong type: the server's 422 is what the fuzzer expects
    if 1 <= per_page <= 100 and page >= 1 and page * per_page > MAX_PAGE_DEPTH:
        params["page"] = MAX_PAGE_DEPTH // per_page


def _attribute_name(name: Any) -> Any:
    return name.casefold() if isinstance(name, str) else name


def _rated_attribute(rating: Any) -> Any:
    return rating.get("attribute") if isinstance(rating, dict) else rating


def _each_once(params: dict[str, Any], field: str, identity: Callable[[Any], Hashable]) -> None:
    items = params.get(field)
    if not isinstance(items, list):
        return  # a value of the wrong type: the server's 422 is what the fuzzer expects
    seen: set[Hashable] = set()
    kept = []
    for item in items:
        key = identity(item)
        try:
            if key in seen:
                continue
            seen.add(key)
        except TypeError:
            pass  # an unhashable item of the wrong type: left for the server to refuse
        kept.append(item)
    params[field] = kept


def _not_attached_twice(params: dict[str, Any]) -> None:
    attachments, resume = params.get("attachment_file_ids"), params.get("resume_file_id")
    if isinstance(attachments, list) and resume is not None:
        params["attachment_file_ids"] = [item for item in attachments if item != resume]


def _one_of(params: dict[str, Any], kept: str, other: str) -> None:
    if params.get(kept) is None and params.get(other) is None:
        params[kept] = str(uuid.uuid4())
    elif params.get(kept) is not None:
        params.pop(other, None)
