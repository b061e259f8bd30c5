"""How deliveries are signed, and how an endpoint's secret is kept (sealed: it must be read back to sign)."""

from __future__ import annotations

import hashlib
import hmac

ENDPOINT_SEAL_PURPOSE = "webhook_endpoints.secret"


def sign(secret: str, body: bytes) -> str:
    """`X-Service-Signature`: lowercase hex HMAC-SHA256 of the body, keyed with the secret's UTF-8 bytes."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
