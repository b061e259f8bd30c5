"""What an OAuth application may be granted — the vocabulary's scopes, each role's, the client's — and PKCE
(RFC 7636, S256 only)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rpc.auth.oauth_clients import Client
from rpc.auth.oauth_errors import InvalidRequest, InvalidScope
from rpc.core.crypto import same

_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")  # RFC 7636 section 4.1
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url of a SHA-256, unpadded


@dataclass(frozen=True, slots=True)
class ScopePolicy:
    """The vocabulary's scopes (in order, each with the sentence the consent page shows) and the scopes each role
    may use at all. Both are data handed over at assembly."""

    sentences: Mapping[str, str]
    by_role: Mapping[str, frozenset[str]]
    role_sentences: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def sentences_for(self, role: str) -> dict[str, str]:
        """Each scope's sentence as a person of `role` reads it (what it lets an application do of theirs)."""
        return {**self.sentences, **self.role_sentences.get(role, {})}

    @property
    def every_scope(self) -> tuple[str, ...]:
        return tuple(self.sentences)

    def ordered(self, scopes: Iterable[str]) -> list[str]:
        """`scopes` in the vocabulary's order, without repeats."""
        wanted = set(scopes)
        return [scope for scope in self.sentences if scope in wanted]

    def parse(self, scope: str | None, client: Client) -> list[str]:
        """The scopes of a request's `scope` parameter: known and allowed to the client, or InvalidScope."""
        requested = (scope or "").split(" ")
        if not scope or any(not name for name in requested):
            raise InvalidScope("Ask for one or more scopes, separated by single spaces.")
        unknown = sorted(set(requested) - set(self.sentences))
        if unknown:
            raise InvalidScope(f"Unknown scope: {', '.join(unknown)}.")
        refused = sorted(set(requested) - set(client.scopes))
        if refused:
            raise InvalidScope(f"This application may not ask for: {', '.join(refused)}.")
        return self.ordered(requested)

    def for_role(self, role: str) -> frozenset[str]:
        return self.by_role.get(role, frozenset())

    def grantable(self, requested: Iterable[str], client: Client, role: str) -> list[str]:
        """requested ∩ the client's allowed scopes ∩ what the role may use, in the vocabulary's order."""
        return self.ordered(set(requested) & set(client.scopes) & self.for_role(role))


def check_challenge(challenge: str | None, method: str | None) -> str:
    """The S256 challenge of an authorization request; `plain` (or no method, which means plain) is refused."""
    if not challenge:
        raise InvalidRequest("code_challenge is required (PKCE, RFC 7636), with code_challenge_method=S256.")
    if method is None:
        raise InvalidRequest("code_challenge_method is missing, which means plain: only S256 is supported.")
    if method != "S256":
        raise InvalidRequest("code_challenge_method must be S256; plain is not supported.")
    if not _CHALLENGE.match(challenge):
        raise InvalidRequest("code_challenge must be the 43-character base64url SHA-256 of the code verifier.")
    return challenge


def s256(verifier: str) -> str:
    """BASE64URL(SHA256(ASCII(code_verifier))), unpadded."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def verifier_matches(verifier: str | None, challenge: str) -> bool:
    if verifier is None or not _VERIFIER.match(verifier):
        return False
    return same(s256(verifier).encode(), challenge.encode())
