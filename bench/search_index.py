"""The search index's own figures at one size: its size on disk, a full build from PostgreSQL
(`bin/admin rebuild-search`, while the service keeps answering), a restarted server's time to ready (its index
opened and caught up), and the most memory a server process held during the size's reads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.config import BenchError
from bench.processes import script
from bench.results import Row
from bench.stand import Stand

NAME = "search index"


def row(bench: Stand, size: int) -> Row:
    targets = bench.targets
    command = [*script("admin"), "rebuild-search"]
    done = subprocess.run(command, env=targets.env, capture_output=True, text=True, timeout=600)  # noqa: S603
    if done.returncode != 0:
        raise BenchError(f"bin/admin rebuild-search failed:\n{done.stderr[-2000:]}")
    built = json.loads(done.stdout)["indexes"][0]
    ready = targets.start_service()  # it takes up the rebuilt index, or opens its own and catches up
    megabytes = _bytes(Path(targets.env["DATA_DIR"]) / "search") / 1e6
    bench.say(
        f"  {NAME}: built in {built['build_seconds']} s, {megabytes:,.0f} MB on disk; a restarted server ready in "
        f"{ready:.1f} s; server RSS up to {bench.rss.get(size, 0):,.0f} MB"
    )
    return Row(
        name=NAME,
        jobs=size,
        unit="s to ready after a restart",
        req_s=round(ready, 2),
        p50_ms=None,
        p99_ms=None,
        errors=0,
        rounds=1,
        details={
            "build_seconds": built["build_seconds"],
            "restart_to_ready_seconds": round(ready, 2),
            "index_megabytes_on_disk": round(megabytes, 1),
            "server_rss_megabytes": round(bench.rss.get(size, 0.0), 1),
        },
    )


def _bytes(path: Path) -> int:
    """What the index files take (hard links counted once)."""
    seen: set[int] = set()
    total = 0
    for file in path.rglob("*"):
        if file.is_file():
            status = file.stat()
            if status.st_ino not in seen:
                seen.add(status.st_ino)
                total += status.st_size
    return total
