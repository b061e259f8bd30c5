"""Two malloc arenas for the process, not glibc's eight per core.

The index's threads (tantivy's indexing, merging and committing threads, and the executor threads that commit
and rebuild the recent documents) each allocate from an arena of their own. Memory freed in one arena is kept
there for that thread, so a server that commits every `SEARCH_FLUSH_SECONDS` grew by about a megabyte a second
under a steady load (tests/drills/test_steady_load.py: +48 to +89 MiB in a minute, 285 MiB in all) and stayed
flat at 143 MiB with two arenas, at the same latencies. An operator's own `MALLOC_ARENA_MAX` wins.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

ARENAS = 2
_M_ARENA_MAX = -8  # malloc.h


def limit_malloc_arenas() -> None:
    """Cap glibc's arenas at `ARENAS`, before the index starts its threads; elsewhere (musl, macOS) nothing."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return
    if mallopt(_M_ARENA_MAX, ARENAS) != 1:
        log.warning("malloc did not take M_ARENA_MAX=%d: memory may grow with the search index's threads", ARENAS)
