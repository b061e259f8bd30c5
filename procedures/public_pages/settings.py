"""The public pages' settings: `JOB_VALID_DAYS` (how long after publishing a `JobPosting` says a job is open),
`SITEMAP_URLS_PER_FILE` (sitemaps.org allows at most 50,000) and `FEED_RENDER_WAIT` (the seconds a reader of the
feed or a sitemap waits for the current version's rendition before it is served the newest one there is)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from rpc.settings import Settings, SettingsError

MAX_URLS_PER_FILE = 50_000
MAX_RENDER_WAIT = 60.0


class _Job(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    valid_days: int = 60


class _Sitemap(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    urls_per_file: int = MAX_URLS_PER_FILE


class _Feed(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    render_wait: float = 2.0


@dataclass(frozen=True, slots=True)
class PublicSettings:
    public_url: str
    valid_days: int
    urls_per_file: int
    render_wait: float

    @classmethod
    def of(cls, settings: Settings) -> PublicSettings:
        """Read and checked once, at start: a value out of range stops the service with a SettingsError."""
        job = settings.section("JOB_", _Job)
        sitemap = settings.section("SITEMAP_", _Sitemap)
        feed = settings.section("FEED_", _Feed)
        if not 1 <= job.valid_days <= 366:
            raise SettingsError("JOB_VALID_DAYS must be between 1 and 366")
        if not 1 <= sitemap.urls_per_file <= MAX_URLS_PER_FILE:
            raise SettingsError(f"SITEMAP_URLS_PER_FILE must be between 1 and {MAX_URLS_PER_FILE}")
        if not 0 <= feed.render_wait <= MAX_RENDER_WAIT:
            raise SettingsError(f"FEED_RENDER_WAIT must be between 0 and {MAX_RENDER_WAIT} seconds")
        return cls(settings.public_url.rstrip("/"), job.valid_days, sitemap.urls_per_file, feed.render_wait)

    def job_url(self, job_id: str) -> str:
        return f"{self.public_url}/jobs/{job_id}"
