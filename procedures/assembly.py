"""What the operations hand the framework at assembly (`rpc/app.py` is the only caller): every procedure module
registered, the vocabulary, the payment provider behind the receiver, the periodic expiry of subscriptions,
matching of job alerts and reminders of scorecards, the panel's hiring desk and its Billing and Job alerts pages,
the public job pages, the alerts' one-click unsubscribe and the private calendar feeds, and the recruiting loop's
mail."""

from __future__ import annotations

import importlib
import pkgutil

import procedures
from procedures.alerts import pages as alert_pages
from procedures.alerts.matcher import Matcher
from procedures.applications import letters
from procedures.applications.interviews import feed as calendar_feed
from procedures.applications.interviews.reminders import Reminders
from procedures.billing import panel as billing_panel
from procedures.billing.provider import PayTR, PayTRSettings
from procedures.billing.settlement import EXPIRY
from procedures.desk import routes as desk
from procedures.files import FILE_HOLDERS
from procedures.jobs.search.corpus import JOBS
from procedures.privacy import PRIVACY
from procedures.public_pages import routes as public_pages
from procedures.published_cache import PROBE, PROBE_SQL
from procedures.vocabulary import VOCABULARY
from rpc.business import Business
from rpc.settings import Settings


def load() -> None:
    """Import every module of the package, registering its procedures (importing twice is harmless). The
    modules are found by walking the package: a new one needs no list kept by hand."""
    for module in pkgutil.walk_packages(procedures.__path__, f"{procedures.__name__}."):
        importlib.import_module(module.name)


def business(settings: Settings) -> Business:
    """Everything the framework runs for the business; the provider's settings are checked here, at start."""
    load()
    PayTRSettings.of(settings)
    return Business(
        vocabulary=VOCABULARY,
        providers={"paytr": PayTR()},
        periodic={
            "expire_subscriptions": EXPIRY,
            "job_alerts": Matcher(settings).periodic(),
            "scorecard_reminders": Reminders(settings).periodic(),
        },
        privacy=PRIVACY,
        file_holders=FILE_HOLDERS,
        panel_routes=[*desk.routes, *billing_panel.routes, *alert_pages.routes],
        public_routes=[*public_pages.routes(settings), *alert_pages.public_routes, *calendar_feed.routes],
        probes={PROBE: PROBE_SQL},
        corpora=(JOBS,),
        mail_subjects=letters.SUBJECTS,
        mail_templates=(letters.TEMPLATES,),
        token_links=(*alert_pages.TOKEN_LINKS, *calendar_feed.TOKEN_LINKS),
    )
