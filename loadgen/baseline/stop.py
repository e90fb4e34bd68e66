"""Stopping `baseline schedule` with SIGTERM or SIGINT: the run in flight is recorded, then it exits.

During a run, the run's own handlers stop it and write its record (partial, `interrupted by SIGTERM`),
which the pass stores; outside a run (an engine starting, the check, the wait for the next pass) the
handlers installed here raise KeyboardInterrupt. Either way the pass ends with `PassInterrupted`,
which the scheduler does not count as a failed pass and does not survive: the command exits 0 on
SIGTERM (a service manager asked it to stop) and 130 on SIGINT (Ctrl-C).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

A = TypeVar("A")
R = TypeVar("R")
EXIT_CODES = {"SIGTERM": 0, "SIGINT": 130}


class PassInterrupted(BaseException):
    """A pass stopped by a signal (not an Exception: the scheduler's failed-pass handler lets it by)."""

    def __init__(self, reason: str, signal_name: str | None = None) -> None:
        super().__init__(reason)
        self.signal_name = signal_name or ("SIGTERM" if "SIGTERM" in reason else "SIGINT")


class StopSignals:
    """Records which of SIGTERM / SIGINT arrived and raises KeyboardInterrupt outside a run."""

    def __init__(self) -> None:
        self.received: str | None = None

    def install(self) -> None:
        """(Re)install the handlers: a run's event loop resets them to the defaults when it ends."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handler)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.received = signal.Signals(signum).name
        raise KeyboardInterrupt

    def around(self, fn: Callable[[A], R]) -> Callable[[A], R]:
        """`fn` (a run) after which the handlers are installed again; a run that a signal stopped
        says which in its summary's `partial_reason` (`interrupted by SIGTERM`), kept here."""

        def call(arg: A) -> R:
            try:
                result = fn(arg)
            finally:
                self.install()
            reason = str((getattr(result, "summary", None) or {}).get("partial_reason") or "")
            for name in EXIT_CODES:
                if reason.startswith(f"interrupted by {name}"):
                    self.received = self.received or name
            return result

        return call

    def signal_name(self, exc: BaseException) -> str:
        """Which signal stopped it: the handler's, else the one the run's partial reason names."""
        return self.received or (exc.signal_name if isinstance(exc, PassInterrupted) else "SIGINT")

    def exit_code(self, exc: BaseException) -> int:
        """0 for SIGTERM, 130 for SIGINT."""
        return EXIT_CODES.get(self.signal_name(exc), 130)
