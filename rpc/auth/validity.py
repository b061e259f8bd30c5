"""When a credential still holds, written once: its user is not erased, the key or grant it stands for is not
revoked, and the signing key of a token this service signed is not retired. Every lookup of a credential (API
key, session or access token, refresh token, browser session) composes this fragment into its one statement,
so a new rule is one edit here."""

from __future__ import annotations

# The signing key named by the lookup's `%(credential_kid)s` still verifies.
_SIGNER_LIVE = "EXISTS (SELECT FROM signing_keys WHERE kid = %(credential_kid)s AND retired_at IS NULL)"


def still_valid(user: str = "u", *, revocable: str | None = None, signed: bool = False) -> str:
    """The SQL condition that the credential holds: `user` names the users row; `revocable` the api_keys or
    oauth_grants row the credential stands for, if any; `signed` when the lookup binds `credential_kid`."""
    conditions = [f"{user}.deleted_at IS NULL"]
    if revocable is not None:
        conditions.append(f"{revocable}.revoked_at IS NULL")
    if signed:
        conditions.append(_SIGNER_LIVE)
    return " AND ".join(conditions)
