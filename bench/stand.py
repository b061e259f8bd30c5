"""What a scenario module is handed of the running bench: the targets it measures, the seeded data, the receiver
and the meter. `bench.scenarios.Bench` is one; the scenario modules it runs (`hooks`, `one_endpoint`,
`search_index`) take this protocol instead, so that they need not import the module that imports them."""

from __future__ import annotations

from typing import Protocol

from bench.config import Config, Progress
from bench.meter import Meter
from bench.receiver import Receiver
from bench.seeding import Seeded
from bench.targets import Targets


class Stand(Protocol):
    config: Config
    targets: Targets
    seeded: Seeded
    receiver: Receiver
    meter: Meter
    say: Progress
    database_url: str
    cores: int
    notes: list[str]
    rss: dict[int, float]  # the most memory the service held at each size, in MB
