"""What the operations (`procedures/`) hand the framework at assembly: their vocabulary, as data, and the few
objects the framework runs for them — payment providers behind the receiver, periodic work on the delivery
workers, pages of the panel. `rpc/app.py` takes it from `procedures.assembly.business()`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from starlette.routing import BaseRoute

from rpc.core.periodic import Periodic
from rpc.core.vocabulary import Vocabulary
from rpc.payments.provider import Provider
from rpc.privacy.steps import PrivacySteps
from rpc.search.corpus import Corpus


@dataclass(frozen=True, slots=True)
class Business:
    """The vocabulary, the payment providers by the path segment of their notification address, the periodic
    work by name, the panel's pages of the business (routes under `/panel`), its public pages, the probes, the
    corpora, and its kinds of mail."""

    vocabulary: Vocabulary
    providers: Mapping[str, Provider] = field(default_factory=dict)
    periodic: Mapping[str, Periodic] = field(default_factory=dict)
    panel_routes: Sequence[BaseRoute] = ()
    # Pages anyone may open, and a signed-in person's own (job pages, sitemap, feeds, a candidate's home, the
    # alerts' one-click unsubscribe).
    public_routes: Sequence[BaseRoute] = ()
    # Scalar queries procedures may consult cheaply (`@procedure(probes=...)`, `ctx.probe`), by name.
    probes: Mapping[str, str] = field(default_factory=dict)
    # The business's share of a person's privacy: erasure and retention in its tables, the export's document.
    privacy: PrivacySteps = field(default_factory=PrivacySteps)
    # Queries over the business's rows that refer to the File `f.id` (`SELECT FROM t WHERE t.file_id = f.id`): the
    # files sweep keeps a File while any of them finds a row.
    file_holders: Sequence[str] = ()
    # Collections each server process keeps a search index of (`ctx.indexes[name]`), fed by their change logs.
    corpora: Sequence[Corpus] = ()
    # The business's own kinds of mail (`ctx.mail`): each kind's subject, and the packages whose `templates/` hold
    # its `<kind>.txt` and `<kind>.html`.
    mail_subjects: Mapping[str, str] = field(default_factory=dict)
    mail_templates: Sequence[str] = ()
    # The addresses of the business's pages that carry a token, as patterns of a request target whose groups are
    # the token: the access log writes them redacted (`rpc.web.access_log`).
    token_links: Sequence[str] = ()
