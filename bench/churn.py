"""Jobs published and closed at a steady rate while a read scenario runs (issue 13: the search mix "while jobs
are published and closed at 20 per second"), through the API like any employer: each change bumps the version
of the published set, so remembered answers are recomputed as they would be on a busy board."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Sequence
from types import TracebackType

import httpx

OPEN_AT_ONCE = 50  # published by the churn and not yet closed


class Churn:
    """`with Churn(url, keys, per_second):` publishes a new job and closes the oldest one it published, each
    `1 / per_second` seconds, in a thread; `done` and `failed` count the changes."""

    def __init__(self, url: str, keys: Sequence[str], per_second: float) -> None:
        self._url, self._keys, self._interval = url, keys, 1 / per_second
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.done = 0
        self.failed = 0

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        opened: collections.deque[tuple[str, str]] = collections.deque()
        with httpx.Client(base_url=self._url, timeout=10) as client:
            tick = time.monotonic()
            for n in range(1_000_000_000):
                if self._stop.is_set():
                    return
                key = self._keys[n % len(self._keys)]
                job = self._call(
                    client,
                    key,
                    "jobs.create",
                    {
                        "title": f"Churn Python Engineer {n}",
                        "company": "Churn",
                        "location": "Istanbul",
                        "employment_type": "contract",
                    },
                )
                if job is not None and self._call(client, key, "jobs.publish", {"id": job}) is not None:
                    opened.append((job, key))
                if len(opened) > OPEN_AT_ONCE:
                    old, owner = opened.popleft()
                    self._call(client, owner, "jobs.close", {"id": old})
                tick += self._interval
                self._stop.wait(max(0.0, tick - time.monotonic()))

    def _call(self, client: httpx.Client, key: str, name: str, body: dict[str, str]) -> str | None:
        try:
            response = client.post(f"/v1/{name}", json=body, headers={"Authorization": f"Bearer {key}"})
        except httpx.HTTPError:
            self.failed += 1
            return None
        if response.status_code != 200:
            self.failed += 1
            return None
        self.done += 1
        return str(response.json()["result"]["id"])
