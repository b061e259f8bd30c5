"""One delivery worker's lanes, one per endpoint: at most `limit` attempts in flight to an endpoint, and the rest of
its claimed jobs held here, in claim order, each started the moment one of that endpoint's attempts ends.

Holding them is what lets one endpoint's backlog flow as fast as the endpoint answers: sending them back to the queue
instead (as the worker once did) left each a second behind, and one worker drained one endpoint at a trickle. Held
jobs stay `doing` under the worker's id, so a worker that dies with them loses nothing: the retry of stalled jobs
requeues them like any other. A held job counts against the worker's room to claim, so a slow endpoint could fill
that room with jobs it is in no hurry to take: when no attempt to an endpoint has started for `hold_for` seconds
(its receiver hangs, or answers slowly), its held jobs go back to the queue (`expired`), and the other endpoints'
jobs are never kept waiting behind it for longer than that. An endpoint that answers keeps its lane moving.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]  # a claimed job, with what its attempt needs (rpc/outbox/claims.py)
HOLD_FOR = 0.25  # seconds without an attempt started to an endpoint, after which its held jobs go back to the queue


@dataclass(slots=True)
class _Lane:
    moved: float  # when an attempt to the endpoint last started
    busy: int = 0
    waiting: deque[Row] = field(default_factory=deque)  # oldest first


class Lanes:
    """The endpoints' lanes of one worker."""

    def __init__(self, limit: int, hold_for: float = HOLD_FOR) -> None:
        self._limit = limit
        self._hold_for = hold_for
        self._lanes: dict[str, _Lane] = {}
        self.held = 0  # jobs waiting in all lanes

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
