"""One frozen Settings read from the environment once; nothing else reads os.environ."""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, TypeVar

import msgspec

# The checkout the service runs from: schema.sql and migrations/ are there, and the default data directory, so
# that every command finds the same embedded database whatever directory it is started from.
PROJECT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = PROJECT / ".data"

# Seconds before each attempt to send an e-mail: retried for two days (docs/people.md: at least one).
MAIL_RETRY_WAITS = (0, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 43200, 86400)
Environment = Literal["development", "test", "production"]
# How the service reaches PostgreSQL: directly or through a pooler that keeps a client's server session
# ("session"), or through one that hands a server session to another client after each transaction.
Pooler = Literal["session", "transaction"]
S = TypeVar("S", bound=msgspec.Struct)
_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


class SettingsError(ValueError):
    """A setting has a value the service cannot run with."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """The service's configuration; see the README's settings table for each variable."""

    database_url: str | None = None
    # Many hosts (docs/scaling.md): streaming replicas of DATABASE_URL that may answer reads, how long a read waits
    # for one to replay its position (ms), and the replay lag beyond which a replica is left out (seconds).
    database_replica_urls: tuple[str, ...] = ()
    replica_wait_ms: float = 20.0
    replica_max_lag_seconds: float = 10.0
    database_pooler: Pooler = "session"
    # A connection that bypasses the pooler, for what needs a session of its own (the migrations' lock, LISTEN).
    database_direct_url: str | None = None
    service_env: Environment = "development"
    public_url: str = "http://127.0.0.1:8000"
    secret_key: str
    data_dir: str = str(DEFAULT_DATA_DIR)
    rate_limit_storage: str = "memory://"
    webhook_retry_waits: tuple[float, ...] = (0, 10, 60, 600, 3600)
    webhook_timeout: float = 10.0
    webhook_allowed_networks: tuple[str, ...] = ()
    webhook_per_endpoint: int = 4
    webhook_disable_after_days: float = 5.0  # every attempt failed for this long: the endpoint is disabled
    worker_heartbeat: float = 10.0
    auth_jwks_url: str | None = None
    auth_issuer: str | None = None
    auth_audience: str | None = None
    auth_jwt_secret: str | None = None
    auth_algorithms: tuple[str, ...] = ()
    auth_role_claim: str | None = None
    forwarded_allow_ips: str = "127.0.0.1"
    metrics_allow: tuple[str, ...] = ("127.0.0.0/8", "::1/128")
    cors_allowed_origins: tuple[str, ...] = ()
    signin_limits_per_email: str = "10/minute"
    signin_limits_per_address: str = "100/minute"
    oauth_token_limit_per_client: str = "300/minute"  # noqa: S105 - a rate, not a secret
    payment_notification_limit_per_address: str = "600/minute"
    panel_write_limit_per_user: str = "60/minute"
    password_hash_concurrency: int = 4
    smtp_url: str | None = None
    mail_from: str | None = None
    ssl_cert_file: str | None = None
    mail_retry_waits: tuple[float, ...] = MAIL_RETRY_WAITS
    # How long the links of docs/people.md live, in seconds (tests shrink them instead of sleeping).
    verify_link_lifetime: float = 24 * 3600
    reset_link_lifetime: float = 3600
    invite_link_lifetime: float = 7 * 24 * 3600
    # How often each process commits the changes it has read into its search index on disk (fractions allowed).
    search_flush_seconds: float = 1.0
    # Files (docs/files.md): the largest upload, where the bytes live (empty: DATA_DIR/files/; or
    # s3://bucket/prefix with the S3_* settings), and how long a download link works, in seconds.
    files_max_bytes: int = 10 * 1024 * 1024
    files_store: str = ""
    files_link_lifetime: float = 600
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None
    db_pool_min: int = 2
    db_pool_max: int = 10
    db_pool_timeout: float = 5.0
    # Every variable as read, for the sections of settings the business declares itself (`section`).
    environment: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        """Names only what is safe to log: never the secret key or the environment's variables."""
        return f"Settings(service_env={self.service_env!r}, public_url={self.public_url!r})"

    @property
    def pooled_by_transaction(self) -> bool:
        """Whether a server session may serve another client after each transaction: nothing may outlive one."""
        return self.database_pooler == "transaction"

    @property
    def production(self) -> bool:
        return self.service_env == "production"

    @property
    def allowed_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """Private networks a production deployment may still deliver webhooks to (on-premise receivers)."""
        return tuple(ipaddress.ip_network(cidr) for cidr in self.webhook_allowed_networks)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    @property
    def search_path(self) -> Path:
        """Where this host's search indexes live (one slot per running process)."""
        return self.data_path / "search"

    @property
    def files_path(self) -> Path:
        """Where the embedded file store keeps the bytes of uploaded files."""
        return self.data_path / "files"

    @property
    def issuer(self) -> str:
        """The `iss` of the built-in identity provider's tokens."""
        return f"{self.public_url.rstrip('/')}/auth"

    def section(self, prefix: str, shape: type[S]) -> S:
        """Settings a business module declares as a Struct of its own: field `name` is the variable `prefix` +
        `NAME` (an empty value counts as unset). A value that does not fit is a SettingsError."""
        values = {
            name.removeprefix(prefix).lower(): value
            for name, value in self.environment
            if name.startswith(prefix) and value
        }
        try:
            return msgspec.convert(values, shape, strict=False)
        except msgspec.ValidationError as exc:
            raise SettingsError(f"invalid {prefix}* setting: {exc}") from exc

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build the settings from `environ` (default: the process environment)."""
        env = os.environ if environ is None else environ
        data_dir = Path(env.get("DATA_DIR") or DEFAULT_DATA_DIR)
        jwt_secret = env.get("AUTH_JWT_SECRET") or None
        default_algorithms = "HS256" if jwt_secret else "RS256,ES256"
        values = {
            "database_url": env.get("DATABASE_URL") or None,
            "database_replica_urls": _names(env.get("DATABASE_REPLICA_URLS", "")),
            "replica_wait_ms": env.get("REPLICA_WAIT_MS", "20"),
            "replica_max_lag_seconds": env.get("REPLICA_MAX_LAG_SECONDS", "10"),
            "database_pooler": env.get("DATABASE_POOLER") or "session",
            "database_direct_url": env.get("DATABASE_DIRECT_URL") or None,
            "service_env": env.get("SERVICE_ENV", "development"),
            "public_url": env.get("PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/"),
            "secret_key": env.get("SERVICE_SECRET_KEY") or _key_file_secret(data_dir),
            "data_dir": str(data_dir),
            "rate_limit_storage": env.get("RATE_LIMIT_STORAGE", "memory://"),
            "webhook_retry_waits": _floats(env.get("WEBHOOK_RETRY_WAITS", "0,10,60,600,3600")),
            "webhook_timeout": env.get("WEBHOOK_TIMEOUT", "10"),
            "webhook_allowed_networks": _names(env.get("WEBHOOK_ALLOWED_NETWORKS", "")),
            "webhook_per_endpoint": env.get("WEBHOOK_PER_ENDPOINT", "4"),
            "webhook_disable_after_days": env.get("WEBHOOK_DISABLE_AFTER_DAYS", "5"),
            "worker_heartbeat": env.get("WORKER_HEARTBEAT", "10"),
            "auth_jwks_url": env.get("AUTH_JWKS_URL") or None,
            "auth_issuer": env.get("AUTH_ISSUER") or None,
            "auth_audience": env.get("AUTH_AUDIENCE") or None,
            "auth_jwt_secret": jwt_secret,
            "auth_algorithms": _names(env.get("AUTH_ALGORITHMS") or default_algorithms),
            "auth_role_claim": env.get("AUTH_ROLE_CLAIM") or None,
            "forwarded_allow_ips": env.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
            "metrics_allow": _names(env.get("METRICS_ALLOW", "127.0.0.0/8,::1/128")),
            "cors_allowed_origins": _names(env.get("CORS_ALLOWED_ORIGINS", "")),
            "signin_limits_per_email": env.get("SIGNIN_LIMIT_PER_EMAIL", "10/minute"),
            "signin_limits_per_address": env.get("SIGNIN_LIMIT_PER_ADDRESS", "100/minute"),
            "oauth_token_limit_per_client": env.get("OAUTH_TOKEN_LIMIT_PER_CLIENT", "300/minute"),
            "payment_notification_limit_per_address": env.get("PAYMENT_NOTIFICATION_LIMIT_PER_ADDRESS", "600/minute"),
            "panel_write_limit_per_user": env.get("PANEL_WRITE_LIMIT_PER_USER", "60/minute"),
            "password_hash_concurrency": env.get("PASSWORD_HASH_CONCURRENCY", "4"),
            "smtp_url": env.get("SMTP_URL") or None,
            "mail_from": env.get("MAIL_FROM") or None,
            "ssl_cert_file": env.get("SSL_CERT_FILE") or None,
            "mail_retry_waits": _floats(env.get("MAIL_RETRY_WAITS") or ",".join(map(str, MAIL_RETRY_WAITS))),
            "verify_link_lifetime": env.get("VERIFY_LINK_LIFETIME", str(24 * 3600)),
            "reset_link_lifetime": env.get("RESET_LINK_LIFETIME", "3600"),
            "invite_link_lifetime": env.get("INVITE_LINK_LIFETIME", str(7 * 24 * 3600)),
            "search_flush_seconds": env.get("SEARCH_FLUSH_SECONDS", "1"),
            "files_max_bytes": env.get("FILES_MAX_BYTES", str(10 * 1024 * 1024)),
            "files_store": env.get("FILES_STORE", ""),
            "files_link_lifetime": env.get("FILES_LINK_LIFETIME", "600"),
            "s3_endpoint_url": env.get("S3_ENDPOINT_URL") or None,
            "s3_region": env.get("S3_REGION") or None,
            "s3_access_key_id": env.get("S3_ACCESS_KEY_ID") or None,
            "s3_secret_access_key": env.get("S3_SECRET_ACCESS_KEY") or None,
            "db_pool_min": env.get("DB_POOL_MIN", "2"),
            "db_pool_max": env.get("DB_POOL_MAX", "10"),
            "db_pool_timeout": env.get("DB_POOL_TIMEOUT", "5"),
            "environment": tuple(sorted(env.items())),
        }
        if values["database_pooler"] not in ("session", "transaction"):
            raise SettingsError(
                "DATABASE_POOLER is transaction (a pooler such as PgBouncer in transaction mode) or session (the "
                "default: a direct connection, or a pooler that keeps a client's session); statement pooling cannot "
                "run the service's transactions"
            )
        try:
            settings = msgspec.convert(values, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise SettingsError(f"invalid setting: {exc}") from exc
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse combinations that would run insecurely or not at all."""
        if "none" in {a.lower() for a in self.auth_algorithms}:
            raise SettingsError("AUTH_ALGORITHMS may not contain 'none'")
        if self.auth_jwks_url and self.auth_jwt_secret:
            raise SettingsError("set AUTH_JWKS_URL or AUTH_JWT_SECRET, not both")
        if (self.auth_jwks_url or self.auth_jwt_secret) and not self.auth_issuer:
            raise SettingsError("an external identity provider needs AUTH_ISSUER")
        if (self.auth_jwks_url or self.auth_jwt_secret) and not self.auth_audience and self.production:
            raise SettingsError(
                "an external identity provider needs AUTH_AUDIENCE in production: without it, tokens the provider "
                "minted for any other API of the same tenant would be accepted (RFC 8725 section 3.9)"
            )
        symmetric = {a for a in self.auth_algorithms if a.upper().startswith("HS")}
        if self.auth_jwks_url and symmetric:
            raise SettingsError("a JWKS provider may not use HS algorithms (key confusion)")
        if self.auth_jwt_secret and set(self.auth_algorithms) - symmetric:
            raise SettingsError("a shared-secret provider accepts HS algorithms only")
        if not self.webhook_retry_waits or any(w < 0 for w in self.webhook_retry_waits):
            raise SettingsError("WEBHOOK_RETRY_WAITS needs at least one non-negative number")
        if self.webhook_disable_after_days <= 0:
            raise SettingsError("WEBHOOK_DISABLE_AFTER_DAYS must be positive (fractions of a day allowed)")
        if self.webhook_timeout <= 0 or self.worker_heartbeat <= 0 or self.webhook_per_endpoint < 1:
            raise SettingsError("WEBHOOK_TIMEOUT, WORKER_HEARTBEAT and WEBHOOK_PER_ENDPOINT must be positive")
        if self.production and not self.smtp_url:
            raise SettingsError(
                "a production deployment needs SMTP_URL: without it, mail (with its live sign-up, reset and "
                "invitation links) is only written to files under DATA_DIR/mail/ and never reaches anyone"
            )
        if self.smtp_url and urllib.parse.urlsplit(self.smtp_url).scheme not in ("smtp", "smtps"):
            raise SettingsError("SMTP_URL must start with smtp:// (STARTTLS when offered) or smtps:// (implicit TLS)")
        if not self.mail_retry_waits or any(w < 0 for w in self.mail_retry_waits):
            raise SettingsError("MAIL_RETRY_WAITS needs at least one non-negative number")
        if self.password_hash_concurrency < 1:
            raise SettingsError("PASSWORD_HASH_CONCURRENCY must be at least 1")
        try:
            self.allowed_networks  # noqa: B018 - parsed here so that a typo stops the start
        except ValueError as exc:
            raise SettingsError(f"WEBHOOK_ALLOWED_NETWORKS: {exc}") from exc
        for origin in self.cors_allowed_origins:
            if not _ORIGIN.match(origin):
                raise SettingsError(
                    f"CORS_ALLOWED_ORIGINS: {origin!r} is not an origin; write scheme://host[:port], e.g. "
                    "https://app.example.com (no path, no wildcard)"
                )
        if self.files_max_bytes < 1 or self.files_link_lifetime <= 0:
            raise SettingsError("FILES_MAX_BYTES and FILES_LINK_LIFETIME must be positive")
        if self.files_store and not re.match(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", self.files_store):
            raise SettingsError(
                "FILES_STORE is empty (the bytes live under DATA_DIR/files/) or s3://bucket/prefix, e.g. "
                "s3://hire-files/resumes"
            )
        self._validate_databases()
        if len(self.secret_key) < 32:
            raise SettingsError("SERVICE_SECRET_KEY must be at least 32 characters")
        if self.production and urllib.parse.urlsplit(self.public_url).scheme != "https":
            raise SettingsError(
                "a production deployment needs an https:// PUBLIC_URL: the links it mails (sign-up, reset, "
                "invitations, the job alerts' one-click unsubscribe), its job pages and its OAuth issuer are made "
                "from it"
            )

    def _validate_databases(self) -> None:
        if self.database_replica_urls and not self.database_url:
            raise SettingsError("DATABASE_REPLICA_URLS needs DATABASE_URL: replicas are replicas of a primary")
        if len(set(self.database_replica_urls)) != len(self.database_replica_urls):
            raise SettingsError("DATABASE_REPLICA_URLS names a replica twice")
        if self.database_url in self.database_replica_urls:
            raise SettingsError("DATABASE_REPLICA_URLS names DATABASE_URL: list the primary's replicas, not itself")
        if not 0 <= self.replica_wait_ms <= 10_000:
            raise SettingsError("REPLICA_WAIT_MS is between 0 and 10000 milliseconds")
        if self.replica_max_lag_seconds <= 0:
            raise SettingsError("REPLICA_MAX_LAG_SECONDS must be positive (fractions allowed)")


def _floats(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise SettingsError(f"not a list of numbers: {text!r}") from exc


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _key_file_secret(data_dir: Path) -> str:
    """The at-rest key of a deployment without SERVICE_SECRET_KEY: generated once, kept beside the data."""
    path = data_dir / "secret_key"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".secret_key.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
        try:
            os.link(draft, path)  # atomic: a concurrent starter either wins or reads the winner's key
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()
