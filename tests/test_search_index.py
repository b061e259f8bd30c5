"""The search index against PostgreSQL: for random small corpora, edits and queries, `jobs.search` answered from
the index (ids in order over every page, total, facets) equals a plain reference query; and read-your-writes
across processes — a write through one server is seen at once through another, which keeps an index of its own,
also after a restart that missed writes."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import string
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import tantivy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procedures.jobs.search import from_index, listing
from procedures.jobs.search.corpus import JOBS, document
from procedures.jobs.search.request import Search, SearchJobs
from rpc.api import like_pattern
from rpc.search.answers import Answers
from rpc.search.index import SearchIndex
from rpc.search.view import View
from tests.support import TEST_SECRET_KEY, Admin, LiveServer, User, admin_command, bearer, eventually, ok

ROOT = Path(__file__).resolve().parent.parent

MOMENTS = [dt.datetime(2026, 3, day, 9, tzinfo=dt.UTC) for day in (1, 2, 3)]  # few: publication ties abound
WORDS = ["python", "pythons", "rust", "data", "engineer", "engineers", "developer", "senior", "platform", "cloud"]
WORDS += ["mühendis", "Müdürü", "café", "İstanbul", "lead", "of", "the"]
COMPANIES = ["Globex", "Initech", "Şirket Ağı", "Café Crème", "globex labs"]
LOCATIONS = ["Berlin", "İstanbul", "İzmir", "Paris", "Remote (EU)"]
TYPES = ["full_time", "part_time", "contract", "internship", "temporary", None]
SUBSTRINGS = ["ist", "IZM", "glo", "cafe", "şirk", "(eu", "r"]

jobs_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "title": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
            "description": st.none() | st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join),
            "company": st.sampled_from(COMPANIES),
            "location": st.sampled_from(LOCATIONS),
            "employment_type": st.sampled_from(TYPES),
            "status": st.sampled_from(["published", "published", "published", "draft", "closed"]),
            "published_at": st.sampled_from(MOMENTS),
        }
    ),
    min_size=0,
    max_size=14,
)


@st.composite
def typed(draw: st.DrawFn) -> str:
    """Web-search syntax: words, a typed prefix, `-exclusion`, `or`, a phrase."""
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    shape = draw(st.sampled_from(["words", "prefix", "exclude", "or", "phrase", "open phrase"]))
    if shape == "prefix":
        words[-1] = words[-1][: draw(st.integers(1, max(1, len(words[-1]))))]
    elif shape == "exclude" and len(words) > 1:
        words[-1] = f"-{words[-1]}"
    elif shape == "or" and len(words) > 1:
        words.insert(1, "or")
    elif shape == "phrase":
        return f'"{" ".join(words)}"'
    elif shape == "open phrase":
        return f'"{" ".join(words)}'
    return " ".join(words)


queries = st.fixed_dictionaries(
    {},
    optional={
        "q": typed(),
        "location": st.sampled_from(SUBSTRINGS),
        "company": st.sampled_from(SUBSTRINGS),
        "employment_type": st.lists(st.sampled_from(TYPES[:-1]), min_size=1, max_size=3, unique=True),
        "posted_after": st.sampled_from(MOMENTS).map(lambda moment: moment.isoformat()),
        "sort": st.sampled_from(["relevance", "newest"]),
    },
)
edits = st.lists(st.tuples(st.sampled_from(["close", "publish", "retitle", "delete"]), st.integers(0, 13)), max_size=4)


def ready(server: LiveServer, deadline: float = 60) -> dict[str, Any]:
    """Wait until the server's search index is built and caught up (its /readyz answers 200)."""
    with server.client() as http:
        answer = eventually(
            lambda: (reply := http.get("/readyz")).status_code == 200 and reply,
            lambda: f"/readyz: {http.get('/readyz').text}",
            deadline,
        )
        return dict(answer.json())


def searched(http: httpx.Client, who: User, per_page: int, **params: Any) -> tuple[list[str], dict[str, Any]]:
    """Every id met by following next_cursor from the first page, and the first page."""
    pages = [ok(http.post("/v1/jobs.search", json={**params, "per_page": per_page}, headers=bearer(who.token)))]
    while pages[-1]["next_cursor"] is not None:
        following = {**params, "per_page": per_page, "cursor": pages[-1]["next_cursor"]}
        pages.append(ok(http.post("/v1/jobs.search", json=following, headers=bearer(who.token))))
    return [job["id"] for page in pages for job in page["data"]], pages[0]


def reference(admin: Admin, params: dict[str, Any]) -> tuple[list[str], dict[str, list[dict[str, Any]]]]:
    """The same search as a plain PostgreSQL query over `jobs`: every matching id in order, and the facets."""
    words = "q" in params and any(char.isalnum() for char in params["q"])
    conditions = ["status = 'published'"]
    if words:
        conditions.append("search_doc @@ job_search_query(%(q)s)")
    for name in ("location", "company"):
        if name in params:
            conditions.append(f"job_fold({name}) LIKE job_fold(%({name})s)")
    if "employment_type" in params:
        conditions.append("employment_type = ANY(%(employment_type)s)")
    if "posted_after" in params:
        conditions.append("published_at > %(posted_after)s::timestamptz")
    ranked = words and params.get("sort", "relevance") == "relevance"
    tier = "(ts_filter(search_doc, '{a}') @@ job_search_query(%(q)s))::int" if ranked else "0::int"
    values = {**params}
    for name in ("location", "company"):
        if name in values:
            values[name] = like_pattern(values[name])
    rows = admin.sql(
        f"""SELECT id::text AS id, employment_type, location, company FROM jobs WHERE {" AND ".join(conditions)}
            ORDER BY {tier} DESC, published_at DESC, id DESC""",
        values,
    )
    facets = {}
    for name, size in (("employment_type", None), ("location", 10), ("company", 10)):
        counts = Counter(row[name] for row in rows if row[name] is not None)
        ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:size]
        facets[name] = [{"value": value, "count": count} for value, count in ordered]
    return [row["id"] for row in rows], facets


@pytest.fixture(scope="module")
def server(live: LiveServer) -> LiveServer:
    ready(live)
    return live


@pytest.fixture(scope="module")
def reader(admin: Admin) -> User:
    return admin.user("candidate")


@pytest.fixture(scope="module")
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def replace_jobs(admin: Admin, owner: User, jobs: list[dict[str, Any]]) -> list[str]:
    admin.sql("DELETE FROM jobs WHERE account_id = %(account)s", {"account": owner.account_id})
    ids = []
    for job in jobs:
        row = {**job, "account": owner.account_id}
        if row["status"] == "draft":
            row["published_at"] = None
        found = admin.sql(
            """INSERT INTO jobs (account_id, title, company, location, description, employment_type, status,
                   published_at)
               VALUES (%(account)s, %(title)s, %(company)s, %(location)s, %(description)s, %(employment_type)s,
                   %(status)s, %(published_at)s)
               RETURNING id::text AS id""",
            row,
        )
        ids.append(found[0]["id"])
    return ids


def edit(admin: Admin, ids: list[str], action: str, which: int) -> None:
    if not ids:
        return
    values = {"id": ids[which % len(ids)], "moment": MOMENTS[which % len(MOMENTS)]}
    statements = {
        "close": "UPDATE jobs SET status = 'closed' WHERE id = %(id)s AND status = 'published'",
        "publish": "UPDATE jobs SET status = 'published', published_at = %(moment)s WHERE id = %(id)s"
        " AND status = 'draft'",
        "retitle": "UPDATE jobs SET title = title || ' senior python' WHERE id = %(id)s",
        "delete": "DELETE FROM jobs WHERE id = %(id)s",
    }
    admin.sql(statements[action], values)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(jobs=jobs_strategy, rounds=st.lists(st.tuples(edits, queries, st.integers(1, 4)), min_size=1, max_size=3))
def test_the_index_answers_as_postgresql_does(
    admin: Admin,
    employer: User,
    reader: User,
    http: httpx.Client,
    jobs: list[dict[str, Any]],
    rounds: list[tuple[list[tuple[str, int]], dict[str, Any], int]],
) -> None:
    ids = replace_jobs(admin, employer, jobs)
    for changes, params, per_page in rounds:
        for action, which in changes:
            edit(admin, ids, action, which)
        walked, first = searched(http, reader, per_page, facets=True, **params)
        expected, facets = reference(admin, params)
        assert walked == expected, params
        assert first["total"] == len(expected)
        assert first["facets"] == facets
        with pytest.MonkeyPatch.context() as patch:  # as while a process builds its index: PostgreSQL answers
            patch.setattr(SearchIndex, "view", no_view)
            assert searched(http, reader, per_page, facets=True, **params) == (walked, first)


async def no_view(*args: Any) -> None:
    return None


def test_the_index_answered_those(server: LiveServer) -> None:
    """The property above ran against the index, not the PostgreSQL answer of a process still building it."""
    status = ready(server)
    assert status["status"] == "ok"


# -- Read-your-writes across processes ----------------------------------------------------------------------


@pytest.fixture
def other(settings: Any) -> Iterator[LiveServer]:
    """A second server process on the same database, with an index of its own (another slot of DATA_DIR)."""
    with LiveServer(settings) as second:
        ready(second)
        yield second


def publish(http: httpx.Client, who: User, title: str) -> str:
    job = ok(
        http.post(
            "/v1/jobs.create", json={"title": title, "company": "Acme", "location": "Oslo"}, headers=bearer(who.token)
        )
    )
    ok(http.post("/v1/jobs.publish", json={"id": job["id"]}, headers=bearer(who.token)))
    return str(job["id"])


def found(server: LiveServer, who: User, q: str) -> list[str]:
    with server.client() as client:
        return [
            job["id"]
            for job in ok(client.post("/v1/jobs.search", json={"q": q, "per_page": 100}, headers=bearer(who.token)))[
                "data"
            ]
        ]


def test_a_publish_on_one_process_is_found_at_once_on_another(
    http: httpx.Client, employer: User, reader: User, other: LiveServer
) -> None:
    job = publish(http, employer, "Quokka wrangler")
    assert found(other, reader, "quokka") == [job]
    ok(http.post("/v1/jobs.update", json={"id": job, "title": "Wombat wrangler"}, headers=bearer(employer.token)))
    assert found(other, reader, "quokka") == []
    assert found(other, reader, "wombat") == [job]
    ok(http.post("/v1/jobs.close", json={"id": job}, headers=bearer(employer.token)))
    assert found(other, reader, "wombat") == []


def test_a_burst_of_concurrent_publishes_is_counted_exactly_elsewhere(
    http: httpx.Client, employer: User, reader: User, other: LiveServer
) -> None:
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        made = set(pool.map(lambda number: publish(http, employer, f"Narwhal keeper {number}"), range(24)))
    with other.client() as client:
        answer = ok(
            client.post("/v1/jobs.search", json={"q": "narwhal", "per_page": 100}, headers=bearer(reader.token))
        )
    assert answer["total"] == 24 and {job["id"] for job in answer["data"]} == made


def test_a_restarted_process_catches_up_on_what_it_missed(
    http: httpx.Client, employer: User, reader: User, settings: Any
) -> None:
    with LiveServer(settings) as first:
        ready(first)
        kept = publish(http, employer, "Axolotl groomer")
        assert found(first, reader, "axolotl") == [kept]
    missed = publish(http, employer, "Axolotl trainer")  # while no second process runs
    ok(http.post("/v1/jobs.close", json={"id": kept}, headers=bearer(employer.token)))
    with LiveServer(settings) as again:  # takes up the slot the first left, at the position it had
        assert found(again, reader, "axolotl") == [missed]
        ready(again)
        assert found(again, reader, "axolotl") == [missed]


# -- Operations: rebuild and verify -------------------------------------------------------------------------


def test_verify_search_compares_each_index_with_postgresql(
    settings: Any, server: LiveServer, http: httpx.Client, employer: User
) -> None:
    with LiveServer(settings) as stopped:  # leaves an index in a slot no process holds
        ready(stopped)
    publish(http, employer, "Pangolin curator")
    done = admin_command(settings, "verify-search")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["indexes"][0]
    assert report["ok"] and len(report["slots"]) >= 2 and all(slot["documents"] > 0 for slot in report["slots"])
    # An index that claims a later position than it holds — a change it never applied — is caught.
    free = [slot["slot"] for slot in report["slots"] if slot["slot"] != "slot-0"]
    (position,) = [path for path in Path(settings.data_dir, "search").rglob("position.json") if free[0] in str(path)]
    kept = json.loads(position.read_text())
    publish(http, employer, "Pangolin keeper")
    position.write_text(json.dumps({**kept, "position": kept["position"] + 1}))
    try:
        broken = admin_command(settings, "verify-search")
        assert broken.returncode != 0 and "differs from PostgreSQL" in broken.stderr
    finally:
        position.write_text(json.dumps(kept))


def test_rebuild_search_is_taken_up_by_a_running_process(
    settings: Any, server: LiveServer, http: httpx.Client, employer: User, reader: User
) -> None:
    job = publish(http, employer, "Capybara herder")
    done = admin_command(settings, "rebuild-search")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["indexes"][0]
    assert report["slots"]["slot-0"] == "offered to its running process"
    assert found(server, reader, "capybara") == [job]  # exact meanwhile
    slot = next(Path(settings.data_dir, "search").rglob("slot-0"))
    eventually(lambda: not (slot / "incoming").exists(), "the running process taking up the rebuilt index", 30)
    assert found(server, reader, "capybara") == [job]
    assert json.loads(admin_command(settings, "verify-search").stdout)["ok"]


# -- Equal ranks --------------------------------------------------------------------------------------------


def test_equal_ranks_are_ordered_by_id_across_the_disk_index_and_the_recent_one() -> None:
    """Jobs published in the same microsecond whose ids share their first 12 bits have one rank; the id settles
    them, also where a page ends inside such a group and where the group spans both parts of a view."""
    moment = MOMENTS[0]
    ids = sorted(f"abc{number:05x}-0000-4000-8000-{number:012x}" for number in range(12))
    rows = [
        {
            "_id": job_id,
            "title": "Lynx tamer",
            "company": "Acme",
            "location": "Oslo",
            "description": None,
            "employment_type": None,
            "created_at": moment,
            "published_at": moment,
        }
        for job_id in ids
    ]
    main, recent = JOBS.index(), JOBS.index()
    for index, part in ((main, rows[::2]), (recent, rows[1::2])):
        writer = index.writer(15_000_000, 1)
        for row in part:
            writer.add_document(document(row))
        writer.commit()
        index.reload()
    view = View(2, main.schema, "id", main.searcher(), 1, recent.searcher(), tuple(row["_id"] for row in rows[1::2]))
    newest_first = list(reversed(ids))
    for offset, limit in ((0, 5), (3, 4), (10, 5)):
        found = view.top(tantivy.Query.all_query(), "published_rank", limit, offset)
        assert [hit.id_in("id") for hit in found.hits] == newest_first[offset : offset + limit]
        assert found.total == len(ids)
    walked, cursor = [], None
    while True:
        params = {"q": "lynx", "per_page": 5, **({"cursor": cursor} if cursor else {})}
        page = from_index.answer(view, Search.of(msgspec.convert(params, SearchJobs), TEST_SECRET_KEY))
        walked += [job.id for job in page.data]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert walked == newest_first and page.total == len(ids)


def test_every_character_a_substring_filter_is_given_means_itself() -> None:
    """Filters are literal substrings whatever they hold: regular expressions' meta characters, and those whose
    escape would mean more (`\\<` starts a word), match themselves and nothing else."""
    places = ["Remote (EU)", "a.b+c*d?e", "x|y[z]{1}^$#&-~", "<Berlin>", 'say "hi" @ 5%_', "back\\slash", "Oslo"]
    index = JOBS.index()
    writer = index.writer(15_000_000, 1)
    for number, place in enumerate(places):
        row = {
            "_id": f"00000000-0000-4000-8000-{number:012x}",
            "title": "Otter",
            "company": place,
            "location": place,
            "description": None,
            "employment_type": None,
            "created_at": MOMENTS[0],
            "published_at": MOMENTS[0],
        }
        writer.add_document(document(row))
    writer.commit()
    index.reload()
    view = View(1, index.schema, "id", index.searcher(), 1, None, ())
    for char in string.punctuation + " ":
        expected = sum(char in place.lower() for place in places)
        for field in ("location", "company"):
            _, total = listing.newest(
                view,
                q=None,
                employment_type=None,
                limit=10,
                offset=0,
                **{"location": None, "company": None, field: char},
            )
            assert total == expected, (field, char)
        assert (
            listing.newest(view, q=char, location=None, company=None, employment_type=None, limit=10, offset=0)[1]
            == expected
        )


def test_an_answer_is_remembered_only_at_the_position_it_was_computed_at() -> None:
    answers: Answers[str] = Answers(size=2)
    asked: list[str] = []

    def ask(position: int, key: str) -> str:
        return answers.of(position, key, lambda: asked.append(f"{key}@{position}") or f"{key}@{position}")

    assert [ask(5, "a"), ask(5, "a"), ask(5, "b")] == ["a@5", "a@5", "b@5"]
    assert asked == ["a@5", "b@5"], "asked again at the same position: remembered"
    assert ask(4, "c") == "c@4" and ask(5, "c") == "c@5", "an older position's answer is given, never kept"
    assert ask(5, "b") == "b@5" and asked[-1] == "c@5", "b and c kept"
    assert ask(5, "a") == "a@5" and asked[-1] == "a@5", "at most two: a, the least recently asked, went"
    assert ask(6, "a") == "a@6" and ask(5, "a") == "a@5" and asked[-2:] == ["a@6", "a@5"], "a change forgets all"
