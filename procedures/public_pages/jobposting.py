"""A published job as schema.org `JobPosting` for Google for Jobs, and JSON that is safe inside a `<script>`.

Google's required properties are `title`, `description` (HTML), `datePosted`, `hiringOrganization` and
`jobLocation` — or, for a remote job, `jobLocationType: TELECOMMUTE` with `applicantLocationRequirements`;
recommended ones `validThrough`, `employmentType`, `identifier` and `directApply`."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from dataclasses import dataclass
from typing import Any

EMPLOYMENT_TYPES = {
    "full_time": "FULL_TIME",
    "part_time": "PART_TIME",
    "contract": "CONTRACTOR",
    "internship": "INTERN",
    "temporary": "TEMPORARY",
}
LABELS = {
    "full_time": "Full time",
    "part_time": "Part time",
    "contract": "Contract",
    "internship": "Internship",
    "temporary": "Temporary",
}
# "Remote", "remote - EU", "Remote (Germany)": the word Remote first, whatever case; not "Remoteville".
_REMOTE = re.compile(r"^\s*remote\b[\s:,;()/\-–—]*(?P<area>.*?)[\s()]*$", re.IGNORECASE)
_PARAGRAPHS = re.compile(r"\n\s*\n")
# In a <script>, `</script>` or `<!--` would end or confuse it; U+2028/2029 end lines in older JavaScript.
_SCRIPT_UNSAFE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


@dataclass(frozen=True, slots=True)
class PublicJob:
    """What the world may see of a job."""

    id: str
    title: str
    company: str
    location: str
    description: str | None
    employment_type: str | None
    status: str
    published_at: dt.datetime | None
    updated_at: dt.datetime


def remote_area(location: str) -> str | None:
    """For a location that starts with "Remote", where applicants may be ("Anywhere" when it does not say);
    None for any other location."""
    match = _REMOTE.match(location)
    if match is None:
        return None
    return match["area"].strip() or "Anywhere"


def description_html(text: str | None) -> str:
    """The plain-text description as the HTML Google wants: escaped, blank lines as paragraphs, line breaks as
    `<br>`."""
    paragraphs = [part.strip("\n") for part in _PARAGRAPHS.split((text or "").replace("\r\n", "\n"))]
    return "".join(f"<p>{html.escape(part).replace(chr(10), '<br>')}</p>" for part in paragraphs if part.strip())


def job_posting(job: PublicJob, url: str, valid_days: int) -> dict[str, Any]:
    """The `JobPosting` of a published job."""
    published = job.published_at or job.updated_at
    posting: dict[str, Any] = {
        "@context": "https://schema.org/",
        "@type": "JobPosting",
        "title": job.title,
        "description": description_html(job.description) or f"<p>{html.escape(job.title)}</p>",
        "datePosted": _iso(published),
        "validThrough": _iso(published + dt.timedelta(days=valid_days)),
        "hiringOrganization": {"@type": "Organization", "name": job.company},
        "identifier": {"@type": "PropertyValue", "name": job.company, "value": job.id},
        "directApply": True,
        "url": url,
    }
    if job.employment_type in EMPLOYMENT_TYPES:
        posting["employmentType"] = EMPLOYMENT_TYPES[job.employment_type]
    area = remote_area(job.location)
    if area is None:
        posting["jobLocation"] = {
            "@type": "Place",
            "address": {"@type": "PostalAddress", "addressLocality": job.location},
        }
    else:
        posting["jobLocationType"] = "TELECOMMUTE"
        posting["applicantLocationRequirements"] = {"@type": "AdministrativeArea", "name": area}
    return posting


def script_json(value: Any) -> str:
    """`value` as JSON that cannot end or break out of the `<script>` element it is written into."""
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return encoded.translate(_SCRIPT_UNSAFE)


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
