"""PayTR (iFrame API), the payment provider: its settings, the payment page token for a pending payment, and the
notification receiver.

Checkout: `POST PAYTR_API_URL` (the get-token call) with the order and
    paytr_token = Base64(HMAC-SHA256(merchant_key, merchant_id + user_ip + merchant_oid + email + payment_amount
                                     + user_basket + no_installment + max_installment + currency + test_mode
                                     + merchant_salt))
answered `{"status": "success", "token": T}`; the buyer pays at https://www.paytr.com/odeme/guvenli/T.

Notification (`POST /api/webhooks/paytr`, docs/billing.md):
    hash = Base64(HMAC-SHA256(merchant_key, merchant_oid + merchant_salt + status + total_amount))
Only these four signed fields decide anything; `failed_reason_msg` and `failed_reason_code` are unsigned and
kept as information. PayTR repeats a notification until it is answered with the plain text `OK`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import re
import urllib.parse
from collections.abc import Mapping

import httpx
import msgspec

from procedures.billing.settlement import settle
from procedures.billing.shapes import Checkout, Notice, Order
from rpc.api import Connection, Unavailable
from rpc.audit import log as audit_log
from rpc.outbox.emit import Emitter
from rpc.payments.provider import Verdict
from rpc.settings import Settings, SettingsError

log = logging.getLogger(__name__)

PAYMENT_PAGE = "https://www.paytr.com/odeme/guvenli/"
SIGNED = ("merchant_oid", "status", "total_amount", "hash")
MAX_INFO_CHARS = 500  # of the unsigned, informational failure reason and code
CURRENCIES = {"TRY": "TL"}  # PayTR's name for the Turkish lira
ACTOR = audit_log.automated("paytr")  # who changes a plan when a notification settles its payment
_DIGITS = re.compile(r"[0-9]{1,12}")
_ORDER_ID = re.compile(r"[A-Za-z0-9]{1,64}")  # payments_merchant_oid_check


class PayTRSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`PAYTR_MERCHANT_ID`, `PAYTR_MERCHANT_KEY`, `PAYTR_MERCHANT_SALT` (no checkout without all three),
    `PAYTR_API_URL` (where the checkout token is requested) and `PAYTR_TIMEOUT` (seconds for that exchange)."""

    merchant_id: str | None = None
    merchant_key: str | None = None
    merchant_salt: str | None = None
    api_url: str = "https://www.paytr.com/odeme/api/get-token"
    timeout: float = 10.0

    @classmethod
    def of(cls, settings: Settings) -> PayTRSettings:
        paytr = settings.section("PAYTR_", cls)
        if not 0 < paytr.timeout <= 60:
            raise SettingsError("PAYTR_TIMEOUT must be between 0 and 60 seconds")
        return paytr

    @property
    def configured(self) -> bool:
        """Whether checkouts can be opened: all three merchant credentials are set."""
        return bool(self.merchant_id and self.merchant_key and self.merchant_salt)


def sign(key: str, message: str) -> str:
    """Base64(HMAC-SHA256(key, message)), PayTR's signature of both directions."""
    return base64.b64encode(hmac.new(key.encode(), message.encode(), hashlib.sha256).digest()).decode()


def major_units(amount: int) -> str:
    """An amount in minor units as PayTR's basket wants it: `99000` → `"990.00"`."""
    return f"{amount // 100}.{amount % 100:02d}"


async def checkout(http: httpx.AsyncClient, settings: Settings, order: Order) -> Checkout | None:
    """The payment page of a pending payment; None when the merchant credentials are not all set.
    The provider failing or not answering within PAYTR_TIMEOUT (the whole exchange) is `503 unavailable`."""
    paytr = PayTRSettings.of(settings)
    merchant_id, key, salt = paytr.merchant_id, paytr.merchant_key, paytr.merchant_salt
    if not (paytr.configured and merchant_id and key and salt):  # (the names, narrowed for the type checker)
        return None
    basket = [[order.description, major_units(order.amount), 1]]
    form = {
        "merchant_id": merchant_id,
        "user_ip": order.buyer_ip,
        "merchant_oid": order.merchant_oid,
        "email": order.email,
        "payment_amount": str(order.amount),
        "user_basket": base64.b64encode(json.dumps(basket).encode()).decode(),
        "no_installment": "1",
        "max_installment": "0",
        "currency": CURRENCIES.get(order.currency, order.currency),
        "test_mode": "0" if settings.production else "1",
    }
    form["paytr_token"] = sign(
        key,
        "".join(
            form[name]
            for name in (
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
        )
        + salt,
    )
    form.update(
        {
            "debug_on": "0",
            "user_name": order.buyer_name,
            # No postal address or phone is collected; PayTR requires both fields to be present.
            "user_address": "Not provided",
            "user_phone": "0000000000",
            "merchant_ok_url": f"{settings.public_url}/panel/billing?payment=ok",
            "merchant_fail_url": f"{settings.public_url}/panel/billing?payment=failed",
            "timeout_limit": "30",
            "lang": "en",
        }
    )
    try:
        async with asyncio.timeout(paytr.timeout):
            response = await http.post(paytr.api_url, data=form, timeout=paytr.timeout)
        answer = response.json()
    except (httpx.HTTPError, TimeoutError, ValueError) as exc:
        log.warning("PayTR get-token failed: %s", type(exc).__name__)
        raise Unavailable("The payment provider did not answer; retry shortly.") from exc
    if not isinstance(answer, dict):
        answer = {}
    token = answer.get("token")
    if response.status_code != 200 or answer.get("status") != "success" or not isinstance(token, str) or not token:
        reason = answer.get("reason")
        log.warning("PayTR refused a checkout token (HTTP %s): %.200s", response.status_code, reason)
        raise Unavailable("The payment provider refused the checkout; retry shortly.")
    return Checkout(token=token, url=PAYMENT_PAGE + urllib.parse.quote(token, safe=""))


class PayTR:
    """PayTR's notifications, behind `POST /api/webhooks/paytr` (the framework's receiver)."""

    signed_fields = SIGNED

    async def receive(
        self,
        conn: Connection,
        emitter: Emitter,
        settings: Settings,
        fields: Mapping[str, str],
        origin: audit_log.Origin,
    ) -> Verdict:
        """Check the notification's hash and settle its payment, in the transaction the framework opened; what
        it changes is audited with the notification's `origin`."""
        paytr = PayTRSettings.of(settings)
        key, salt = paytr.merchant_key, paytr.merchant_salt
        if not (key and salt):
            # Not our sender's fault: a non-`OK` answer makes PayTR repeat the notification until we can check it.
            return Verdict(503, "payment provider not configured", "not_configured")
        missing = [name for name in SIGNED if not fields.get(name)]
        if missing:
            return Verdict(400, f"missing fields: {', '.join(missing)}", "malformed")
        oid, status, total_amount = fields["merchant_oid"], fields["status"], fields["total_amount"]
        expected = sign(key, oid + salt + status + total_amount)
        if not hmac.compare_digest(expected.encode(), fields["hash"].encode()):
            return Verdict(400, "invalid hash", "invalid_hash")
        if status not in ("success", "failed") or not _DIGITS.fullmatch(total_amount):
            return Verdict(400, "unknown status or malformed total_amount", "malformed")
        if not _ORDER_ID.fullmatch(oid):
            return Verdict(200, "OK", "unknown_order")  # no order of ours looks like this
        notice = Notice(
            merchant_oid=oid,
            succeeded=status == "success",
            total_amount=int(total_amount),
            failed_reason=_info(fields.get("failed_reason_msg")),
            failed_reason_code=_info(fields.get("failed_reason_code")),
        )
        outcome = await settle(conn, emitter, notice, actor=ACTOR, origin=origin)
        return Verdict(200, "OK", outcome)


def _info(text: str | None) -> str | None:
    """An unsigned, informational field as it can be stored (PostgreSQL text holds no NUL)."""
    if text is None:
        return None
    return text.replace("\x00", "")[:MAX_INFO_CHARS]
