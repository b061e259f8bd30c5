"""The load generator: wrk with a Lua script that replays request lines, and its summary."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from bench.config import WRK_TIMEOUT, BenchError, Progress

# ---------------------------------------------------------------------------------------------------------
# The load generator
# ---------------------------------------------------------------------------------------------------------

LUA = r"""
-- bin/bench: rotates through pre-formatted requests read from a file, one a line (method, target,
-- Authorization, Content-Type, body; tab-separated), from line `first` for at most `limit` lines;
-- prints the summary as one JSON line. With a `rate` (requests a second), paced: request n is sent at
-- start + n / rate, on whichever connection is free (a constant offered rate, not as fast as answers come).
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]]
local clock = ffi.new("bench_timespec")
local prepared = {}
local count = 0
local index = 0

local function now_ms()
  ffi.C.clock_gettime(1, clock)  -- CLOCK_MONOTONIC
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

local function paced(rate)
  local interval, start, scheduled = 1000 / rate, nil, 0
  return function()
    local now = now_ms()
    start = start or now
    local at = start + scheduled * interval
    scheduled = scheduled + 1
    return math.max(0, math.floor(at - now + 0.5))
  end
end

function init(args)
  local path, first, limit, rate = args[1], tonumber(args[2]), tonumber(args[3]), tonumber(args[4])
  if rate and rate > 0 then delay = paced(rate) end
  local number = 0
  for line in io.lines(path) do
    if count >= limit then break end
    if number >= first then
      local method, target, authorization, content_type, body =
        line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
      local headers = {}
      if authorization ~= "" then headers["Authorization"] = authorization end
      if content_type ~= "" then headers["Content-Type"] = content_type end
      count = count + 1
      prepared[count] = wrk.format(method, target, headers, body ~= "" and body or nil)
    end
    number = number + 1
  end
  if count == 0 then error("no requests in " .. path .. " from line " .. first) end
end

function request()
  index = index % count + 1
  return prepared[index]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"status_errors":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"timeouts":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


class WrkSummary(msgspec.Struct, frozen=True):
    """What the script's `done` prints: counts, and latency percentiles in microseconds."""

    requests: int
    duration_us: int
    status_errors: int  # answers with a status above 399
    connect_errors: int
    read_errors: int
    write_errors: int
    timeouts: int
    p50_us: int
    p99_us: int

    @property
    def ok(self) -> int:
        return self.requests - self.status_errors

    @property
    def errors(self) -> int:
        return self.status_errors + self.connect_errors + self.read_errors + self.write_errors + self.timeouts


@dataclass(frozen=True, slots=True)
class RequestFile:
    """Requests for the wrk script, one a line."""

    path: Path
    count: int

    @classmethod
    def write(cls, path: Path, lines: Sequence[tuple[str, str, str, str, str]]) -> RequestFile:
        path.write_text("".join("\t".join(fields) + "\n" for fields in lines))
        return cls(path, len(lines))


def ensure_wrk(say: Progress) -> str:
    """The wrk binary; installed from the Debian package when missing (as root)."""
    found = shutil.which("wrk")
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise BenchError("wrk is not installed: install the Debian package `wrk` (apt-get install wrk)")
    say("installing wrk (apt-get install -y wrk)")
    if not _apt(apt, "install", "-y", "wrk"):
        _apt(apt, "update")
        _apt(apt, "install", "-y", "wrk")
    found = shutil.which("wrk")
    if found is None:
        raise BenchError("could not install wrk with apt-get; install the Debian package `wrk`")
    return found


def _apt(apt: str, *args: str) -> bool:
    done = subprocess.run(  # noqa: S603 - apt-get with fixed arguments
        [apt, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False
    )
    return done.returncode == 0


class Wrk:
    """`wrk -t1 -cN -dS --latency` with the rotating script."""

    def __init__(self, binary: str, work: Path, connections: int) -> None:
        self._binary = binary
        self._script = work / "rotate.lua"
        self._script.write_text(LUA)
        self.connections = connections

    def run(
        self, url: str, requests: RequestFile, seconds: int, first: int = 0, rate: float | None = None
    ) -> WrkSummary:
        """As fast as answers come back on the connections; or, with `rate`, offered at that constant rate."""
        argv = [
            self._binary, "-t1", f"-c{self.connections}", f"-d{seconds}s", "--latency", "--timeout", WRK_TIMEOUT,
            "-s", str(self._script), url, "--", str(requests.path), str(first), str(requests.count - first),
            f"{rate or 0:.3f}",
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120, check=False)  # noqa: S603
        for line in done.stdout.splitlines():
            if line.startswith("BENCH "):
                return msgspec.json.decode(line.removeprefix("BENCH "), type=WrkSummary)
        raise BenchError(f"wrk printed no summary (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")

    def version(self) -> str:
        done = subprocess.run([self._binary, "-v"], capture_output=True, text=True, timeout=10, check=False)  # noqa: S603
        return (done.stdout or done.stderr).split("\n", 1)[0].split(" Copyright", 1)[0].strip()
