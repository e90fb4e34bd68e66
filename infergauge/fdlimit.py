"""The open-files limit of a process that holds one socket per stream (loadgen, the simulated engine).

Each stream in flight costs a descriptor on each side, and the usual soft limit (1,024, or whatever a
service manager set) is far below what a run at 1,000 req/s with multi-second streams holds.
`raise_open_files_limit()` lifts the soft limit to the hard one at start (an unprivileged process may);
`FdLimitWatch` says, once, when the limit binds anyway (EMFILE/ENFILE from accept or connect), with
the limit in force and how to raise it, instead of a bare `Errno 24` per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import resource
import sys
from typing import Any, TextIO

EXHAUSTED = (errno.EMFILE, errno.ENFILE)


def raise_open_files_limit() -> tuple[int, int]:
    """Set the soft RLIMIT_NOFILE to the hard one (bounded by the kernel's nr_open when the hard limit
    is unlimited); returns (soft, hard) in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as fh:
                want = int(fh.read())
        except (OSError, ValueError):
            want = max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft, hard
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def limit_line(who: str) -> str:
    """One line naming the limit in force and how to raise it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    shown = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    return (
        f"warning: {who} ran out of file descriptors (open-files limit {soft}, hard limit {shown}): "
        "connections are refused until streams finish; raise the hard limit "
        "(ulimit -Hn, systemd LimitNOFILE=, docker --ulimit nofile=) or lower the load"
    )


def is_exhausted(exc: BaseException | None) -> bool:
    """True for the error of a process (EMFILE) or system (ENFILE) out of descriptors."""
    return isinstance(exc, OSError) and exc.errno in EXHAUSTED


class FdLimitWatch:
    """An event-loop exception handler that says once when the descriptor limit binds (see module
    docstring); every other error goes to the handler that was there before."""

    def __init__(self, who: str, out: TextIO | None = None) -> None:
        self.who, self.out, self.said = who, out, False
        self._before: Any = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Become the loop's exception handler (keeping the one before it for other errors)."""
        self._before = loop.get_exception_handler()
        loop.set_exception_handler(self)

    def note(self, exc: BaseException | None) -> bool:
        """Say the limit binds (once) when `exc` says so; True when it did."""
        if not is_exhausted(exc):
            return False
        if not self.said:
            self.said = True
            print(limit_line(self.who), file=self.out or sys.stderr, flush=True)
        return True

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if self.note(exc):
            return
        if self.said and isinstance(exc, ValueError) and "file descriptor: -1" in str(exc):
            return  # asyncio's accept retry after EMFILE, run once the server has closed: harmless
        if self._before is not None:
            self._before(loop, context)
        else:
            loop.default_exception_handler(context)
