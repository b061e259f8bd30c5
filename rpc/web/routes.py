"""Every route of the web sign-in and the OAuth 2.0 authorization server."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rpc.web import authorize, docs, people, signin, token
from rpc.web.pages import stylesheet


async def favicon(request: Request) -> Response:
    """Browsers ask for one on every page: an empty answer, cached, instead of a 404 in their console."""
    return Response(status_code=204, headers={"Cache-Control": "public, max-age=86400"})


routes = [
    Route("/favicon.ico", favicon, methods=["GET"]),
    Route("/oauth/authorize", authorize.authorize_page, methods=["GET"]),
    Route("/oauth/authorize", authorize.decide, methods=["POST"]),
    *token.routes,
    Route("/web", signin.home, methods=["GET"]),
    Route("/web/signin", signin.signin_page, methods=["GET"]),
    Route("/web/signin", signin.signin, methods=["POST"]),
    Route("/web/signout", signin.signout, methods=["POST"]),
    Route("/web/signup", people.signup_page, methods=["GET"]),
    Route("/web/signup", people.signup, methods=["POST"]),
    Route("/web/verify", people.verify, methods=["GET"]),
    Route("/web/verify/resend", people.resend_verification, methods=["POST"]),
    Route("/web/password-reset", people.reset_request_page, methods=["GET"]),
    Route("/web/password-reset", people.reset_request, methods=["POST"]),
    Route("/web/reset", people.reset_page, methods=["GET"]),
    Route("/web/reset", people.reset, methods=["POST"]),
    Route("/web/invite", people.invitation_page, methods=["GET"]),
    Route("/web/invite", people.accept_invitation, methods=["POST"]),
    Route("/web/apps", signin.apps_page, methods=["GET"]),
    Route("/web/apps/revoke", signin.revoke_app, methods=["POST"]),
    Route("/web/static/style.css", stylesheet, methods=["GET"]),
    *docs.routes,
]
