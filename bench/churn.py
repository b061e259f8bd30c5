"""Jobs published and closed at a steady rate while a read scenario runs (issue 13: the search mix "while jobs
are published and closed at 20 per second"), through the API like any employer: each change bumps the version
of the published set, so remembered answers are recomputed as they would be on a busy board."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

import httpx

OPEN_AT_ONCE = 50  # published by the churn and not yet closed
WORKERS = 16  # changes in flight at once, at most


class Churn:
    """`with Churn(url, keys, per_second):` each `1 / per_second` seconds publishes a new job (create, then
    publish) and closes the one published `OPEN_AT_ONCE` changes earlier, on a pool of threads so that a slow
    answer does not slow the pace; `published`, `closed` and `failed` count the calls' outcomes."""

    def __init__(self, url: str, keys: Sequence[str], per_second: float) -> None:
        self._url, self._keys, self._interval = url, keys, 1 / per_second
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()
        self._opened: collections.deque[tuple[str, str]] = collections.deque()
        self.published = self.closed = self.failed = 0
        self.seconds = 0.0

    def __enter__(self) -> Churn:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        started = tick = time.monotonic()
        with httpx.Client(base_url=self._url, timeout=10) as client, ThreadPoolExecutor(WORKERS) as pool:
            number = 0
            while not self._stop.is_set():
                pool.submit(self._change, client, number)
                number += 1
                tick += self._interval
                self._stop.wait(max(0.0, tick - time.monotonic()))
        self.seconds = time.monotonic() - started

    def _change(self, client: httpx.Client, number: int) -> None:
        key = self._keys[number % len(self._keys)]
        fields = {"title": f"Python Engineer {number}", "company": "Churn", "location": "İstanbul"}
        job = self._call(client, key, "jobs.create", {**fields, "employment_type": "contract"})
        if job is None or self._call(client, key, "jobs.publish", {"id": job}) is None:
            return
        with self._lock:
            self.published += 1
            self._opened.append((job, key))
            oldest = self._opened.popleft() if len(self._opened) > OPEN_AT_ONCE else None
        if oldest is not None and self._call(client, oldest[1], "jobs.close", {"id": oldest[0]}) is not None:
            with self._lock:
                self.closed += 1

    def _call(self, client: httpx.Client, key: str, name: str, body: dict[str, str]) -> str | None:
        try:
            response = client.post(f"/v1/{name}", json=body, headers={"Authorization": f"Bearer {key}"})
        except httpx.HTTPError:
            response = None
        if response is None or response.status_code != 200:
            with self._lock:
                self.failed += 1
            return None
        return str(response.json()["result"]["id"])
