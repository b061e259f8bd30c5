"""A webhook receiver as a customer would write one, on a loopback port in a thread of the test process.

Each `Hook` is one URL (its own path) with the secrets its owner knows, a script of answers (500, 201, 200,
slow, hanging, held until the test lets it go) and a record of every request it got: arrival and answer
times, headers and raw body. Like a customer's, it checks `X-Service-Signature` before anything else —
lowercase hex HMAC-SHA256 of the raw body keyed with the UTF-8 bytes of the whole `whsec_...` secret,
compared with `hmac.compare_digest` — and answers 401 when none of the secrets it knows verifies it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import standardwebhooks


def signature(secret: str, body: bytes) -> str:
    """What a customer computes: hex HMAC-SHA256 of the raw body, keyed with the whole secret's UTF-8 bytes."""
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verifies(secret: str, body: bytes, header: str | None) -> bool:
    return header is not None and hmac.compare_digest(signature(secret, body), header)


@dataclass(frozen=True)
class Reply:
    """One answer: `status` with `body`, after `delay` seconds, or after the test sets `hold` (at most 30 s);
    `hang` never answers (the request is recorded on arrival; the handler waits until the receiver closes)."""

    status: int = 200
    body: bytes = b"ok"
    delay: float = 0.0
    hang: bool = False
    hold: threading.Event | None = None


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it; `answered` is when the answer was about to be written
    (`arrived` for a hang): it is recorded just before, so that it is here once the sender has read it."""

    arrived: float
    answered: float
    headers: dict[str, str]  # lower-case names
    body: bytes
    status: int | None  # what the receiver answered; None: nothing (a hang)
    valid: bool  # X-Service-Signature verified with a secret the hook knew on arrival

    @property
    def envelope(self) -> Any:
        return json.loads(self.body)

    @property
    def delivery(self) -> str:
        return self.headers["x-service-delivery"]

    def signed_with(self, secret: str) -> bool:
        return verifies(secret, self.body, self.headers.get("x-service-signature"))

    def next_signed_with(self, secret: str) -> bool:
        return verifies(secret, self.body, self.headers.get("x-service-signature-next"))

    def standard_verified_with(self, secret: str) -> bool:
        """Whether the Standard Webhooks library itself accepts this request with `secret` (docs/webhooks.md)."""
        try:
            standardwebhooks.Webhook(secret).verify(self.body, self.headers)
        except standardwebhooks.WebhookVerificationError:
            return False
        return True


@dataclass
class Hook:
    """One endpoint URL of the receiver."""

    url: str
    secrets: list[str] = field(default_factory=list)
    default: Reply = field(default_factory=Reply)
    script: list[Reply] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    arrivals: int = 0  # requests that arrived, answered or not yet
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def answer(self, *replies: Reply, default: Reply | None = None) -> Hook:
        """Answer the next requests with `replies`, in order, then with `default` (if given)."""
        with self.lock:
            self.script.extend(replies)
            if default is not None:
                self.default = default
        return self

    def know(self, *secrets: str) -> None:
        """The secrets the customer checks signatures with, from now on."""
        with self.lock:
            self.secrets = list(secrets)

    def received(self) -> list[Received]:
        with self.lock:
            return list(self.requests)

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """At least `count` recorded requests; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.url}: {len(self.requests)} of {count} requests in {timeout} s")
                self.changed.wait(left)
            return list(self.requests)

    def wait_arrivals(self, count: int, timeout: float = 20.0) -> None:
        """At least `count` requests arrived, the last perhaps still unanswered (held)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while self.arrivals < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.url}: {self.arrivals} of {count} arrivals in {timeout} s")
                self.changed.wait(left)

    def _arrive(self, body: bytes, signature: str | None) -> tuple[Reply, bool]:
        with self.changed:
            self.arrivals += 1
            self.changed.notify_all()
            valid = any(verifies(secret, body, signature) for secret in self.secrets)
            if self.secrets and not valid:
                return Reply(401, b"bad signature"), False
            return (self.script.pop(0) if self.script else self.default), valid

    def _record(self, received: Received) -> None:
        with self.changed:
            self.requests.append(received)
            self.changed.notify_all()

    def _correct(self, recorded: Received, corrected: Received) -> None:
        with self.changed:
            [at] = [number for number, request in enumerate(self.requests) if request is recorded]
            self.requests[at] = corrected
            self.changed.notify_all()


class Receiver:
    """A threaded HTTP server on 127.0.0.1:<free port>; `hook()` makes a new URL on it."""

    def __init__(self) -> None:
        self._hooks: dict[str, Hook] = {}
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # hanging, held and slow handlers give up
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def hook(self, *replies: Reply, default: Reply | None = None) -> Hook:
        path = f"/hooks/{uuid.uuid4().hex}"
        hook = Hook(url=self.url + path).answer(*replies, default=default)
        self._hooks[path] = hook
        return hook

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        hooks, closing = self._hooks, self._closing

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                arrived = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                hook = hooks.get(self.path)
                if hook is None:
                    self._send(404, b"no such hook")
                    return
                reply, valid = hook._arrive(body, headers.get("x-service-signature"))
                if reply.hang:
                    hook._record(Received(arrived, arrived, headers, body, None, valid))
                    self.close_connection = True
                    closing.wait(60)
                    return
                if reply.hold is not None:
                    reply.hold.wait(30)
                if reply.delay:
                    closing.wait(reply.delay)
                # Recorded before the answer goes out, so that whatever the sender does after reading it, the
                # request is already here; corrected if the sender turns out to have given up.
                received = Received(arrived, time.monotonic(), headers, body, reply.status, valid)
                hook._record(received)
                try:
                    self._send(reply.status, reply.body)
                except OSError:  # the sender gave up before the answer
                    self.close_connection = True
                    hook._correct(received, dataclasses.replace(received, status=None))

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
