"""One delivery worker's lanes, one per endpoint: at most `limit` attempts in flight to an endpoint, and the rest of
its claimed jobs held here, in claim order, each started the moment one of that endpoint's attempts ends.

Holding them is what lets one endpoint's backlog flow as fast as the endpoint answers: sending them back to the queue
instead (as the worker once did) left each a second behind, and one worker drained one endpoint at a trickle. Held
jobs stay `doing` under the worker's id, so a worker that dies with them loses nothing: the retry of stalled jobs
requeues them like any other.

A held job counts against the worker's room to claim, so a lane holds only what its endpoint will start within
`hold_for` seconds at the pace it answers (its attempts' mean duration, measured as they end; `limit` until the
first has ended), and never more than `hold_at_most`. An endpoint that answers in a millisecond may hold the
worker's whole room, and empties it as fast; one that answers slowly but steadily (every 200 ms, say) holds a few,
so its backlog cannot fill the room and hold every other endpoint to its pace. The bound is kept by the claim: the
worker claims no more of an endpoint than its lane has room for (`rooms`), so no claimed job has to be sent back.
When no attempt to an endpoint has started for `hold_for` seconds (its receiver hangs), its held jobs go back to
the queue (`expired`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]  # a claimed job, with what its attempt needs (rpc/outbox/claims.py)
HOLD_FOR = 0.25  # seconds: what a lane holds is started within this; a lane that has not moved for it is emptied
SMOOTHING = 0.3  # weight of the latest attempt in an endpoint's mean duration


@dataclass(slots=True)
class _Lane:
    moved: float  # when an attempt to the endpoint last started
    busy: int = 0
    waiting: deque[Row] = field(default_factory=deque)  # oldest first
    duration: float | None = None  # the endpoint's attempts' mean duration, in seconds (None: none ended yet)


class Lanes:
    """The endpoints' lanes of one worker."""

    def __init__(self, limit: int, hold_for: float = HOLD_FOR, hold_at_most: int | None = None) -> None:
        self._limit = limit
        self._hold_for = hold_for
        self._hold_at_most = math.inf if hold_at_most is None else hold_at_most
        self._lanes: dict[str, _Lane] = {}
        self.held = 0  # jobs waiting in all lanes

    @property
    def room(self) -> int:
        """How many jobs of an endpoint without a lane the worker may take: its limit, and as many to hold."""
        return self._limit + int(min(self._limit, self._hold_at_most))

    def rooms(self) -> dict[str, int]:
        """How many more jobs each endpoint with a lane may take (0: none until its lane moves)."""
        return {
            endpoint: max(0, self._limit + self._holds(lane) - lane.busy - len(lane.waiting))
            for endpoint, lane in self._lanes.items()
        }

    def low(self, endpoint_id: str) -> bool:
        """True when the endpoint's lane has started a quarter of what it may hold: time to claim more of its jobs
        (early enough that the claim comes back before the lane runs dry)."""
        lane = self._lanes.get(endpoint_id)
        return lane is None or len(lane.waiting) * 4 <= self._holds(lane) * 3

    def admit(self, endpoint_id: str, row: Row, now: float) -> bool:
        """True: start `row`'s attempt now (it is counted in flight); False: it is held for the endpoint's turn."""
        lane = self._lanes.setdefault(endpoint_id, _Lane(now))
        if lane.busy < self._limit:
            lane.busy += 1
            lane.moved = now
            return True
        lane.waiting.append(row)
        self.held += 1
        return False

    def finished(self, endpoint_id: str, now: float, took: float | None = None) -> Row | None:
        """An attempt to the endpoint ended (after `took` seconds): the job to start in its place (counted in
        flight), if one is held."""
        lane = self._lanes[endpoint_id]
        if took is not None:
            lane.duration = took if lane.duration is None else lane.duration + SMOOTHING * (took - lane.duration)
        if lane.waiting:
            self.held -= 1
            lane.moved = now
            return lane.waiting.popleft()
        lane.busy -= 1
        if not lane.busy:
            del self._lanes[endpoint_id]
        return None

    def expired(self, now: float) -> list[Row]:
        """The held jobs of endpoints where no attempt started for `hold_for`, taken out of their lanes: they go
        back to the queue."""
        gone: list[Row] = []
        for lane in self._lanes.values():
            if lane.waiting and now - lane.moved >= self._hold_for:
                gone.extend(lane.waiting)
                lane.waiting.clear()
        self.held -= len(gone)
        return gone

    def drain(self) -> list[Row]:
        """Every held job, taken out (the worker is stopping: they go back to the queue)."""
        return self.expired(float("inf"))

    def _holds(self, lane: _Lane) -> int:
        """What a lane may hold: what its endpoint starts within `hold_for` at its pace, within the bound."""
        if lane.duration is None:
            pace = self._limit
        else:
            pace = max(1, math.ceil(self._limit * self._hold_for / max(lane.duration, 1e-6)))
        return int(min(pace, self._hold_at_most))
