"""One shard of a run spread over processes or hosts: `--shard i/N` (or `--shard-from-env`), a common
wall-clock start (`--start-at`) and one run id every shard agrees on.

Request k of the one seeded sequence goes to shard k mod N (round robin, not contiguous blocks): the
schedule is in time order, so blocks would leave one shard sending at a time (shard 0 the first
minutes, shard N-1 the last) and each process would have to carry the whole rate; round robin gives
every shard rate / N over the whole run and the same mix of lengths. The union of the slices is the
single-process sequence and schedule, index for index.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from loadgen.config import ConfigError

SHARD_ENV = "JOB_COMPLETION_INDEX"  # what a Kubernetes Indexed Job gives each pod
_SHARD = re.compile(r"^(\d+)/(\d+)$")


@dataclass(frozen=True)
class ShardPlan:
    """Which slice this process sends (`index` of `count`), from when, under which run id."""

    index: int
    count: int
    start_at: datetime | None = None
    run_id: str | None = None

    def indices(self, total: int) -> range:
        """Global request indices of this slice: k with k mod count == index."""
        return range(self.index, total, self.count)

    def take(self, schedule: Sequence[int]) -> list[int]:
        """This slice's send offsets (ns after the common start)."""
        return list(schedule[self.index :: self.count])


def parse_shard(text: str) -> tuple[int, int]:
    """`"i/N"` (0-based i < N) -> (i, N); a bad value is a one-line ConfigError naming it."""
    match = _SHARD.match(text.strip())
    if not match:
        raise ConfigError(f"invalid --shard {text!r}: use i/N with 0 <= i < N, e.g. 0/4")
    index, count = int(match[1]), int(match[2])
    if count < 1 or index >= count:
        raise ConfigError(f"invalid --shard {text!r}: need 0 <= i < N and N >= 1")
    return index, count


def shard_from_env(environ: Mapping[str, str], count: int | None) -> tuple[int, int]:
    """(i, N) from JOB_COMPLETION_INDEX and `--shards N`."""
    if count is None:
        raise ConfigError("--shard-from-env needs --shards N")
    raw = environ.get(SHARD_ENV)
    if raw is None:
        raise ConfigError(f"--shard-from-env: {SHARD_ENV} is not set (an Indexed Job's pods have it)")
    if not raw.strip().isdigit():
        raise ConfigError(f"invalid {SHARD_ENV} {raw!r}: must be an integer")
    return parse_shard(f"{raw.strip()}/{count}")


def parse_start_at(text: str) -> datetime:
    """ISO-8601 UTC wall clock (`2026-12-01T02:00:00Z`; an offset is converted to UTC)."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        message = f"invalid --start-at {text!r}: use ISO-8601 UTC, e.g. 2026-12-01T02:00:00Z"
        raise ConfigError(message) from None
    if when.tzinfo is None:
        raise ConfigError(f"invalid --start-at {text!r}: give the zone (Z for UTC)")
    return when.astimezone(UTC)


def derived_run_id(start_at: datetime, seed: int, facts: Mapping[str, Any]) -> str:
    """The run id every shard derives alike: start time, then a hash of seed and workload facts."""
    body = json.dumps({"seed": seed, **facts}, sort_keys=True, default=str)
    digest = hashlib.sha256(body.encode()).hexdigest()[:6]
    return f"{start_at.strftime('%Y%m%dT%H%M%SZ')}-{digest}"


def schedule_fingerprint(offsets: Sequence[int]) -> str:
    """sha256 over the comma-joined offsets (the manifest's `schedule_fingerprint`)."""
    return "sha256:" + hashlib.sha256(",".join(map(str, offsets)).encode()).hexdigest()


def shard_section(plan: ShardPlan, workload: Any, schedule: Sequence[int]) -> dict[str, Any]:
    """The manifest's `shard` block: the whole run's fingerprints and this slice's (as planned)."""
    total = len(schedule)
    whole, mine = sequence_fingerprints(plan, workload, total)
    return {
        "index": plan.index,
        "count": plan.count,
        "assignment": "round-robin: request k goes to shard k mod count",
        "start_at": plan.start_at.isoformat().replace("+00:00", "Z") if plan.start_at else None,
        "run_num_requests": total,
        "run_fingerprint": whole,
        "run_schedule_fingerprint": schedule_fingerprint(schedule),
        "slice_num_requests": len(plan.indices(total)),
        "slice_fingerprint": mine,
        "slice_schedule_fingerprint": schedule_fingerprint(plan.take(schedule)),
        "clock": clock_facts(),
    }


def sequence_fingerprints(plan: ShardPlan, workload: Any, total: int) -> tuple[str, str]:
    """(whole run's, this slice's) request-sequence fingerprints in one pass over the sequence, each
    as `loadgen.workload.generator.fingerprint` computes it (each request is generated once)."""
    whole, mine = hashlib.sha256(), hashlib.sha256()
    for k in range(total):
        line = workload.request(k).canonical_bytes() + b"\n"
        whole.update(line)
        if k % plan.count == plan.index:
            mine.update(line)
    return f"sha256:{whole.hexdigest()}", f"sha256:{mine.hexdigest()}"


def ntp_synchronized() -> bool | None:
    """systemd's view of NTP sync (`timedatectl show`), None where it cannot say."""
    exe = shutil.which("timedatectl")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "show", "-p", "NTPSynchronized", "--value"], capture_output=True, text=True, timeout=2
        )
    except (OSError, subprocess.SubprocessError):
        return None
    value = out.stdout.strip()
    return {"yes": True, "no": False}.get(value)


def clock_facts() -> dict[str, Any]:
    """This host's clocks: wall minus monotonic (perf_counter) offset, clock resolution, NTP state."""
    wall, mono = time.time_ns(), time.perf_counter_ns()
    return {
        "wall_minus_perf_counter_ns": wall - mono,
        "wall_resolution_s": time.get_clock_info("time").resolution,
        "ntp_synchronized": ntp_synchronized(),
    }


def perf_base(start_at: datetime | None, lead_ns: int = 5_000_000) -> int:
    """perf_counter_ns of the run's start: `start_at` mapped through this host's wall clock, else
    `lead_ns` from now (payloads are ready by then)."""
    now = time.perf_counter_ns()
    if start_at is None:
        return now + lead_ns
    wall_ns = round(start_at.timestamp() * 1e6) * 1000  # datetimes hold microseconds
    return now + (wall_ns - time.time_ns())
