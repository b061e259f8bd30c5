"""The business vocabulary — scopes and what each allows, the plans, the event kinds — handed to the framework
as data at assembly (`procedures.assembly`)."""

from __future__ import annotations

from rpc.core.vocabulary import Plan, Vocabulary

SCOPES = {
    "read:jobs": "See job postings, including your account's drafts.",
    "write:jobs": "Create, edit, publish and close your account's job postings.",
    "read:applications": (
        "See applications, their interviews, scorecards and offers: your own, or those to your account's jobs."
    ),
    "write:applications": (
        "Submit and withdraw applications, answer offers, and move applications through the hiring pipeline: "
        "interviews, scorecards and offers."
    ),
    "read:profile": "See your profile: name, e-mail, role and account.",
    "write:profile": "Change your display name, headline, location and bio, or erase yourself.",
    "read:billing": "See your account's plan, subscriptions, payments and invoices.",
    "write:billing": "Subscribe your account to a plan, and cancel subscriptions.",
    "read:audit": "See your account's audit log: who created keys, changed webhooks, authorized apps, signed in.",
    "read:events": "See your account's events (jobs, applications, billing) as its webhooks delivered them.",
}

# What read:jobs lets an application see of a candidate's: they post no jobs, so they have no drafts.
ROLE_SENTENCES = {"candidate": {"read:jobs": "See published job postings."}}

# Candidates apply to jobs and keep a profile: no job writing and no billing for their applications.
OAUTH_ROLE_SCOPES = {
    "candidate": frozenset({"read:jobs", "read:applications", "write:applications", "read:profile", "write:profile"}),
    "employer": frozenset(SCOPES),
    "admin": frozenset(SCOPES),
}

PLANS = {
    plan.name: plan
    for plan in (
        Plan(name="free", price=0, currency="TRY", per_minute=60, per_day=1_000),
        Plan(name="pro", price=99_000, currency="TRY", per_minute=300, per_day=10_000),
        Plan(name="enterprise", price=499_000, currency="TRY", per_minute=1_000, per_day=100_000),
    )
}

EVENT_KINDS = (
    "job.published",
    "job.updated",
    "job.closed",
    "application.created",
    "application.status_changed",
    "application.reviewed",
    "interview.scheduled",
    "interview.rescheduled",
    "interview.updated",
    "interview.cancelled",
    "scorecard.submitted",
    "offer.created",
    "offer.approved",
    "offer.rejected",
    "offer.sent",
    "offer.accepted",
    "offer.declined",
    "offer.cancelled",
    "billing.payment.completed",
    "billing.payment.failed",
    "billing.subscription.created",
    "billing.subscription.cancelled",
    "billing.invoice.generated",
    "user.deleted",
)

# A hiring pipeline's receiver: new and closed jobs, new applications and their moves.
SUGGESTED_EVENT_KINDS = ("job.published", "job.closed", "application.created", "application.status_changed")
# A first integration: publishing jobs and reading them back.
SUGGESTED_KEY_SCOPES = ("read:jobs", "write:jobs")
VOCABULARY = Vocabulary(
    scopes=SCOPES,
    plans=PLANS,
    event_kinds=EVENT_KINDS,
    oauth_role_scopes=OAUTH_ROLE_SCOPES,
    role_sentences=ROLE_SENTENCES,
    suggested_event_kinds=SUGGESTED_EVENT_KINDS,
    suggested_key_scopes=SUGGESTED_KEY_SCOPES,
)
