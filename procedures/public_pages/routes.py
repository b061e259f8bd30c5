"""Every route of the public pages, bound to their settings (read once, at assembly)."""

from __future__ import annotations

import functools

from starlette.routing import BaseRoute, Route

from procedures.public_pages import apply, feeds, home, home_actions, home_resume, job_page
from procedures.public_pages.settings import PublicSettings
from rpc.settings import Settings


def routes(settings: Settings) -> list[BaseRoute]:
    public = PublicSettings.of(settings)
    return [
        Route("/jobs", job_page.search_page, methods=["GET"]),
        Route("/jobs/{id}", functools.partial(job_page.job_page, settings=public), methods=["GET"]),
        Route("/jobs/{id}/apply", apply.apply_page, methods=["GET"]),
        Route("/jobs/{id}/apply", apply.apply, methods=["POST"]),
        Route("/me", home.home, methods=["GET"]),
        Route("/me/applications/{id}/withdraw", home_actions.confirm_withdrawal, methods=["GET"]),
        Route("/me/applications/{id}/withdraw", home_actions.withdraw_application, methods=["POST"]),
        Route("/me/offers/{id}/respond", home_actions.respond, methods=["POST"]),
        Route("/me/interviews/{id}.ics", home_actions.interview_file, methods=["GET"]),
        Route("/me/resume", home_resume.upload_resume, methods=["POST"]),
        Route("/sitemap.xml", functools.partial(feeds.sitemap, settings=public), methods=["GET"]),
        Route("/sitemap-{number:int}.xml", functools.partial(feeds.sitemap_file, settings=public), methods=["GET"]),
        Route("/feeds/jobs.xml", functools.partial(feeds.jobs_feed, settings=public), methods=["GET"]),
    ]
