"""The OAuth endpoints' error answers (RFC 6749 section 5.2): each carries its `error` code and HTTP status.

OAuthError (400; RFC 6749 section 5.2 `error` code)
├── InvalidRequest, InvalidGrant, InvalidScope, UnauthorizedClient, UnsupportedGrantType
└── InvalidClient (401, with a Basic challenge)
"""

from __future__ import annotations

from typing import ClassVar


class OAuthError(Exception):
    """An error answer of the token or revocation endpoint (and, as a redirect, of the authorization one)."""

    status: ClassVar[int] = 400
    error: ClassVar[str] = "invalid_request"

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class InvalidRequest(OAuthError):
    """A parameter is missing, repeated, malformed or unsupported."""

    error = "invalid_request"


class InvalidClient(OAuthError):
    """Client authentication failed: unknown client, wrong or missing secret, or a public client with one."""

    status = 401
    error = "invalid_client"


class InvalidGrant(OAuthError):
    """The code or refresh token is invalid, expired, used, revoked, or another client's; or PKCE failed."""

    error = "invalid_grant"


class InvalidScope(OAuthError):
    """Unknown scopes, scopes the client may not ask for, or wider than the grant."""

    error = "invalid_scope"


class UnsupportedGrantType(OAuthError):
    error = "unsupported_grant_type"


class UnsupportedResponseType(OAuthError):
    error = "unsupported_response_type"


class AccessDenied(OAuthError):
    error = "access_denied"
