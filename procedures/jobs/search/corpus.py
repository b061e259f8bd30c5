"""The published jobs as a search corpus: the fields of the index, each job's document, and the SQL that feeds it
from the log of changes to the published set (`job_totals.version`, `published_changes`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec
import tantivy

from procedures.jobs.search.text import (
    ANALYZER,
    GRAMS,
    PAIRS,
    STOP_WORDS,
    analyzer,
    fold,
    grams_analyzer,
    pairs_analyzer,
    trigrams,
)
from rpc.search.corpus import Corpus

COLUMNS = (
    "jobs.id::text AS _id, jobs.title, jobs.company, jobs.location, jobs.description, jobs.employment_type,"
    " jobs.created_at, jobs.published_at"
)

_CHANGES = f"""
WITH now AS (SELECT version FROM job_totals WHERE status = 'published'),
changed AS (
    SELECT DISTINCT id FROM published_changes
    WHERE version > %(since)s AND version <= (SELECT version FROM now)
)
SELECT (SELECT version FROM now) AS _position,
    (SELECT count(DISTINCT version) FROM published_changes
     WHERE version > %(since)s AND version <= (SELECT version FROM now)) AS _logged,
    changed.id::text AS _id, jobs.id IS NOT NULL AS _present,
    {COLUMNS.replace("jobs.id::text AS _id, ", "")}
FROM (SELECT 1) AS one
LEFT JOIN (changed LEFT JOIN jobs ON jobs.id = changed.id AND jobs.status = 'published') ON true
"""
_EVERYTHING = f"SELECT {COLUMNS} FROM jobs WHERE status = 'published'"
_POSITION = "SELECT version FROM job_totals WHERE status = 'published'"
_CENSUS = "SELECT status AS label, count(*) AS count, status = 'published' AS indexed FROM jobs GROUP BY status"
_SAMPLE = f"""
SELECT {COLUMNS}, jobs.status = 'published' AS _present FROM jobs ORDER BY random() LIMIT %(size)s
"""

# Ranks that order jobs newest first: microseconds since the epoch, then the id's first 12 bits, as one number
# (the index orders by a number far faster than by text). Equal ranks — the same microsecond and 12 bits — are
# settled by the whole id, read from the index (`rpc.search.view`).
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# Named in the fingerprint: bump it whenever the fields of `schema` or what `document` puts in them change.
_SHAPE = "fields-3"
# The columns filtered by substring (`procedures.jobs.search.filters.contains`): each folded, as `<column>_grams`
# and `<column>_pairs`.
SUBSTRING_COLUMNS = ("title", "company", "location")


class Shown(msgspec.Struct, frozen=True, kw_only=True):
    """What a page shows of a job (its list form), stored with it in the index."""

    id: str
    title: str
    company: str
    location: str
    status: str
    created_at: dt.datetime


_encode = msgspec.json.Encoder().encode


def micros(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // dt.timedelta(microseconds=1)


def rank(moment: dt.datetime, job_id: str) -> int:
    """The number whose order is that of (moment, id), but for ids that share their first 12 bits."""
    return micros(moment) << 12 | int(uuid.UUID(job_id).hex[:3], 16)


def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("text", tokenizer_name=ANALYZER)  # title, company, location and description
    builder.add_text_field("title", tokenizer_name=ANALYZER)  # the title alone: title matches rank first
    for facet in ("employment_type", "location", "company"):  # as written: facets and their values
        builder.add_text_field(facet, fast=True, tokenizer_name="raw", index_option="basic")
    for column in SUBSTRING_COLUMNS:  # substring filters: trigrams at their positions, and short pieces
        builder.add_text_field(f"{column}_grams", tokenizer_name=GRAMS, index_option="position")
        builder.add_text_field(f"{column}_pairs", tokenizer_name=PAIRS, index_option="basic")
    builder.add_integer_field("published", indexed=True, fast=True)  # microseconds: posted_after
    builder.add_unsigned_field("published_rank", indexed=True, fast=True)  # sort=newest, relevance's tie-break
    builder.add_unsigned_field("created_rank", indexed=True, fast=True)  # jobs.list
    builder.add_bytes_field("shown", stored=True)
    return builder.build()


def text(row: Mapping[str, Any]) -> str:
    """The searched text of a job (its `text` field, before analysis): what `jobs.search`'s words are asked of."""
    return fold(f"{row['title']} {row['company']} {row['location']} {row['description'] or ''}")


def document(row: Mapping[str, Any]) -> tantivy.Document:
    """A published job's document; `row` holds the columns `COLUMNS` names."""
    job_id: str = row["_id"]
    title, company, location = row["title"], row["company"], row["location"]
    # Every way of publishing stamps the time; a row published by hand without one ranks by its creation.
    published: dt.datetime = row["published_at"] or row["created_at"]
    fields: dict[str, Any] = {
        "id": job_id,
        "text": text(row),
        "title": fold(title),
        "location": location,
        "company": company,
        **_substrings({"title": title, "company": company, "location": location}),
        "published": micros(published),
        "shown": _encode(
            Shown(
                id=job_id,
                title=title,
                company=company,
                location=location,
                status="published",
                created_at=row["created_at"],
            )
        ),
    }
    if row["employment_type"] is not None:
        fields["employment_type"] = row["employment_type"]
    made = tantivy.Document(**fields)
    made.add_unsigned("published_rank", rank(published, job_id))  # keyword numbers are taken as signed
    made.add_unsigned("created_rank", rank(row["created_at"], job_id))
    return made


def _substrings(values: Mapping[str, str]) -> dict[str, str]:
    """The fields a substring filter asks of each column's value (`procedures.jobs.search.text.GRAMS`)."""
    fields = {}
    for column, value in values.items():
        folded = fold(value)
        fields[f"{column}_grams"] = "".join(trigrams(folded))
        fields[f"{column}_pairs"] = folded
    return fields


def _fingerprint() -> str:
    """Changes with anything that decides what the index holds: an index made otherwise is built anew."""
    shape = f"{COLUMNS}|{_SHAPE}|{' '.join(STOP_WORDS)}|english|{tantivy.__name__}|v1"
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


INDEX = "jobs"  # the corpus's name: procedures find this process's index as `ctx.indexes[INDEX]`
JOBS = Corpus(
    name=INDEX,
    fingerprint=_fingerprint(),
    schema=schema,
    analyzers=lambda: {ANALYZER: analyzer(), GRAMS: grams_analyzer(), PAIRS: pairs_analyzer()},
    id_field="id",
    stored_fields=("id", "shown"),
    position_sql=_POSITION,
    changes_sql=_CHANGES,
    everything_sql=_EVERYTHING,
    census_sql=_CENSUS,
    sample_sql=_SAMPLE,
    document=document,
)
