"""Debian's headless Chromium, driven by Playwright (never `playwright install`): the one way the tests start a
real browser. Every console error — a Content-Security-Policy violation included — is collected, and every
request that leaves the loopback is recorded, so that a page can be held to loading nothing from elsewhere."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from playwright.sync_api import ConsoleMessage, Page, Request, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
TIMEOUT_MS = 20_000


@dataclass
class Watched:
    """A page, and what it said and asked for while the test drove it."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)  # requests to any host but the loopback


@contextmanager
def browser_page(viewport_width: int = 1280) -> Iterator[Watched]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": viewport_width, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            watched = Watched(page)

            def on_console(message: ConsoleMessage) -> None:
                if message.type == "error":
                    watched.console_errors.append(message.text)

            def on_request(request: Request) -> None:
                host = urllib.parse.urlsplit(request.url).hostname
                if host not in ("127.0.0.1", "localhost", None):
                    watched.elsewhere.append(request.url)

            page.on("console", on_console)
            page.on("request", on_request)
            yield watched
        finally:
            browser.close()
