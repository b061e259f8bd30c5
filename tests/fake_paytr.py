"""A local stand-in for PayTR's get-token call (`POST /odeme/api/get-token`), for tests.

It recomputes `paytr_token` from the form fields with the standard library alone — independently of the
service's code — and refuses a request whose token does not match, as PayTR does. It records every request
with its verdict, and can be told to misbehave (`mode`): `refuse` answers `{"status": "failed"}`, `error`
answers HTTP 500, `garbage` answers a body that is not JSON, `slow` answers after `delay` seconds, `drop`
closes the connection without a word, and `hold` answers as PayTR would once the test sets `release` (`held` is
set while it waits), so that a test can act between the service's asking and its being answered.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN_PATH = "/odeme/api/get-token"
TOKEN_FIELDS = (
    "merchant_id",
    "user_ip",
    "merchant_oid",
    "email",
    "payment_amount",
    "user_basket",
    "no_installment",
    "max_installment",
    "currency",
    "test_mode",
)
REQUIRED = (
    *TOKEN_FIELDS,
    "paytr_token",
    "debug_on",
    "user_name",
    "user_address",
    "user_phone",
    "merchant_ok_url",
    "merchant_fail_url",
    "timeout_limit",
    "lang",
)


@dataclass
class Request:
    """One get-token request as received, and what the fake made of it."""

    path: str
    fields: dict[str, str]
    verdict: str  # "issued", "bad_token", "missing_fields", "wrong_merchant", or the misbehaviour
    token: str | None = None


@dataclass
class FakePayTR:
    merchant_id: str
    key: str
    salt: str
    mode: str | None = None
    delay: float = 2.0
    requests: list[Request] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{TOKEN_PATH}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def settings(self) -> dict[str, str]:
        """The PAYTR_* settings that point the service at this fake, with its credentials."""
        return {
            "PAYTR_MERCHANT_ID": self.merchant_id,
            "PAYTR_MERCHANT_KEY": self.key,
            "PAYTR_MERCHANT_SALT": self.salt,
            "PAYTR_API_URL": self.url,
        }

    def __enter__(self) -> FakePayTR:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def expected_token(self, fields: dict[str, str]) -> str:
        message = "".join(fields[name] for name in TOKEN_FIELDS) + self.salt
        digest = hmac.new(self.key.encode(), message.encode(), hashlib.sha256).digest()
        return base64.b64encode(digest).decode()

    def answer(self, path: str, fields: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """What PayTR would answer to this form."""
        if path != TOKEN_PATH:
            return 404, {"status": "failed", "reason": "no such address"}
        missing = [name for name in REQUIRED if name not in fields]
        if missing:
            self.record(Request(path, fields, "missing_fields"))
            return 200, {"status": "failed", "reason": f"missing: {','.join(missing)}"}
        if fields["merchant_id"] != self.merchant_id:
            self.record(Request(path, fields, "wrong_merchant"))
            return 200, {"status": "failed", "reason": "merchant_id"}
        if not hmac.compare_digest(self.expected_token(fields).encode(), fields["paytr_token"].encode()):
            self.record(Request(path, fields, "bad_token"))
            return 200, {"status": "failed", "reason": "paytr_token is not correct"}
        token = secrets.token_hex(32)
        self.record(Request(path, fields, "issued", token))
        return 200, {"status": "success", "token": token}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that gave up (the service's timeout tests); loud about anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler(fake: FakePayTR) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode()
            fields = dict(urllib.parse.parse_qsl(body, keep_blank_values=True))
            mode = fake.mode
            if mode == "hold":
                fake.held.set()
                fake.release.wait(60)
                mode = None
            if mode is not None:
                fake.record(Request(self.path, fields, mode))
            if mode == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if mode == "slow":
                time.sleep(fake.delay)
                self._send(200, json.dumps({"status": "failed", "reason": "too late"}).encode())
            elif mode == "refuse":
                self._send(200, json.dumps({"status": "failed", "reason": "told to refuse"}).encode())
            elif mode == "error":
                self._send(500, b"internal error")
            elif mode == "garbage":
                self._send(200, b"<html>not json</html>")
            else:
                status, answer = fake.answer(self.path, fields)
                self._send(status, json.dumps(answer).encode())

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler


def notification_hash(key: str, salt: str, merchant_oid: str, status: str, total_amount: str) -> str:
    """What PayTR signs a notification with, computed here with the standard library alone."""
    message = (merchant_oid + salt + status + total_amount).encode()
    return base64.b64encode(hmac.new(key.encode(), message, hashlib.sha256).digest()).decode()


def notification(
    key: str, salt: str, merchant_oid: str, status: str, total_amount: str, **extra: str
) -> dict[str, str]:
    """A notification as PayTR posts it: the signed fields, their hash, and any unsigned extras."""
    fields = {"merchant_oid": merchant_oid, "status": status, "total_amount": total_amount, **extra}
    fields["hash"] = notification_hash(key, salt, merchant_oid, status, total_amount)
    return fields
