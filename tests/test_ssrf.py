"""Where a production deployment may send webhooks (docs/webhooks.md): `https` only, to globally routable
addresses, checked when an endpoint is created and again at every attempt against the address connected to;
redirects are never followed."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import ssl
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st

from rpc.db.pool import open_pool
from rpc.ops import admin as ops
from rpc.ops.admin import AdminError
from rpc.outbox.deliverer import Deliverer
from rpc.outbox.endpoints import TestEvent as WebhookTestEvent  # not collected as a test class
from rpc.outbox.sender import Sender
from rpc.outbox.ssrf import AddressGuard, BlockedDestination, embedded_ipv4, guard, permitted
from rpc.settings import Settings
from tests.support import Admin, User, emitter_for, settings_for

ip = ipaddress.ip_address
NONE: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()


def teredo(server: str, client: str) -> ipaddress.IPv6Address:
    """A Teredo address (2001::/32): the server's IPv4 address, then the client's with every bit flipped."""
    flipped = int(ipaddress.IPv4Address(client)) ^ 0xFFFFFFFF
    return ipaddress.IPv6Address((0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64) | flipped)


def mapped(address: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address((0xFFFF << 32) | int(address))


def nat64(address: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(address))


def sixtofour(address: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address((0x2002 << 112) | (int(address) << 80))


# --- permitted() ------------------------------------------------------------------------------------------------

REFUSED = [
    "169.254.169.254",  # cloud metadata (link-local)
    "127.0.0.1",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",  # shared address space (carrier-grade NAT)
    "0.0.0.0",  # noqa: S104 - an address under test, nothing binds to it
    "224.0.0.1",  # multicast
    "233.252.0.1",  # multicast (MCAST-TEST-NET)
    "240.0.0.1",  # reserved
    "255.255.255.255",
    "192.0.0.8",  # IETF protocol assignments
    "198.18.0.1",  # benchmarking
    "::",
    "::1",
    "fe80::1",
    "fc00::1",
    "fec0::1",  # deprecated site-local
    "ff02::1",  # link-local multicast
    "ff0e::1",  # global multicast
    "2001:db8::1",  # documentation
    "::ffff:a9fe:a9fe",  # IPv4-mapped metadata
    "::ffff:127.0.0.1",
    "::a9fe:a9fe",  # deprecated IPv4-compatible
    "::ffff:0:a9fe:a9fe",  # IPv4-translated (SIIT)
    "64:ff9b::a9fe:a9fe",  # NAT64 well-known prefix
    "64:ff9b:1::a9fe:a9fe",  # NAT64 local-use prefix
    "2002:a9fe:a9fe::",  # 6to4
    "2002:c0a8:0101::1",  # 6to4 of 192.168.1.1
    str(teredo("65.54.227.120", "192.168.1.1")),  # Teredo, private client behind a public server
    str(teredo("65.54.227.120", "169.254.169.254")),
]
ACCEPTED = [
    "8.8.8.8",
    "1.1.1.1",
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::1",
    str(teredo("65.54.227.120", "8.8.8.8")),
]


@pytest.mark.parametrize("address", REFUSED)
def test_permitted_refuses_what_is_not_globally_routable(address: str) -> None:
    assert not permitted(ip(address), NONE)


@pytest.mark.parametrize("address", ACCEPTED)
def test_permitted_accepts_globally_routable_addresses(address: str) -> None:
    assert permitted(ip(address), NONE)


def test_embedded_ipv4_reads_every_form() -> None:
    metadata = ipaddress.IPv4Address("169.254.169.254")
    assert embedded_ipv4(mapped(metadata)) == metadata
    assert embedded_ipv4(nat64(metadata)) == metadata
    assert embedded_ipv4(sixtofour(metadata)) == metadata
    assert embedded_ipv4(teredo("65.54.227.120", "169.254.169.254")) == metadata
    assert embedded_ipv4(ip("2606:4700:4700::1111")) is None
    assert embedded_ipv4(metadata) is None


def test_allowed_networks_admit_only_themselves() -> None:
    settings = settings_for("postgresql:///unused", WEBHOOK_ALLOWED_NETWORKS="10.1.0.0/16, fd00:1::/32")
    allowed = settings.allowed_networks
    assert permitted(ip("10.1.2.3"), allowed)
    assert permitted(ip("::ffff:10.1.2.3"), allowed), "an allowed IPv4 network also admits its mapped form"
    assert permitted(ip("fd00:1::5"), allowed)
    assert not permitted(ip("10.2.0.1"), allowed)
    assert not permitted(ip("10.0.255.255"), allowed)
    assert not permitted(ip("169.254.169.254"), allowed)
    assert not permitted(ip("fd00:2::5"), allowed)
    assert permitted(ip("8.8.8.8"), allowed)


@given(st.ip_addresses(v=4), st.sampled_from([NONE, (ipaddress.IPv4Network("10.1.0.0/16"),)]))
def test_an_embedded_ipv4_address_is_judged_as_itself(
    address: ipaddress.IPv4Address, allowed: tuple[ipaddress.IPv4Network, ...]
) -> None:
    verdict = permitted(address, allowed)
    assert permitted(mapped(address), allowed) == verdict
    assert permitted(nat64(address), allowed) == verdict
    assert permitted(sixtofour(address), allowed) == verdict
    assert permitted(teredo("65.54.227.120", str(address)), allowed) == verdict


# --- AddressGuard.resolve ---------------------------------------------------------------------------------------


def resolve(url: str, allowed: str = "") -> str:
    settings = settings_for("postgresql:///unused", WEBHOOK_ALLOWED_NETWORKS=allowed)
    return asyncio.run(AddressGuard(settings.allowed_networks).resolve(httpx.URL(url)))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://8.8.8.8/", "https"),
        ("https://169.254.169.254/latest/meta-data/", "169.254.169.254"),
        ("https://[::ffff:a9fe:a9fe]/", "::ffff:a9fe:a9fe"),
        ("https://[64:ff9b::a9fe:a9fe]/", "64:ff9b::a9fe:a9fe"),
        ("https://0x7f000001/", "not allowed"),  # getaddrinfo reads hexadecimal IPv4
        ("https://2130706433/", "not allowed"),  # ... and decimal
        ("https://127.1/", "not allowed"),  # ... and shortened
        ("https://localhost/", "not publicly routable"),
        ("https://[::1]:8443/", "::1"),
        ("https://10.0.0.1:443/", "10.0.0.1"),
        ("https://nonexistent.invalid/", "cannot resolve"),
        ("https://" + "a" * 64 + ".example/", "cannot resolve"),  # a label IDNA cannot encode
        ("https://8.8.8.8:99999/", "not a port"),
        ("https://8.8.8.8:0/", "not a port"),
    ],
)
def test_guard_refuses(url: str, reason: str) -> None:
    with pytest.raises(BlockedDestination, match=reason.replace(".", r"\.")):
        resolve(url)


@pytest.mark.parametrize("url", ["https://localhost/", "https://0x7f000001/", "https://127.1/"])
def test_a_refusal_names_no_address_of_our_network(url: str) -> None:
    """The message reaches the endpoint's owner (the panel's form, the delivery log): it says the address is not
    allowed, never which internal address the name resolved to — a probe of our network's DNS."""
    with pytest.raises(BlockedDestination) as refusal:
        resolve(url)
    assert "127.0.0.1" not in str(refusal.value) and "::1" not in str(refusal.value)


def test_guard_answers_the_address_to_connect_to() -> None:
    assert resolve("https://8.8.8.8/hook") == "8.8.8.8"
    assert resolve("https://[2606:4700:4700::1111]:8443/") == "2606:4700:4700::1111"
    assert resolve("https://127.0.0.1:9/", allowed="127.0.0.0/8") == "127.0.0.1"
    with pytest.raises(BlockedDestination):
        resolve("https://127.0.0.1:9/", allowed="10.0.0.0/8")


# --- receivers and one attempt of a delivery --------------------------------------------------------------------


class Receiver:
    """A webhook receiver on 127.0.0.1 (optionally TLS): records every request, answers `status`."""

    def __init__(
        self,
        status: int = 200,
        headers: dict[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        keep_alive: bool = False,
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.server_names: list[str | None] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_GET = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            names = self.server_names

            def sni(_sock: Any, name: str | None, _ctx: ssl.SSLContext) -> None:
                names.append(name)

            tls.sni_callback = sni
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def new_endpoint(admin: Admin, url: str) -> tuple[User, str]:
    """A new account with one endpoint, created as a development deployment would accept it."""
    user = admin.user("employer")
    return user, admin.webhook(user, url, ["job.updated"])["id"]


def emit_test_event(admin: Admin, user: User, endpoint_id: str) -> str:
    """A `webhook.test` event to the endpoint; its one delivery's id."""
    settings = admin.settings

    async def go() -> uuid.UUID:
        async with await ops.connect(admin.database_url) as conn, conn.transaction():
            emitter = emitter_for(settings)
            return await emitter.emit(
                conn,
                "webhook.test",
                WebhookTestEvent(endpoint_id=endpoint_id),
                [user.account_id],
                endpoint_id=endpoint_id,
            )

    event_id = asyncio.run(go())
    rows = admin.sql("SELECT id::text AS id FROM webhook_deliveries WHERE event_id = %(e)s", {"e": event_id})
    assert len(rows) == 1
    return str(rows[0]["id"])


def attempt(settings: Settings, database_url: str, *delivery_ids: str, verify: ssl.SSLContext | bool = True) -> None:
    """One attempt of each delivery in turn, by one Deliverer built the way `bin/worker` builds it
    (rpc.services.deliver_only: one sender for all attempts)."""

    async def go() -> None:
        async with open_pool(settings, database_url) as pool, Sender(guard(settings), verify) as sender:
            deliverer = Deliverer(settings, pool, sender)
            for delivery_id in delivery_ids:
                await deliverer.attempt(delivery_id)

    asyncio.run(go())


def attempts_of(admin: Admin, delivery_id: str) -> list[dict[str, Any]]:
    return admin.sql(
        "SELECT number, status_code, error, response_excerpt FROM webhook_attempts "
        "WHERE delivery_id = %(d)s ORDER BY number",
        {"d": delivery_id},
    )


def delivery(admin: Admin, delivery_id: str) -> dict[str, Any]:
    return admin.sql(
        "SELECT status, attempts, last_status_code, last_error FROM webhook_deliveries WHERE id = %(d)s",
        {"d": delivery_id},
    )[0]


@pytest.fixture(scope="module")
def production(database: str) -> Settings:
    return settings_for(database, SERVICE_ENV="production", WEBHOOK_RETRY_WAITS="0")


@pytest.fixture(scope="module")
def development(database: str) -> Settings:
    return settings_for(database, SERVICE_ENV="development", WEBHOOK_RETRY_WAITS="0")


# --- endpoint creation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hooks",
        "http://8.8.8.8/hooks",
        "https://127.0.0.1:8443/hooks",
        "https://localhost/hooks",
        "https://[::1]/hooks",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::ffff:a9fe:a9fe]/",
        "https://0x7f000001/",
        "https://10.0.0.1/",
        "https://nonexistent.invalid/",
        "https://" + "a" * 64 + ".example/",
        "https://8.8.8.8:99999/",
    ],
)
def test_production_refuses_creating_an_endpoint(admin: Admin, database: str, production: Settings, url: str) -> None:
    user = admin.user("employer")  # made by the test deployment: production refuses mint-token
    with pytest.raises(AdminError, match="--url"):
        Admin(database, production).webhook(user, url, ["job.updated"])
    endpoints = admin.sql("SELECT id FROM webhook_endpoints WHERE account_id = %(a)s", {"a": user.account_id})
    assert endpoints == []


def test_production_accepts_a_public_https_endpoint(admin: Admin, database: str, production: Settings) -> None:
    user = admin.user("employer")
    created = Admin(database, production).webhook(user, "https://8.8.8.8/hooks", ["job.updated"])
    assert created["secret"].startswith("whsec_")


def test_development_accepts_a_loopback_http_endpoint(admin: Admin, database: str, development: Settings) -> None:
    user = admin.user("employer")
    created = Admin(database, development).webhook(user, "http://127.0.0.1:9/hooks", ["job.updated"])
    assert created["secret"].startswith("whsec_")


# --- attempts ---------------------------------------------------------------------------------------------------


def test_production_refuses_a_loopback_endpoint_at_attempt_time(
    admin: Admin, database: str, production: Settings
) -> None:
    """An endpoint that slipped past creation (written by SQL here) is refused when it is called."""
    with Receiver() as receiver:
        user, endpoint_id = new_endpoint(admin, f"http://127.0.0.1:{receiver.port}/hooks")
        admin.sql(
            "UPDATE webhook_endpoints SET url = %(u)s WHERE id = %(id)s",
            {"u": f"https://127.0.0.1:{receiver.port}/hooks", "id": endpoint_id},
        )
        delivery_id = emit_test_event(admin, user, endpoint_id)
        attempt(production, database, delivery_id)
    assert receiver.requests == []
    [first] = attempts_of(admin, delivery_id)
    assert first["number"] == 1 and first["status_code"] is None
    assert "not allowed" in first["error"] and "not publicly routable" in first["error"]
    row = delivery(admin, delivery_id)
    assert row["status"] == "failed" and row["attempts"] == 1 and "not allowed" in row["last_error"]


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:{port}/hooks", "https://[::ffff:7f00:1]:{port}/hooks", "https://localhost:{port}/hooks"],
)
def test_production_refuses_every_form_at_attempt_time(
    admin: Admin, database: str, production: Settings, url: str
) -> None:
    with Receiver() as receiver:
        user, endpoint_id = new_endpoint(admin, f"http://127.0.0.1:{receiver.port}/hooks")
        admin.sql(
            "UPDATE webhook_endpoints SET url = %(u)s WHERE id = %(id)s",
            {"u": url.format(port=receiver.port), "id": endpoint_id},
        )
        delivery_id = emit_test_event(admin, user, endpoint_id)
        attempt(production, database, delivery_id)
    assert receiver.requests == []
    [first] = attempts_of(admin, delivery_id)
    assert first["status_code"] is None and first["error"]
    assert delivery(admin, delivery_id)["status"] == "failed"


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "second receiver"])
def test_a_redirect_is_never_followed(admin: Admin, database: str, development: Settings, target: str) -> None:
    with Receiver() as second:
        location = f"http://127.0.0.1:{second.port}/stolen" if target == "second receiver" else target
        with Receiver(status=302, headers={"Location": location}) as receiver:
            user, endpoint_id = new_endpoint(admin, f"http://127.0.0.1:{receiver.port}/hooks")
            delivery_id = emit_test_event(admin, user, endpoint_id)
            attempt(development, database, delivery_id)
    assert len(receiver.requests) == 1
    assert second.requests == []
    [first] = attempts_of(admin, delivery_id)
    assert first["status_code"] == 302 and first["error"] is None
    row = delivery(admin, delivery_id)
    assert row["status"] == "failed" and row["last_status_code"] == 302


# --- TLS to the checked address, verified against the host name ----------------------------------------------------


def certificate(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for DNS name `name` (no IP address): the server's context, and a client's
    context that trusts it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    client = ssl.create_default_context(cadata=cert_pem.decode())
    return server, client


@pytest.fixture
def loopback_name() -> str:
    """`localhost`, when it resolves to 127.0.0.1 only (the receiver listens there)."""
    answer = asyncio.run(AddressGuard([ipaddress.ip_network("127.0.0.0/8")]).resolve(httpx.URL("https://localhost/")))
    if answer != "127.0.0.1":
        pytest.skip(f"localhost resolves to {answer}")
    return "localhost"


def test_production_connects_to_the_checked_address_with_the_host_name_for_tls(
    admin: Admin, database: str, tmp_path: Path, loopback_name: str
) -> None:
    """An allowed on-premise network: the attempt goes to the resolved address, TLS verified against the name
    (the certificate names no address), `Host` and SNI carry the name."""
    settings = settings_for(
        database, SERVICE_ENV="production", WEBHOOK_RETRY_WAITS="0", WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8"
    )
    server_tls, client_tls = certificate(tmp_path, loopback_name)
    with Receiver(tls=server_tls) as receiver:
        user, endpoint_id = new_endpoint(admin, f"http://127.0.0.1:{receiver.port}/hooks")
        url = f"https://{loopback_name}:{receiver.port}/hooks?x=1"
        admin.sql("UPDATE webhook_endpoints SET url = %(u)s WHERE id = %(id)s", {"u": url, "id": endpoint_id})
        delivery_id = emit_test_event(admin, user, endpoint_id)
        attempt(settings, database, delivery_id, verify=client_tls)
    [request] = receiver.requests
    assert request["path"] == "/hooks?x=1"
    assert request["headers"]["Host"] == f"{loopback_name}:{receiver.port}"
    assert receiver.server_names == [loopback_name]
    assert json.loads(request["body"])["event"] == "webhook.test"
    assert delivery(admin, delivery_id)["status"] == "succeeded"


def test_production_verifies_tls_against_the_host_name(admin: Admin, database: str, tmp_path: Path) -> None:
    settings = settings_for(
        database, SERVICE_ENV="production", WEBHOOK_RETRY_WAITS="0", WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8"
    )
    server_tls, client_tls = certificate(tmp_path, "someone-else.example")
    with Receiver(tls=server_tls) as receiver:
        user, endpoint_id = new_endpoint(admin, f"http://127.0.0.1:{receiver.port}/hooks")
        url = f"https://127.0.0.1:{receiver.port}/hooks"
        admin.sql("UPDATE webhook_endpoints SET url = %(u)s WHERE id = %(id)s", {"u": url, "id": endpoint_id})
        delivery_id = emit_test_event(admin, user, endpoint_id)
        attempt(settings, database, delivery_id, verify=client_tls)
    assert receiver.requests == []
    [first] = attempts_of(admin, delivery_id)
    assert first["status_code"] is None and "CERTIFICATE_VERIFY_FAILED" in first["error"]


def test_tls_is_verified_for_each_host_name_even_on_a_shared_address(
    admin: Admin, database: str, tmp_path: Path, loopback_name: str
) -> None:
    """Two endpoints, two names, one address: the certificate names only the first; a keep-alive receiver."""
    settings = settings_for(
        database, SERVICE_ENV="production", WEBHOOK_RETRY_WAITS="0", WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8"
    )
    server_tls, client_tls = certificate(tmp_path, loopback_name)
    with Receiver(tls=server_tls, keep_alive=True) as receiver:
        first_user, first = new_endpoint(admin, f"http://127.0.0.1:{receiver.port}/first")
        second_user, second = new_endpoint(admin, f"http://127.0.0.1:{receiver.port}/second")
        for endpoint_id, url in [
            (first, f"https://{loopback_name}:{receiver.port}/first"),
            (second, f"https://127.0.0.1:{receiver.port}/second"),  # not a name the certificate gives
        ]:
            admin.sql("UPDATE webhook_endpoints SET url = %(u)s WHERE id = %(id)s", {"u": url, "id": endpoint_id})
        first_delivery = emit_test_event(admin, first_user, first)
        second_delivery = emit_test_event(admin, second_user, second)
        attempt(settings, database, first_delivery, second_delivery, verify=client_tls)
    assert delivery(admin, first_delivery)["status"] == "succeeded"
    [refused] = attempts_of(admin, second_delivery)
    assert refused["status_code"] is None and "CERTIFICATE_VERIFY_FAILED" in (refused["error"] or ""), refused
    assert [request["path"] for request in receiver.requests] == ["/first"]
