"""Applying from a job page in a real browser (Debian's headless Chromium, driven by Playwright): a candidate
opens the public page of a job, follows "Apply", signs in on the apply page, writes a cover letter, sends it,
lands on their home with the application listed, and withdraws it (after a page that asks); another applies with
a PDF résumé chosen in the file input, which the employer then reads. No console error (the pages carry a CSP
without scripts: the JSON-LD is data, not script), and no request leaves the loopback."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

import httpx
from playwright.sync_api import expect

from tests.chromium import browser_page
from tests.files_support import one_page_pdf
from tests.support import Admin, LiveServer, User, ok


def test_a_candidate_applies_from_the_job_page_and_withdraws(
    live: LiveServer, call: Callable[..., httpx.Response], employer: User, candidate: User, admin: Admin
) -> None:
    job = ok(call("jobs.create", employer, title="Lighthouse keeper", company="Acme", location="Remote (EU)"))
    ok(call("jobs.publish", employer, id=job["id"]))
    with browser_page() as watched:
        page = watched.page
        page.goto(f"{live.url}/jobs/{job['id']}")
        expect(page.get_by_role("heading", level=1)).to_have_text("Lighthouse keeper")
        assert page.locator('script[type="application/ld+json"]').count() == 1
        page.get_by_role("link", name="Apply", exact=True).click()
        signin = page.get_by_role("form", name="Sign in to apply")
        signin.get_by_label("E-mail").fill(candidate.email)
        signin.get_by_label("Password").fill(candidate.password)
        signin.get_by_role("button", name="Sign in and continue").click()
        page.get_by_label("Cover letter (optional)").fill("I keep lights on.\nEvery night.")
        page.get_by_role("button", name="Send my application").click()
        expect(page.get_by_role("status").first).to_contain_text("Your application was sent")
        expect(page.get_by_role("link", name="Lighthouse keeper")).to_be_visible()
        page.get_by_role("link", name="Withdraw…").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Withdraw your application to Lighthouse keeper?")
        page.get_by_role("button", name="Withdraw my application").click()
        expect(page.get_by_role("status").first).to_contain_text("withdrawn")
        assert watched.console_errors == [] and watched.elsewhere == []
    [row] = admin.sql(
        "SELECT status, cover_letter FROM applications WHERE candidate_id = %(c)s", {"c": candidate.user_id}
    )
    assert row == {"status": "withdrawn", "cover_letter": "I keep lights on.\nEvery night."}


def test_a_candidate_applies_with_a_pdf_resume(
    live: LiveServer, call: Callable[..., httpx.Response], client: httpx.Client, employer: User, admin: Admin
) -> None:
    candidate = admin.user("candidate")
    job = ok(call("jobs.create", employer, title="Cartographer", company="Acme", location="Izmir"))
    ok(call("jobs.publish", employer, id=job["id"]))
    document = one_page_pdf("Piri Reis CV")
    with browser_page() as watched:
        page = watched.page
        page.goto(f"{live.url}/jobs/{job['id']}")
        page.get_by_role("link", name="Apply", exact=True).click()
        signin = page.get_by_role("form", name="Sign in to apply")
        signin.get_by_label("E-mail").fill(candidate.email)
        signin.get_by_label("Password").fill(candidate.password)
        signin.get_by_role("button", name="Sign in and continue").click()
        page.get_by_label("Cover letter (optional)").fill("Maps attached.")
        page.get_by_label("Résumé (optional)").set_input_files(
            {"name": "piri-reis.pdf", "mimeType": "application/pdf", "buffer": document}
        )
        page.get_by_role("button", name="Send my application").click()
        expect(page.get_by_role("status").first).to_contain_text("Your application was sent")
        expect(page.get_by_text("résumé: piri-reis.pdf")).to_be_visible()
        assert watched.console_errors == [] and watched.elsewhere == []
    [made] = admin.sql("SELECT id::text AS id FROM applications WHERE candidate_id = %(c)s", {"c": candidate.user_id})
    resume = ok(call("applications.get", employer, id=made["id"]))["resume"]
    assert resume["filename"] == "piri-reis.pdf" and resume["content_type"] == "application/pdf"
    link = urllib.parse.urlsplit(ok(call("files.get", employer, id=resume["id"]))["download_url"])
    assert client.get(link.path, params=dict(urllib.parse.parse_qsl(link.query))).content == document
