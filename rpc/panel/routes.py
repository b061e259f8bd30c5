"""Every address of the panel. State changes are POSTs; each GET that leads to a destructive POST (revoke a
key, delete an endpoint or an application) is a confirmation page."""

from __future__ import annotations

from starlette.routing import Route

from rpc.panel import api_keys, audit_log, deliveries, oauth_apps, overview, profile, team, webhooks
from rpc.panel.handler import unknown_page
from rpc.panel.pages import static

GET, POST = ["GET"], ["POST"]

routes = [
    Route("/panel", overview.overview_page, methods=GET),
    # Settings > API keys
    Route("/panel/api-keys", api_keys.keys_page, methods=GET),
    Route("/panel/api-keys", api_keys.create_key, methods=POST),
    Route("/panel/api-keys/{id}/revoke", api_keys.confirm_revoke, methods=GET),
    Route("/panel/api-keys/{id}/revoke", api_keys.revoke_key, methods=POST),
    # Settings > Webhooks
    Route("/panel/webhooks", webhooks.endpoints_page, methods=GET),
    Route("/panel/webhooks", webhooks.create_endpoint, methods=POST),
    Route("/panel/webhooks/{id}", webhooks.endpoint_page, methods=GET),
    Route("/panel/webhooks/{id}/edit", webhooks.edit_page, methods=GET),
    Route("/panel/webhooks/{id}/edit", webhooks.save_endpoint, methods=POST),
    Route("/panel/webhooks/{id}/secret", webhooks.reveal_secret, methods=POST),
    Route("/panel/webhooks/{id}/rotate", webhooks.rotate_secret, methods=POST),
    Route("/panel/webhooks/{id}/delete", webhooks.confirm_delete, methods=GET),
    Route("/panel/webhooks/{id}/delete", webhooks.delete_endpoint, methods=POST),
    Route("/panel/webhooks/{id}/enabled", webhooks.set_enabled, methods=POST),
    Route("/panel/webhooks/{id}/test", webhooks.send_test, methods=POST),
    Route("/panel/webhooks/{id}/redeliver", webhooks.redeliver_since, methods=POST),
    Route("/panel/webhooks/{id}/deliveries/{delivery_id}", deliveries.delivery_page, methods=GET),
    Route("/panel/webhooks/{id}/deliveries/{delivery_id}/redeliver", deliveries.redeliver, methods=POST),
    # Settings > OAuth apps, and the person's authorized apps
    Route("/panel/oauth-apps", oauth_apps.apps_page, methods=GET),
    Route("/panel/oauth-apps", oauth_apps.register_app, methods=POST),
    Route("/panel/oauth-apps/{client_id}", oauth_apps.app_page, methods=GET),
    Route("/panel/oauth-apps/{client_id}/edit", oauth_apps.save_app, methods=POST),
    Route("/panel/oauth-apps/{client_id}/secret", oauth_apps.rotate_app_secret, methods=POST),
    Route("/panel/oauth-apps/{client_id}/redirect-uris", oauth_apps.save_redirect_uris, methods=POST),
    Route("/panel/oauth-apps/{client_id}/delete", oauth_apps.confirm_delete, methods=GET),
    Route("/panel/oauth-apps/{client_id}/delete", oauth_apps.delete_app, methods=POST),
    Route("/panel/authorized-apps", oauth_apps.authorized_page, methods=GET),
    Route("/panel/authorized-apps/revoke", oauth_apps.revoke_app, methods=POST),
    # Settings > Team
    Route("/panel/team", team.team_page, methods=GET),
    Route("/panel/team/invitations", team.invite, methods=POST),
    Route("/panel/team/invitations/{id}/resend", team.resend, methods=POST),
    Route("/panel/team/invitations/{id}/revoke", team.revoke, methods=POST),
    Route("/panel/team/members/{id}/remove", team.confirm_remove, methods=GET),
    Route("/panel/team/members/{id}/remove", team.remove, methods=POST),
    # Settings > Audit log
    Route("/panel/audit-log", audit_log.audit_page, methods=GET),
    # Account > Profile
    Route("/panel/profile", profile.profile_page, methods=GET),
    Route("/panel/profile", profile.save_profile, methods=POST),
    Route("/panel/profile/password", profile.change_password, methods=POST),
    Route("/panel/profile/sign-out-everywhere", profile.sign_out_everywhere, methods=POST),
    Route("/panel/profile/export", profile.download_data, methods=POST),
    Route("/panel/static/{name}", static, methods=GET),
]
# After the business's pages (assembled in rpc/app.py): any other address under /panel.
fallback = [Route("/panel/{rest:path}", unknown_page, methods=["GET", "POST"])]
