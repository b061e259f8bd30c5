"""Teams (docs/people.md): Settings > Team, invitations mailed through a real SMTP server and accepted by
following their link, `bin/admin invite`, and removal, after which every credential of the removed member stops
on its very next request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rpc.ops import admin as ops
from tests.browser import Browser, forms, location, text
from tests.smtp import SmtpServer, mailing_settings
from tests.support import Admin, LiveServer, User, me, refused
from tests.test_oauth import register, tokens
from tests.test_people import login, new_email

JOINER_PASSWORD = "compilers rule 1952"


@pytest.fixture(scope="module")
def settings(database: str, smtp: SmtpServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return mailing_settings(database, smtp, tmp_path_factory.mktemp("data"))


@pytest.fixture
def owner(admin: Admin) -> User:
    return admin.user("employer")


@pytest.fixture
def owner_browser(live: LiveServer, owner: User) -> Iterator[Browser]:
    browser = Browser(live.url)
    assert location(browser.sign_in(owner, "/panel/team")) == "/panel/team"
    yield browser
    browser.close()


@pytest.fixture
def anonymous(live: LiveServer) -> Iterator[Browser]:
    browser = Browser(live.url)
    yield browser
    browser.close()


def invite(browser: Browser, email: str) -> httpx.Response:
    page = browser.get("/panel/team")
    assert page.status_code == 200, page.text
    return browser.submit(page, "/panel/team/invitations", fill={"email": email})


def accept(browser: Browser, link: str, name: str = "Grace Hopper", password: str = JOINER_PASSWORD) -> httpx.Response:
    page = browser.open_link(link)
    assert page.status_code == 200, page.text
    assert page.headers["Referrer-Policy"] == "no-referrer"
    return browser.submit(page, "/web/invite", fill={"display_name": name, "password": password})


def member_ids(admin: Admin, account_id: str) -> set[str]:
    rows = admin.sql("SELECT id::text AS id FROM users WHERE account_id = %(a)s", {"a": account_id})
    return {row["id"] for row in rows}


def test_invite_accept_and_see_the_team(
    owner_browser: Browser, anonymous: Browser, smtp: SmtpServer, admin: Admin, owner: User, client: httpx.Client
) -> None:
    email = new_email()
    assert location(invite(owner_browser, email)) == "/panel/team?notice=invitation_sent"
    team = owner_browser.get("/panel/team")
    assert email in text(team) and "Pending invitations" in text(team)

    mail = smtp.inbox.wait_for(email)
    assert owner.email in mail.text, "says who invites"
    link = mail.link()
    assert link.startswith("/web/invite?token=")
    joined = accept(anonymous, link)
    assert location(joined) == "/panel", "the new member is signed in"
    assert anonymous.get("/panel").status_code == 200

    [member] = admin.sql(
        "SELECT account_id::text AS account_id, role, display_name, email_verified_at IS NOT NULL AS verified "
        "FROM users WHERE email = %(e)s",
        {"e": email},
    )
    assert member == {
        "account_id": owner.account_id,
        "role": "employer",
        "display_name": "Grace Hopper",
        "verified": True,
    }
    assert login(client, email, JOINER_PASSWORD).status_code == 200
    team = text(owner_browser.get("/panel/team"))
    assert "Grace Hopper" in team and "No pending invitations." in team
    [signed_in] = admin.sql("SELECT last_signin_at FROM users WHERE email = %(e)s", {"e": email})
    assert signed_in["last_signin_at"] is not None, "the team page shows the last sign-in"
    used = anonymous.open_link(link)
    assert used.status_code == 400 and "already accepted" in text(used), "an invitation works once"
    joiner = admin.sql("SELECT id::text AS id FROM users WHERE email = %(e)s", {"e": email})[0]["id"]
    audited = admin.sql(
        "SELECT action, actor_id FROM audit_entries WHERE account_id = %(a)s::uuid AND action LIKE 'member.%%' "
        "ORDER BY id",
        {"a": owner.account_id},
    )
    assert {"action": "member.invited", "actor_id": owner.user_id} in audited
    assert {"action": "member.joined", "actor_id": joiner} in audited


def test_resend_replaces_the_link_and_revoke_ends_it(
    owner_browser: Browser, anonymous: Browser, smtp: SmtpServer, admin: Admin, owner: User
) -> None:
    email = new_email()
    invite(owner_browser, email)
    first = smtp.inbox.wait_for(email).link()
    page = owner_browser.get("/panel/team")
    [resend] = [f.action for f in forms(page.text) if f.action.endswith("/resend")]
    assert location(owner_browser.submit(page, resend)) == "/panel/team?notice=invitation_resent"
    second = smtp.inbox.wait_for(email, count=2).link()
    assert anonymous.open_link(first).status_code == 400, "the old link died"
    assert anonymous.open_link(second).status_code == 200
    page = owner_browser.get("/panel/team")
    assert (
        location(owner_browser.submit(page, resend.replace("/resend", "/revoke")))
        == "/panel/team?notice=invitation_revoked"
    )
    assert anonymous.open_link(second).status_code == 400
    assert member_ids(admin, owner.account_id) == {owner.user_id}


def audited(admin: Admin, action: str, account_id: str) -> list[dict[str, Any]]:
    return admin.sql(
        "SELECT actor_id, target_id, client_address, user_agent FROM audit_entries "
        "WHERE action = %(action)s AND account_id = %(a)s::uuid ORDER BY id",
        {"action": action, "a": account_id},
    )


def test_the_panel_answers_alike_whether_or_not_an_address_has_a_user(
    owner_browser: Browser, anonymous: Browser, smtp: SmtpServer, admin: Admin, owner: User, candidate: User
) -> None:
    """Settings > Team must not tell which addresses have accounts: the invitation page tells the invitee."""
    known, unknown = invite(owner_browser, candidate.email), invite(owner_browser, new_email())
    assert (known.status_code, location(known)) == (unknown.status_code, location(unknown))
    assert location(known) == "/panel/team?notice=invitation_sent"
    page = anonymous.open_link(smtp.inbox.wait_for(candidate.email).link())
    assert page.status_code == 409 and "already has an account" in text(page)
    with pytest.raises(ops.AdminError, match="already has an account"):
        admin.run(ops.invite, admin.settings, inviter_email=owner.email, invitee=candidate.email)
    # an invitation sent before the address got an account: the page says why, and nobody joins
    email = new_email()
    invite(owner_browser, email)
    link = smtp.inbox.wait_for(email).link()
    admin.user("candidate", email=email)
    page = anonymous.open_link(link)
    assert page.status_code == 409 and "already has an account" in text(page)
    assert member_ids(admin, owner.account_id) == {owner.user_id}


def test_removing_a_member_revokes_the_invitations_they_sent(
    live: LiveServer, owner_browser: Browser, anonymous: Browser, smtp: SmtpServer, admin: Admin, owner: User
) -> None:
    """A removed member may not come back through an invitation they sent to an address of their own."""
    member = admin.user("employer", account_id=owner.account_id)
    member_browser = Browser(live.url)
    assert location(member_browser.sign_in(member, "/panel/team")) == "/panel/team"
    own_address, colleague = new_email(), new_email()
    invite(member_browser, own_address)
    invite(owner_browser, colleague)
    link = smtp.inbox.wait_for(own_address).link()
    confirm = owner_browser.get(f"/panel/team/members/{member.user_id}/remove")
    assert location(owner_browser.submit(confirm, f"/panel/team/members/{member.user_id}/remove"))
    page = anonymous.open_link(link)
    assert page.status_code == 400 and "revoked" in text(page)
    assert member_ids(admin, owner.account_id) == {owner.user_id}
    team = text(owner_browser.get("/panel/team"))
    assert own_address not in team and colleague in team, "only the removed member's invitations end"
    member_browser.close()


def test_member_actions_are_audited_with_their_origin(
    owner_browser: Browser, anonymous: Browser, smtp: SmtpServer, admin: Admin, owner: User
) -> None:
    email = new_email()
    invite(owner_browser, email)
    assert location(accept(anonymous, smtp.inbox.wait_for(email).link())) == "/panel"
    [joiner] = admin.sql("SELECT id::text AS id FROM users WHERE email = %(e)s", {"e": email})
    confirm = owner_browser.get(f"/panel/team/members/{joiner['id']}/remove")
    assert location(owner_browser.submit(confirm, f"/panel/team/members/{joiner['id']}/remove"))
    for action in ("member.invited", "member.joined", "member.removed"):
        [entry] = audited(admin, action, owner.account_id)
        assert entry["client_address"] == "127.0.0.1", action
        assert entry["user_agent"] and entry["user_agent"].startswith("python-httpx"), action


def test_an_invitation_subject_carries_no_user_text(
    owner_browser: Browser, smtp: SmtpServer, admin: Admin, owner: User
) -> None:
    admin.sql("UPDATE accounts SET name = 'Urgent: verify your bank account' WHERE id = %(a)s", {"a": owner.account_id})
    email = new_email()
    invite(owner_browser, email)
    mail = smtp.inbox.wait_for(email)
    assert mail.message["Subject"] == "You are invited to join a team on Hire"
    assert "Urgent: verify your bank account" in mail.text, "the name is in the body, where it is plainly quoted"


def test_admin_invite_prints_the_link(admin: Admin, owner: User, smtp: SmtpServer, anonymous: Browser) -> None:
    email = new_email()
    printed = admin.run(ops.invite, admin.settings, inviter_email=owner.email, invitee=email)
    assert set(printed) == {"invitation_id", "link"}
    assert printed["link"].endswith(smtp.inbox.wait_for(email).link())
    assert location(accept(anonymous, printed["link"][printed["link"].index("/web/") :])) == "/panel"
    with pytest.raises(ops.AdminError):
        admin.run(ops.invite, admin.settings, inviter_email=admin.user("candidate").email, invitee=new_email())


def test_removal_stops_every_credential_at_once(
    live: LiveServer, owner_browser: Browser, admin: Admin, owner: User, client: httpx.Client
) -> None:
    member = admin.user("employer", account_id=owner.account_id)
    session = login(client, member.email, member.password).json()
    key = admin.api_key(member, scopes="read:profile")["key"]
    app = register(admin, admin.user("employer"), public=True)
    member_browser = Browser(live.url)
    assert location(member_browser.sign_in(member))
    grant = tokens(client, member_browser, app, "read:profile")
    for credential in (session["access_token"], member.token, key, grant["access_token"]):
        assert me(client, credential).status_code == 200

    confirm = owner_browser.get(f"/panel/team/members/{member.user_id}/remove")
    assert confirm.status_code == 200
    assert location(owner_browser.submit(confirm, f"/panel/team/members/{member.user_id}/remove")) == (
        "/panel/team?notice=member_removed"
    )

    refused(me(client, session["access_token"]), 401, "invalid_token")
    refused(me(client, member.token), 401, "invalid_token")
    refused(me(client, key), 401, "invalid_api_key")
    refused(me(client, grant["access_token"]), 401, "invalid_token")
    refused(client.post("/auth/refresh", json={"refresh_token": session["refresh_token"]}), 401, "invalid_token")
    assert location(member_browser.get("/panel")).startswith("/web/signin")
    assert member.user_id not in member_ids(admin, owner.account_id)
    assert admin.sql(
        "SELECT actor_id, target_id FROM audit_entries WHERE action = 'member.removed' AND account_id = %(a)s::uuid",
        {"a": owner.account_id},
    ) == [{"actor_id": owner.user_id, "target_id": member.user_id}]
    # they keep their person, alone in an account of their own, as a candidate
    again = login(client, member.email, member.password).json()
    profile = me(client, again["access_token"]).json()["result"]
    assert profile["role"] == "candidate" and profile["account_id"] != owner.account_id
    member_browser.close()


def test_no_removing_oneself_or_others_accounts(owner_browser: Browser, owner: User, admin: Admin) -> None:
    own = owner_browser.get(f"/panel/team/members/{owner.user_id}/remove")
    answer = owner_browser.submit(own, f"/panel/team/members/{owner.user_id}/remove")
    assert answer.status_code == 409 and "cannot remove yourself" in text(answer)
    stranger = admin.user("employer")
    assert owner_browser.get(f"/panel/team/members/{stranger.user_id}/remove").status_code == 404
    assert owner_browser.get("/panel/team/members/not-an-id/remove").status_code == 404


def test_candidates_have_no_team(live: LiveServer, candidate: User) -> None:
    browser = Browser(live.url)
    browser.sign_in(candidate)
    assert browser.get("/panel/team").status_code == 404
    page = browser.get("/panel")
    assert 'href="/panel/team"' not in page.text
    browser.close()


def test_profile_change_password_and_sign_out_everywhere(live: LiveServer, admin: Admin, client: httpx.Client) -> None:
    user = admin.user("employer")
    browser = Browser(live.url)
    browser.sign_in(user, "/panel/profile")
    page = browser.get("/panel/profile")
    assert page.status_code == 200 and user.email in text(page)
    saved = browser.submit(page, "/panel/profile", fill={"display_name": "Ada L.", "headline": "Hiring engineers"})
    assert location(saved) == "/panel/profile?notice=profile_saved"
    assert me(client, user.token).json()["result"]["headline"] == "Hiring engineers"

    page = browser.get("/panel/profile")
    wrong = browser.submit(page, "/panel/profile/password", fill={"current_password": "nope", "new_password": "x" * 12})
    assert wrong.status_code == 400 and "current password is wrong" in text(wrong)
    assert me(client, user.token).status_code == 200, "a refused change ends nothing"
    changed = browser.submit(
        page, "/panel/profile/password", fill={"current_password": user.password, "new_password": "a changed password"}
    )
    assert location(changed).startswith("/web/signin")
    refused(me(client, user.token), 401, "invalid_token")
    assert location(browser.get("/panel/profile")).startswith("/web/signin")
    assert login(client, user.email, "a changed password").status_code == 200

    fresh = login(client, user.email, "a changed password").json()["access_token"]
    browser.sign_in(User(user.user_id, user.account_id, user.email, "a changed password", "employer", fresh))
    page = browser.get("/panel/profile")
    assert browser.submit(page, "/panel/profile/sign-out-everywhere", drop=["csrf_token"]).status_code == 403
    assert location(browser.submit(page, "/panel/profile/sign-out-everywhere")).startswith("/web/signin")
    refused(me(client, fresh), 401, "invalid_token")
    for action in ("password.changed", "sessions.revoked"):
        [entry] = audited(admin, action, user.account_id)
        assert (entry["actor_id"], entry["target_id"]) == (user.user_id, user.user_id), action
        assert entry["client_address"] == "127.0.0.1" and entry["user_agent"], action
    browser.close()
