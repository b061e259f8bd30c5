"""The words of docs/api.md that hold for every procedure, said once: `rpc/ops/reference.py` puts them above the
procedures it reads from the registry (`{scopes}`: the scopes the procedures need). Links are written from the
repository's root, as a reader of this file finds the pages, and made relative to docs/ on the page."""

TITLE = """# API reference

<!-- Made by bin/api-reference from the registry; edit the procedures' docstrings and Structs, or
rpc/ops/reference_text.py, then run `bin/api-reference --write`. -->

Every procedure of `/v1`, by resource: what it does, who may call it, what it takes and what it answers. First,
what holds for all of them: [calling](#calling-a-procedure), [credentials and scopes](#credentials-and-scopes),
[answers](#answers), [errors](#errors), [paging](#paging), [idempotency](#idempotency) and
[limits](#limits). The same procedures are at `/docs`, interactive, and in `/openapi.json` for generated clients.
"""

INTRO = """
## Calling a procedure

A procedure is a dotted name after `/v1/`. A read takes `GET` with its parameters in the query string (a list
repeats its name: `?employment_type=contract&employment_type=full_time`), or `POST` with a JSON object, and
`HEAD` for the headers alone; a write takes `POST` with a JSON object (`Content-Type: application/json`, at most
1 MiB). Any other method is `405 method_not_allowed`, with `Allow`. Unknown parameters are refused, not ignored.
Ids are UUIDs, as strings; a malformed id names no object, so it is `404 not_found`. Times are ISO 8601 with their
offset (answers are in UTC: `2026-11-21T23:23:33Z`). In an update, a field left out is left as it is and `null`
clears it.

## Credentials and scopes

Every call sends `Authorization: Bearer <credential>`: a session token (`/auth/login`, or an external identity
provider's), an API key (`service_live_…` or `service_test_…`), or an OAuth access token
([security](docs/security.md#credentials), [oauth](docs/oauth.md)). Each procedure needs a scope, and a
credential without it is `403 insufficient_scope`. API keys and OAuth tokens hold the scopes they were given;
session tokens hold them all, and the person's role decides. Where a procedure admits only some roles (`admin`,
`employer`, `candidate`) it says so, and other roles are `403 forbidden`; which objects a caller may see (their
account's, their own) each procedure's text says.

The scopes: {scopes}.

## Answers

Success is `200 {{"result": …}}`. An error is `{{"error": {{"code", "message", "details"}}}}`: the code is one of
the table below, the message says how to fix the call, and `details` is `null` or an object (`422` lists every
offending field, `{{"errors": [{{"field", "message"}}]}}`; `403 insufficient_scope` names the scope `required` and
those `granted`). Every answer carries `X-Request-Id` (the caller's, if sane); the headers of the
[limits](#limits) come with every call counted.

## Errors

The codes of every answer, by status; a procedure's own refusals (`404`, `409`, `422`) say in their message why:
"""

PAGING = """
## Paging

A list of pages takes `page` (from 1) and `per_page` (1–100, 20 unless given; `page × per_page` at most 10,000)
and answers `{"data", "total", "page", "per_page"}`, `total` exact. The feeds and searches that go further take a
`cursor` instead: the answer's `next_cursor` (null, or `has_more: false`, at the end), passed back exactly as
returned; it is signed and bound to its query, so another query's cursor is `422`
([search](docs/search.md#totals-facets-and-paging), [sync](docs/sync.md#cursors)).

## Idempotency

A write sent with an `Idempotency-Key` header (1–255 printable ASCII characters) is done once: the same key again,
within 24 hours and from the same account, answers what the first call answered, with `Idempotent-Replayed: true`.
The same key with another procedure or other parameters is `422 idempotency_key_reused`; while the first call
runs, `409 idempotency_key_in_use`. Successes and the procedure's own refusals (`403`, `404`, `409`) are kept;
an error before the procedure ran, or a `5xx`, leaves the key free ([security](docs/security.md)).

## Limits

Calls are counted per account — all its keys and tokens share one budget — in a minute and a day window of its
plan ([the plans' budgets](docs/security.md#per-plan-budgets), [plans](docs/billing.md#plans)). Every counted
answer carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds) of the tighter
window; over it the call is `429 rate_limited` with `Retry-After`, and its details name the window and the plan to
upgrade to ([rate limits](docs/decisions.md#rate-limits)). Caps per account (jobs, endpoints, keys, alerts) are on
[security](docs/security.md#caps-per-account); a `503 unavailable` comes with `Retry-After` too.
"""
