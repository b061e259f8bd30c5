"""Debian's headless Chromium, driven by Playwright (never `playwright install`): the one way the tests start a
real browser. Every console error — a Content-Security-Policy violation included — is collected, and every
request that leaves the loopback is recorded, so that a page can be held to loading nothing from elsewhere."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from playwright.sync_api import Browser, ConsoleMessage, Page, Request, sync_playwright

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
T = TypeVar("T")


@dataclass
class Watched:
    """A page, and what it said and asked for while the test drove it."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)  # requests to any host but the loopback


def off_loop(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `call` in another thread: Playwright's sync API keeps an event loop running in this one, and the
    operator's functions (`tests.support.Admin`) start their own."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call, *args, **kwargs).result()


@contextmanager
def launched() -> Iterator[Browser]:
    """Chromium, running until the block ends."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def watched_page(browser: Browser, viewport_width: int = 1280, **options: Any) -> Watched:
    """A new page in a profile of its own (its own cookies), watched for console errors and requests that leave
    the loopback; `options` go to the profile (`base_url`, `accept_downloads`, ...)."""
    context = browser.new_context(viewport={"width": viewport_width, "height": 900}, **options)
    context.set_default_timeout(TIMEOUT_MS)
    watched = Watched(context.new_page())

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            watched.console_errors.append(message.text)

    def on_request(request: Request) -> None:
        host = urllib.parse.urlsplit(request.url).hostname
        if host not in ("127.0.0.1", "localhost", None):
            watched.elsewhere.append(request.url)

    watched.page.on("console", on_console)
    watched.page.on("request", on_request)
    return watched


@contextmanager
def browser_page(viewport_width: int = 1280) -> Iterator[Watched]:
    with launched() as browser:
        yield watched_page(browser, viewport_width)
