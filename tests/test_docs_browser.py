"""`/` and the interactive API reference at `/docs`, in a real browser: Swagger UI renders the service's own
`/openapi.json`, from files the service serves itself (nothing from a CDN), without a console error."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

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


def test_try_it_out_starts_from_the_example(live: LiveServer) -> None:
    """A POST's "Try it out" body is the procedure's example, not generated gibberish; a read's required
    parameters are prefilled from its example, its filters are not (a first try of `jobs.list` lists, it does not
    filter); each procedure is listed once, under its resource's tag."""
    with browser_page() as watched:
        page = watched.page
        page.goto(f"{live.url}/docs")
        create = operation(page, "jobs.create")
        create.locator(".opblock-summary").click()
        create.get_by_role("button", name="Try it out").click()
        body = create.locator("textarea.body-param__text")
        expect(body).to_contain_text('"title": "Backend engineer"')
        listing = operation(page, "jobs.list")
        listing.locator(".opblock-summary").click()
        listing.get_by_role("button", name="Try it out").click()
        for name in ("q", "location"):
            expect(listing.locator(f'tr[data-param-name="{name}"] input')).to_have_value("")
        one = operation(page, "jobs.get")
        one.locator(".opblock-summary").click()
        one.get_by_role("button", name="Try it out").click()
        expect(one.locator('tr[data-param-name="id"] input')).to_have_value("0f8b9c52-3a6e-4d1e-9a57-1c2d3e4f5a6b")
        assert page.get_by_text("/v1/jobs.list", exact=True).count() == 1, "one entry: HEAD and POST unlisted"
    assert watched.console_errors == []


def operation(page: Page, name: str) -> Locator:
    """The block of one operation in Swagger UI, found by its path as shown."""
    return page.locator(".opblock").filter(has=page.get_by_text(f"/v1/{name}", exact=True))
