"""`/` and the interactive API reference at `/docs`, in a real browser: Swagger UI renders the service's own
`/openapi.json`, from files the service serves itself (nothing from a CDN), without a console error."""

from __future__ import annotations

from playwright.sync_api import expect

from rpc.app import load_registry
from tests.chromium import browser_page
from tests.support import LiveServer


def test_the_api_reference_renders_every_procedure_from_here(live: LiveServer) -> None:
    with browser_page() as watched:
        page = watched.page
        page.goto(f"{live.url}/")
        page.get_by_role("link", name="API reference").first.click()
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("Hire API")
        for name in ("jobs.list", "applications.update_status", "billing.subscriptions.create"):
            expect(page.get_by_text(f"/v1/{name}", exact=True).first).to_be_visible()
        operations = page.locator(".opblock-summary-path").count()
        assert operations >= len(list(load_registry())), "every procedure is listed"
    assert watched.console_errors == []
    assert watched.elsewhere == [], "the page loads nothing from another host"
