"""Seeded fault injection for reliability tests: errors, stalls, dropped connections, corrupt chunks.

Off by default. Each request draws its faults at arrival from one seeded RNG, so the same seed and the
same arrival order give the same faults.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestFaults:
    """What goes wrong with one request; positions are 1-based output token numbers."""

    error: bool = False
    stall_at: int = 0
    disconnect_at: int = 0
    malformed_at: int = 0

    @property
    def any_stream_fault(self) -> bool:
        return bool(self.stall_at or self.disconnect_at or self.malformed_at)


NO_FAULTS = RequestFaults()


class FaultInjector:
    """Draws `RequestFaults` for each request from the configured rates."""

    def __init__(
        self,
        seed: int,
        *,
        error_rate: float = 0.0,
        stall_ms: float = 0.0,
        stall_rate: float = 1.0,
        disconnect_rate: float = 0.0,
        malformed_rate: float = 0.0,
    ) -> None:
        self.rng = random.Random(seed ^ 0x5EED_FA17)
        self.error_rate = error_rate
        self.stall_ms = stall_ms
        self.stall_rate = stall_rate if stall_ms > 0 else 0.0
        self.disconnect_rate = disconnect_rate
        self.malformed_rate = malformed_rate
        self.enabled = any((error_rate, self.stall_rate, disconnect_rate, malformed_rate))

    def draw(self, output_len: int) -> RequestFaults:
        """Faults for a request that will produce `output_len` tokens (mid-stream = half way)."""
        if not self.enabled:
            return NO_FAULTS
        mid = max(1, output_len // 2)
        r = self.rng.random
        return RequestFaults(
            error=r() < self.error_rate,
            stall_at=mid if r() < self.stall_rate else 0,
            disconnect_at=mid if r() < self.disconnect_rate else 0,
            malformed_at=mid if r() < self.malformed_rate else 0,
        )
