"""The access log without credentials (docs/security.md): an address that carries one — a mailed link's token, a
download link's signature, a one-click unsubscribe, a one-time reveal — is written with it replaced by
`[redacted]`, by `bin/serve --access-log` under either HTTP server.

One list of patterns says which addresses those are: the framework's own (`TOKEN_LINKS`) and the business's
(`Business.token_links`); an address that carries a token joins it there. Each pattern matches a request target
(the path, with `?` and the query when there is one) whole, and what its groups matched is what is redacted. The
access log is the HTTP server's, written outside the app: each app puts its redactor on the servers' access
loggers while it runs (`redacting`).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable, Iterator, Mapping

REDACTED = "[redacted]"
ACCESS_LOGGERS = ("uvicorn.access", "granian.access")
TOKEN_LINKS = (
    r"/web/(?:verify|reset|invite)\?(.+)",  # the mailed links (`?token=`)
    r"/files/[^/?]+/download\?(.+)",  # a download link: whoever holds its signature gets the bytes
    r"/panel/[^?]*\?(?:.*&)?reveal=([^&]+)(?:&.*)?",  # a one-time reveal (opens nothing without the session)
)


class TokenRedactor(logging.Filter):
    """Rewrites the request target of an access log record: uvicorn's is one argument (`path?query`), granian's
    two (`path` and `query_string` of a mapping)."""

    def __init__(self, patterns: Iterable[str]) -> None:
        super().__init__()
        self._patterns = [re.compile(pattern) for pattern in patterns]

    def redact(self, target: str) -> str:
        """`target` with the groups of the first pattern it matches replaced by `REDACTED`."""
        for pattern in self._patterns:
            if match := pattern.fullmatch(target):
                for group in range(len(match.groups()), 0, -1):  # from the last: earlier spans stay where they are
                    start, end = match.span(group)
                    if start >= 0:
                        target = target[:start] + REDACTED + target[end:]
                return target
        return target

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self.redact(value) if isinstance(value, str) and value.startswith("/") else value
                for value in record.args
            )
        elif isinstance(record.args, Mapping) and isinstance(path := record.args.get("path"), str):
            query = str(record.args.get("query_string") or "")
            path, _, query = self.redact(f"{path}?{query}" if query else path).partition("?")
            record.args = {**record.args, "path": path, "query_string": query}
        return True


@contextlib.contextmanager
def redacting(token_links: Iterable[str]) -> Iterator[TokenRedactor]:
    """The servers' access loggers redact `TOKEN_LINKS` and `token_links` for the duration of the block."""
    redactor = TokenRedactor((*TOKEN_LINKS, *token_links))
    loggers = [logging.getLogger(name) for name in ACCESS_LOGGERS]
    for logger in loggers:
        logger.addFilter(redactor)
    try:
        yield redactor
    finally:
        for logger in loggers:
            logger.removeFilter(redactor)
