"""The business vocabulary the framework is handed at assembly, as data: it owns only the mechanisms that use
it (the limiter takes the plans, the consent page the scopes' sentences, `emit` and the webhook forms the event
kinds)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Plan:
    """A plan: its price per 30-day period in minor units, and the request budget of an account on it."""

    name: str
    price: int
    currency: str
    per_minute: int
    per_day: int


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """Scopes with the sentence that explains each, the plans an account can be on (the first is the default),
    and the event kinds a webhook endpoint can subscribe to (`area.what`, grouped by area in the panel)."""

    scopes: Mapping[str, str]
    plans: Mapping[str, Plan]
    event_kinds: tuple[str, ...]
    # The scopes each role may grant an OAuth application (docs/decisions.md: also limited by the role).
    oauth_role_scopes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # Where a scope allows a role less than its sentence says (a candidate has no drafts), the sentence that role
    # is shown instead: role → scope → sentence.
    role_sentences: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # What the panel's "Add an endpoint" form starts with ticked: the kinds most receivers want.
    suggested_event_kinds: tuple[str, ...] = ()
    # What the panel's "Create an API key" form starts with ticked: what a first integration needs.
    suggested_key_scopes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.suggested_event_kinds) - set(self.event_kinds))
        if unknown:
            raise ValueError(f"suggested event kinds {unknown} are not event kinds")
        unknown = sorted(set(self.suggested_key_scopes) - set(self.scopes))
        if unknown:
            raise ValueError(f"suggested key scopes {unknown} are not scopes")

    @property
    def default_plan(self) -> Plan:
        return next(iter(self.plans.values()))
