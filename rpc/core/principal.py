"""Who is calling: the user behind a credential, their account and plan, and what the credential grants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rpc.core.types import Role

CredentialKind = Literal["session", "api_key", "oauth"]


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller of one request.

    `scopes` is None for session tokens, which carry every scope and leave the decision to the role.
    """

    user_id: str
    account_id: str
    role: Role
    plan: str
    credential: CredentialKind
    scopes: frozenset[str] | None = None
    client_id: str | None = None  # the OAuth client an access token was issued to

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def has_scope(self, scope: str) -> bool:
        return self.scopes is None or scope in self.scopes

    def granted(self, every_scope: frozenset[str]) -> frozenset[str]:
        return every_scope if self.scopes is None else self.scopes
