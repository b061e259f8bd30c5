"""The public pages' settings: `JOB_VALID_DAYS` (how long after publishing a `JobPosting` says a job is open)
and `SITEMAP_URLS_PER_FILE` (sitemaps.org allows at most 50,000)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from rpc.settings import Settings, SettingsError

MAX_URLS_PER_FILE = 50_000


class _Job(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    valid_days: int = 60


class _Sitemap(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    urls_per_file: int = MAX_URLS_PER_FILE


@dataclass(frozen=True, slots=True)
class PublicSettings:
    public_url: str
    valid_days: int
    urls_per_file: int

    @classmethod
    def of(cls, settings: Settings) -> PublicSettings:
        """Read and checked once, at start: a value out of range stops the service with a SettingsError."""
        job = settings.section("JOB_", _Job)
        sitemap = settings.section("SITEMAP_", _Sitemap)
        if not 1 <= job.valid_days <= 366:
            raise SettingsError("JOB_VALID_DAYS must be between 1 and 366")
        if not 1 <= sitemap.urls_per_file <= MAX_URLS_PER_FILE:
            raise SettingsError(f"SITEMAP_URLS_PER_FILE must be between 1 and {MAX_URLS_PER_FILE}")
        return cls(settings.public_url.rstrip("/"), job.valid_days, sitemap.urls_per_file)

    def job_url(self, job_id: str) -> str:
        return f"{self.public_url}/jobs/{job_id}"
