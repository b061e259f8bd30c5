"""The newcomer's way in, in a real browser (Debian's headless Chromium, driven by Playwright): sign up as an
employer, find the verification mail where a deployment without SMTP keeps it (`$DATA_DIR/mail/*.eml`), confirm,
sign in, invite a colleague from Settings > Team, and the colleague — in a browser profile of their own — follows
the invitation's link and joins. No console error, and no request leaves the loopback."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.chromium import CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS
from tests.support import LiveServer, eventually, settings_for

LINK = re.compile(r"https?://\S+(/web/[a-z]+\?token=[A-Za-z0-9_-]+)")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def settings(database: str, data_dir: Path) -> Any:
    """No SMTP_URL: mail is written as .eml files, the embedded default."""
    return settings_for(database, DATA_DIR=str(data_dir))


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (Debian's package; .ci/run installs it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Profile:
    """One person's browser profile, recording console errors and requests that leave the loopback."""

    def __init__(self, chromium: Browser, live: LiveServer) -> None:
        self.context: BrowserContext = chromium.new_context(base_url=live.url)
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page: Page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("console", lambda m: self.problems.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda error: self.problems.append(str(error)))
        self.page.on(
            "request", lambda r: None if "//127.0.0.1:" in r.url else self.problems.append(f"elsewhere: {r.url}")
        )


def mail_to(data_dir: Path, address: str, subject: str, timeout: float = 30) -> EmailMessage:
    """The .eml file the worker wrote for `address` with `subject`."""

    def written() -> EmailMessage | None:
        for path in sorted((data_dir / "mail").glob("*.eml")):
            message = message_from_bytes(path.read_bytes(), policy=default)
            assert isinstance(message, EmailMessage)
            if message["To"] == address and message["Subject"].startswith(subject):
                return message
        return None

    return eventually(written, f"the mail '{subject}' to {address}", timeout)


def link_in(message: EmailMessage) -> str:
    body = message.get_body(("plain",))
    assert body is not None
    found = LINK.search(str(body.get_content()))  # type: ignore[attr-defined]
    assert found is not None
    return found.group(1)


def test_a_newcomer_signs_up_invites_a_colleague_who_joins(chromium: Browser, live: LiveServer, data_dir: Path) -> None:
    founder, colleague = Profile(chromium, live), Profile(chromium, live)
    email = f"founder-{uuid.uuid4().hex[:8]}@startup.example"
    colleague_email = f"colleague-{uuid.uuid4().hex[:8]}@startup.example"
    password = "a founder's long password"
    page = founder.page

    page.goto("/web/signin")
    page.get_by_role("link", name="Create an account").click()
    page.get_by_label("hire (a new hiring account)").check()
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_label("Your name (optional)").fill("Fran Founder")
    page.get_by_label("Company (optional, for hiring)").fill("Startup Hiring Co")
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Check your e-mail")).to_be_visible()

    page.goto(link_in(mail_to(data_dir, email, "Confirm your e-mail address")))
    expect(page.get_by_role("heading", name="E-mail confirmed")).to_be_visible()
    page.get_by_role("link", name="Sign in").click()
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Panel").click()
    page.get_by_role("link", name="Team").click()
    expect(page.get_by_role("heading", name="Team", exact=True)).to_be_visible()
    page.get_by_label("E-mail").fill(colleague_email)
    page.get_by_role("button", name="Send invitation").click()
    expect(page.get_by_role("status").first).to_contain_text("The invitation is on its way")

    invitation = mail_to(data_dir, colleague_email, "You are invited to join a team on Hire")
    colleague.page.goto(link_in(invitation))
    expect(colleague.page.get_by_role("heading", name="Join Startup Hiring Co")).to_be_visible()
    colleague.page.get_by_label("Your name").fill("Cole League")
    colleague.page.get_by_label("Password").fill("the colleague's password")
    colleague.page.get_by_role("button", name="Join the team").click()
    expect(colleague.page).to_have_url(re.compile(r"/panel$"))
    expect(colleague.page.get_by_text(colleague_email).first).to_be_visible()

    page.reload()
    expect(page.get_by_role("row", name=re.compile("Cole League"))).to_be_visible()
    expect(page.get_by_text("No pending invitations.")).to_be_visible()
    for person in (founder, colleague):
        person.context.close()
        assert not [p for p in person.problems if "favicon" not in p], person.problems
