"""Bookkeeping of finished requests waiting to be parsed (the finisher's backlog); pure, no clock.

A finished request keeps its stamped raw reads (`(perf_counter_ns, bytes)` pieces, about 250 bytes
of Python objects each) until the finisher parses it. When the client's core is saturated the
finisher falls behind and that backlog grows without bound (1.1 GB in 15 s at 1,024 streams). The
finisher keeps it under `Bound`: over the bound it parses without yielding to the event loop, so
no more reads are taken in (they wait in the kernel's socket buffers, whose windows push back on
the server) until the backlog is back under the low-water mark, half the bound. Time spent over the
bound is time the client, not the server, set the pace: `client_saturated` in the summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from loadgen.transport.sse import _sse

PIECE_OVERHEAD = 200  # bytes of Python objects per stamped read beyond its payload: tuple, int, bytes header
MB = 1e6
_DATA = itemgetter(1)


@dataclass(frozen=True)
class Bound:
    """The most finished-but-unparsed requests (and bytes of their raw reads) held at once."""

    requests: int = 512
    bytes: int = 32_000_000

    def __post_init__(self) -> None:
        if self.requests < 1 or self.bytes < 1:
            raise ValueError(f"backlog bound must be >= 1 request and >= 1 byte, got {self}")


def held_bytes(reads: list[tuple[int, bytes]] | None) -> int:
    """Memory held by a request's raw reads: payload bytes + PIECE_OVERHEAD per piece (an estimate).
    In C where `_sse` is built: the reads' memory asked for at once, not waited for read by read
    (12.8 -> 2.6-3.7 µs a 32-read stream in a run on the VM: the reads are not in cache by then)."""
    if not reads:
        return 0
    if _sse is not None:
        size: int | None = _sse.held(reads, PIECE_OVERHEAD)
        if size is not None:
            return size
    # map: no frame per read; an elided read (None) holds its 8-byte stamp
    kept = list(filter(None, reads))
    return sum(map(len, map(_DATA, kept))) + PIECE_OVERHEAD * len(kept) + 8 * (len(reads) - len(kept))


class Backlog:
    """Unparsed finished requests: counts, peaks, and the time spent over the bound (saturated)."""

    def __init__(self, bound: Bound) -> None:
        self.bound = bound
        self.requests = 0
        self.bytes = 0
        self.peak_requests = 0
        self.peak_bytes = 0
        self.episodes = 0  # times the backlog went over the bound
        self.saturated_ns = 0
        self._since: int | None = None  # when the current episode began

    def add(self, size: int) -> None:
        """A request finished with `size` bytes of raw reads held."""
        self.requests += 1
        self.bytes += size
        self.peak_requests = max(self.peak_requests, self.requests)
        self.peak_bytes = max(self.peak_bytes, self.bytes)

    def remove(self, size: int) -> None:
        """A request was parsed: its raw reads are freed."""
        self.requests -= 1
        self.bytes -= size

    def over(self) -> bool:
        """True when the backlog is over the bound (parse before reading more)."""
        return self.requests > self.bound.requests or self.bytes > self.bound.bytes

    def drained(self) -> bool:
        """True when the backlog is back under the low-water mark (half the bound)."""
        return self.requests <= self.bound.requests // 2 and self.bytes <= self.bound.bytes // 2

    def enter(self, now_ns: int) -> bool:
        """Start a saturated episode at now_ns; True for the run's first one (warn once)."""
        if self._since is None:
            self._since = now_ns
            self.episodes += 1
        return self.episodes == 1

    def leave(self, now_ns: int) -> None:
        """End the current saturated episode at now_ns."""
        if self._since is not None:
            self.saturated_ns += now_ns - self._since
            self._since = None

    @property
    def saturated(self) -> bool:
        """True while in a saturated episode."""
        return self._since is not None

    def report(self) -> dict[str, Any]:
        """`client_saturated` in summary.json: whether the bound was hit, and the backlog figures."""
        return {
            "saturated": self.episodes > 0,
            "saturated_s": self.saturated_ns / 1e9,
            "episodes": self.episodes,
            "peak_backlog_requests": self.peak_requests,
            "peak_backlog_mb": round(self.peak_bytes / MB, 3),
            "bound_requests": self.bound.requests,
            "bound_mb": round(self.bound.bytes / MB, 3),
        }


def warning(backlog: Backlog) -> str:
    """The console line printed when the client first saturates."""
    return (
        f"loadgen: warning: the client is saturated: {backlog.requests} finished requests "
        f"({backlog.bytes / MB:.0f} MB of raw reads) wait to be parsed (bound {backlog.bound.requests} "
        f"requests / {backlog.bound.bytes / MB:.0f} MB); parsing before reading more, so this run's "
        "pace is set by loadgen's core, not by the server (see client_saturated in the summary)"
    )
