"""The one error tree of the API; the dispatcher alone renders it as the contract's error body.

RpcError (500 internal_error)
├── InvalidJson (400)
├── InvalidLink (400)
├── Unauthenticated (401; carries WWW-Authenticate)
│   ├── MissingCredentials
│   ├── InvalidToken
│   ├── TokenExpired
│   ├── InvalidApiKey
│   └── InvalidCredentials
├── Forbidden (403)
│   ├── InsufficientScope
│   ├── HttpsRequired
│   └── EmailNotVerified
├── NotFound (404)
│   └── UnknownProcedure
├── MethodNotAllowed (405; carries Allow)
├── Conflict (409)
│   └── InvalidTransition
├── PayloadTooLarge (413)
├── UnsupportedMediaType (415)
├── InvalidParams (422)
├── RateLimited (429; carries Retry-After)
└── Unavailable (503; carries Retry-After)
    ├── Busy
    └── PartlyStored
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, ClassVar


class RpcError(Exception):
    """An answer other than success; status, code and default message are class attributes."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    default_message: ClassVar[str] = "The server failed to answer this request."

    def __init__(self, message: str | None = None, details: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.details = details
        super().__init__(self.message)

    def headers(self) -> dict[str, str]:
        """Headers the contract requires beside this error's body."""
        return {}


class InvalidJson(RpcError):
    """The body is not a JSON object."""

    status = 400
    code = "invalid_json"
    default_message = "The request body must be a JSON object."


class InvalidLink(RpcError):
    """A mailed token (password reset, verification, invitation) that is unknown, used or expired."""

    status = 400
    code = "invalid_token"
    default_message = "The link is not valid: it was already used, it expired, or it was replaced by a newer one."


class Unauthenticated(RpcError):
    """No usable credentials; RFC 6750 wants a WWW-Authenticate challenge."""

    status = 401
    code = "invalid_token"
    default_message = "The credentials are not valid."
    token_sent: ClassVar[bool] = True

    def headers(self) -> dict[str, str]:
        if self.token_sent:
            return {"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{self.code}"'}
        return {"WWW-Authenticate": "Bearer"}


class MissingCredentials(Unauthenticated):
    """No Authorization header at all."""

    code = "missing_credentials"
    default_message = "Send credentials as 'Authorization: Bearer <token>'."
    token_sent = False


class InvalidToken(Unauthenticated):
    """Bad signature, issuer, audience, algorithm or shape."""

    code = "invalid_token"
    default_message = "The token is not valid."


class TokenExpired(Unauthenticated):
    """A well-signed JWT past its exp: the client refreshes and repeats."""

    code = "token_expired"
    default_message = "The token has expired; refresh it and repeat the request."


class InvalidApiKey(Unauthenticated):
    """Unknown, revoked, malformed, or a test key on a production deployment."""

    code = "invalid_api_key"
    default_message = "The API key is not valid."


class InvalidCredentials(Unauthenticated):
    """Wrong e-mail or password at sign-in."""

    code = "invalid_credentials"
    default_message = "The e-mail or password is wrong."
    token_sent = False


class Forbidden(RpcError):
    """The caller's role or ownership forbids the action."""

    status = 403
    code = "forbidden"
    default_message = "You are not allowed to do this."


class InsufficientScope(Forbidden):
    """The credential lacks the procedure's scope."""

    code = "insufficient_scope"
    default_message = "The credentials lack the scope this procedure needs."

    def __init__(self, required: str, granted: Iterable[str]) -> None:
        held = sorted(granted)
        message = (
            f"This procedure needs the scope {required}; these credentials have {', '.join(held) or 'none'}. Use an "
            f"API key with {required} (the panel's Settings > API keys, or bin/admin create-api-key --scopes "
            f"{required}), or, for an OAuth application, ask for {required} in the authorization request."
        )
        super().__init__(message, details={"required": required, "granted": held})


class HttpsRequired(Forbidden):
    """Plain HTTP on a production deployment."""

    code = "https_required"
    default_message = "This service is served over HTTPS only."


class EmailNotVerified(Forbidden):
    """The built-in provider's sign-in before the person followed the link of the sign-up mail."""

    code = "email_not_verified"
    default_message = (
        "Confirm your e-mail address first: follow the link we sent you, or ask for a new one by signing in at "
        "/web/signin, which offers to send it again."
    )


class NotFound(RpcError):
    """No such object, or one the caller may not see."""

    status = 404
    code = "not_found"
    default_message = "No such object."


class UnknownProcedure(NotFound):
    """No procedure of that name under this version."""

    code = "unknown_procedure"
    default_message = "No procedure of that name exists."


class MethodNotAllowed(RpcError):
    """A write called with GET (or any other unsupported method)."""

    status = 405
    code = "method_not_allowed"
    default_message = "This procedure does not accept that HTTP method."

    def __init__(self, allowed: Iterable[str]) -> None:
        self.allowed = tuple(allowed)
        super().__init__(f"Use {' or '.join(self.allowed)} for this procedure.")

    def headers(self) -> dict[str, str]:
        return {"Allow": ", ".join(self.allowed)}


class Conflict(RpcError):
    """The change collides with existing data."""

    status = 409
    code = "conflict"
    default_message = "This would duplicate or contradict existing data."


class InvalidTransition(Conflict):
    """A state change the state machine does not allow."""

    code = "invalid_transition"

    def __init__(self, from_status: str, to_status: str) -> None:
        super().__init__(f"Cannot move from '{from_status}' to '{to_status}'.", {"from": from_status, "to": to_status})


class PayloadTooLarge(RpcError):
    """The body exceeds the size limit."""

    status = 413
    code = "payload_too_large"
    default_message = "The request body is larger than 1 MiB."


class UnsupportedMediaType(RpcError):
    """A POST body that is not application/json."""

    status = 415
    code = "unsupported_media_type"
    default_message = "Send the body as 'Content-Type: application/json'."


class InvalidParams(RpcError):
    """Parameters that do not fit the procedure's Struct; one entry per offending field."""

    status = 422
    code = "invalid_params"
    default_message = "The parameters are not valid."

    def __init__(self, errors: list[dict[str, str]]) -> None:
        super().__init__(details={"errors": errors})


class RateLimited(RpcError):
    """Over a limit; Retry-After says when to come back."""

    status = 429
    code = "rate_limited"
    default_message = "Too many requests; retry later."

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(message)

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class Unavailable(RpcError):
    """The database cannot be reached; the client retries after a short pause."""

    status = 503
    code = "unavailable"
    default_message = "The service is temporarily unavailable; retry shortly."
    retry_after: ClassVar[int] = 2

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class Busy(Unavailable):
    """The database is up but a lock conflict (a deadlock, a lock timeout, a serialization failure) stopped the
    call, after the service had tried it a second time where that was safe; nothing of it was applied. The
    contract's one 503 code, said honestly: the client retries in a moment."""

    default_message = "The database was busy with a conflicting change and nothing was applied; retry in a moment."
    retry_after: ClassVar[int] = 1


class PartlyStored(Unavailable):
    """A write that opens several transactions (`calls_out`) failed after one of them had stored part of its work:
    said so, and how to complete it (a retry with the same Idempotency-Key resumes the call, never repeats it)."""

    def __init__(self, *, keyed: bool) -> None:
        if keyed:
            message = (
                "Part of this call was stored before the service failed; send it again with the same "
                "Idempotency-Key to complete it (nothing will be done twice)."
            )
        else:
            message = (
                "Part of this call was stored before the service failed, and it was not completed: check what it "
                "made before sending it again (with an Idempotency-Key, a retry would complete it instead)."
            )
        super().__init__(message)
