"""The business vocabulary the framework is handed at assembly (it owns only the mechanisms that use it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from rpc.events import Emitter
from rpc.providers import Provider
from rpc.types import Connection


@dataclass(frozen=True, slots=True)
class Plan:
    """A plan: its price per 30-day period in minor units, and the request budget of an account on it."""

    name: str
    price: int
    currency: str
    per_minute: int
    per_day: int


@dataclass(frozen=True, slots=True)
class Periodic:
    """Business work the delivery workers run on a schedule (`cron`, with an optional 6th field for
    seconds), in one transaction, with an emitter for its events."""

    cron: str
    run: Callable[[Connection, Emitter], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Catalog:
    """Scopes with the sentence that explains each, the plans an account can be on (the first is the
    default), the event kinds a webhook endpoint can subscribe to (`area.what`, grouped by area), the
    payment providers by the path segment of their notification address, and periodic work by name."""

    scopes: Mapping[str, str]
    plans: Mapping[str, Plan]
    event_kinds: tuple[str, ...]
    # The scopes each role may grant an OAuth application (CONTRACT.md §12: also limited by the role).
    oauth_role_scopes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    providers: Mapping[str, Provider] = field(default_factory=dict)
    periodic: Mapping[str, Periodic] = field(default_factory=dict)

    @property
    def default_plan(self) -> Plan:
        return next(iter(self.plans.values()))
