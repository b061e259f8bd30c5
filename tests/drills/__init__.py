"""Fault drills (issue 7, item 3) and the horizontal-scale test (item 5): real `bin/serve` and `bin/worker`
processes, real receivers, only on 127.0.0.1, each drill bounded in time. They run with everything else in
`pytest -q` (and so in `.ci/run`); `pytest -q -s tests/drills` prints each drill's figures.

- `test_database_outage.py`: the database cut under a fixed load: `503 unavailable` with Retry-After while it
  is away, full service within 5 s of its return, no 500, no lost or phantom write;
- `test_bad_receivers.py`: a hanging and a resetting receiver beside a good one: timeouts, resets and retries
  recorded; the good one not delayed (each worker caps the attempts in flight to one endpoint);
- `test_concurrent_status.py`: 200 concurrent `applications.update_status` on one application: one valid path
  from `pending`, one event and one history row per accepted change;
- `test_steady_load.py`: a minute of mixed reads and writes at a fixed rate: 0 5xx, the server's RSS flat;
- `test_horizontal_scale.py`: two API processes and two workers on one database and Redis: one shared rate
  limit, exactly-once state changes, every event delivered.
- `test_restarts.py`: `bin/admin` commands, workers and a second server started during keyed writes, three times
  over, with no failed request; and kill -9 of servers and workers during idempotent writes with retries: each
  job once, every event delivered, every replay answered with the first answer, the audit chain intact.

Drills that live beside the code they exercise, not repeated here:

- kill -9 of the webhook worker, twice, during 2,000 deliveries (every event delivered, nothing left `doing`,
  no attempt used up by a kill), and a killed worker's jobs requeued while a backlog waits:
  `tests/test_worker_crash.py`;
- 50 concurrent copies of one signed payment notification (one change, one set of events, 50 audit rows):
  `tests/test_paytr.py::test_50_concurrent_copies_complete_the_payment_once`;
- the database away without load (503 on `/v1`, `/healthz` and sign-in, then recovery): `tests/test_health.py`.

`common.py` holds what they share: `Fleet` (processes with their logs, stopped whatever happens), `Load` (an
open-loop, fixed-rate load generator that records every answer), `Outage`, and `Resetter` (a receiver that
resets every connection).
"""
