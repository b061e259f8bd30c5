"""The web and OAuth endpoints' share of the running services, built once in the app's lifespan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from starlette.requests import Request

from rpc.auth.identity import IdentityProvider
from rpc.auth.oauth import AuthorizationServer
from rpc.auth.oauth_policy import ScopePolicy
from rpc.auth.people import People
from rpc.auth.teams import Teams
from rpc.db.pool import Pool
from rpc.limits.throttle import Throttle
from rpc.services import Services
from rpc.settings import Settings
from rpc.web.pages import Pages
from rpc.web.sessions import SessionStore


@dataclass(frozen=True, slots=True)
class Web:
    settings: Settings
    pool: Pool
    identity: IdentityProvider
    server: AuthorizationServer
    sessions: SessionStore
    pages: Pages
    # The services' one throttle: groups `signin_email` and `signin_address` (shared with /auth/login), and
    # `oauth_token_client` and `oauth_token_address` for /oauth/token and /oauth/revoke.
    throttle: Throttle
    people: People
    teams: Teams

    @classmethod
    def build(cls, services: Services, policy: ScopePolicy) -> Web:
        settings = services.settings
        return cls(
            settings=settings,
            pool=services.pool,
            identity=services.identity,
            server=AuthorizationServer(settings, services.keyring, policy),
            sessions=SessionStore(settings),
            pages=Pages(),
            throttle=services.throttle,
            people=services.people,
            teams=services.teams,
        )


def web(request: Request) -> Web:
    """The web services, from the lifespan state Starlette copies into every request."""
    return cast(Web, request.state.web)
