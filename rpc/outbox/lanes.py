"""One delivery worker's lanes, one per endpoint: at most `limit` attempts in flight to an endpoint, and the rest of
its claimed jobs held here, in claim order, each started the moment one of that endpoint's attempts ends.

Holding them is what lets one endpoint's backlog flow as fast as the endpoint answers: sending them back to the queue
instead (as the worker once did) left each a second behind, and one worker drained one endpoint at a trickle. Held
jobs stay `doing` under the worker's id, so a worker that dies with them loses nothing: the retry of stalled jobs
requeues them like any other.

A held job counts against the worker's room to claim, so no endpoint may take much of it:
- a lane holds at most `hold_at_most` jobs beyond those in flight. The worker claims no more than each lane's
  `room` (`rooms`, passed to the claim), and a job claimed beyond it anyway goes straight back to the queue
  (`admit` says `release`). An endpoint that answers slowly but steadily (every 200 ms, say) keeps its lane moving,
  and without the bound its backlog would fill the room and every other endpoint would move at its pace;
- when no attempt to an endpoint has started for `hold_for` seconds (its receiver hangs), its held jobs go back to
  the queue (`expired`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

Row = dict[str, Any]  # a claimed job, with what its attempt needs (rpc/outbox/claims.py)
Turn = Literal["start", "hold", "release"]
HOLD_FOR = 0.25  # seconds without an attempt started to an endpoint, after which its held jobs go back to the queue
HELD_PER_LIMIT = 4  # jobs a lane may hold, in multiples of its limit in flight: enough to keep a fast one flowing


@dataclass(slots=True)
class _Lane:
    moved: float  # when an attempt to the endpoint last started
    busy: int = 0
    waiting: deque[Row] = field(default_factory=deque)  # oldest first


class Lanes:
    """The endpoints' lanes of one worker."""

    def __init__(self, limit: int, hold_for: float = HOLD_FOR, hold_at_most: int | None = None) -> None:
        self._limit = limit
        self._hold_for = hold_for
        self._hold_at_most = HELD_PER_LIMIT * limit if hold_at_most is None else hold_at_most
        self._lanes: dict[str, _Lane] = {}
        self.held = 0  # jobs waiting in all lanes

    @property
    def room(self) -> int:
        """How many jobs of an endpoint without a lane the worker may take: its limit and what a lane holds."""
        return self._limit + self._hold_at_most

    def rooms(self) -> dict[str, int]:
        """How many more jobs each endpoint with a lane may take (0: none until its lane moves)."""
        return {endpoint: max(0, self.room - lane.busy - len(lane.waiting)) for endpoint, lane in self._lanes.items()}

    def low(self, endpoint_id: str) -> bool:
        """True when the endpoint's lane has used half of what it held: time to claim more of its jobs."""
        lane = self._lanes.get(endpoint_id)
        return lane is None or len(lane.waiting) * 2 <= self._hold_at_most

    def admit(self, endpoint_id: str, row: Row, now: float) -> Turn:
        """`start` `row`'s attempt now (it is counted in flight), `hold` it for the endpoint's turn, or `release`
        it to the queue: the endpoint's lane is full."""
        lane = self._lanes.setdefault(endpoint_id, _Lane(now))
        if lane.busy < self._limit:
            lane.busy += 1
            lane.moved = now
            return "start"
        if len(lane.waiting) >= self._hold_at_most:
            return "release"
        lane.waiting.append(row)
        self.held += 1
        return "hold"

    def finished(self, endpoint_id: str, now: float) -> Row | None:
        """An attempt to the endpoint ended: the job to start in its place (counted in flight), if one is held."""
        lane = self._lanes[endpoint_id]
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
