"""Token links without the token in any log (docs/security.md): a page reached by a mailed link
(`/web/verify`, `/web/reset`, `/web/invite`, each `?token=...`) answers that first request with a `303` to its
own address without the token, handing the token over in a short-lived cookie scoped to that page's path;
the page reads it from there. Access logs and proxies then see the token-carrying address once, answered by a
redirect, and never the page (or the form posted from it)."""

from __future__ import annotations

import datetime as dt

from starlette.requests import Request
from starlette.responses import Response

from rpc.web.pages import redirect

COOKIE = "hire_link"
LIFETIME = dt.timedelta(minutes=15)  # long enough to fill in the page's form; the link itself stays valid
MAX_TOKEN_LENGTH = 128


def exchange(request: Request, secure: bool) -> Response | None:
    """For an address that carries `?token=`, the `303` to the clean address that sets the cookie; else None."""
    token = request.query_params.get("token")
    if token is None:
        return None
    response = redirect(request.url.path)
    hand_over(response, request.url.path, token, secure)
    return response


def hand_over(response: Response, path: str, token: str, secure: bool) -> None:
    """Hand `token` to the page at `path` (a link's own, or one the service made: a verification that goes on
    to choosing a password); a typed token longer than any the service makes is cut, and then matches nothing."""
    # Lax, not Strict: the link is followed from a mail client, a cross-site top-level navigation.
    response.set_cookie(
        COOKIE,
        token[:MAX_TOKEN_LENGTH],
        max_age=int(LIFETIME.total_seconds()),
        path=path,
        secure=secure,
        httponly=True,
        samesite="lax",
    )


def token(request: Request) -> str:
    """The token handed over to this page ('' when none)."""
    value = request.cookies.get(COOKIE, "")
    return value if len(value) <= MAX_TOKEN_LENGTH else ""


def forget(response: Response, path: str, secure: bool) -> None:
    """Drop the cookie once its link is used (or refused)."""
    response.delete_cookie(COOKIE, path=path, secure=secure, httponly=True, samesite="lax")
