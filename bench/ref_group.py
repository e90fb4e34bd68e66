"""The reference server (bench.refbench) behind bench.scaling's ServerGroup interface: one refserver
process with `-procs N` on N pinned cores in place of N SO_REUSEPORT FastServers.

`dump()` ends the server (its log is written at exit), returns the truth (X-Request-Id -> the send
time of each token, CLOCK_MONOTONIC ns; the first and last token only, unless `log_tokens`) and starts
a fresh one, so every point starts with an idle server. `cpu()` is the server's CPU seconds divided by
its cores, so bench.scaling's "busiest server" share reads as the share of the server's cores in use.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.refbench import RefServer, Tools


class RefServerGroup:
    """A context manager with ServerGroup's `url`, `split`, `cpu()` and `dump()`."""

    def __init__(
        self, tools: Tools, cpus: Sequence[int], ttft_s: float, itl_s: float, log_tokens: bool = False
    ) -> None:
        self.tools, self.cpus = tools, list(cpus)
        self.ttft_ms, self.tpot_ms, self.log_tokens = ttft_s * 1e3, itl_s * 1e3, log_tokens
        self.server: RefServer | None = None
        self.split: list[int] = []
        self.url = ""

    def _start(self) -> None:
        self.server = RefServer(self.tools, self.cpus, self.ttft_ms, self.tpot_ms, self.log_tokens).start()
        self.url = self.server.url

    def __enter__(self) -> RefServerGroup:
        self._start()
        return self

    def cpu(self) -> list[float]:
        """The server's CPU seconds so far over its core count (one figure: one process)."""
        return [self.server.cpu() / len(self.cpus)] if self.server else [0.0]

    def dump(self) -> dict[str, list[int]]:
        """The truth so far (see module docstring); the server is replaced by a fresh one."""
        assert self.server is not None
        log = self.server.stop()
        self.server.__exit__()
        truth = log.truth()
        self.split = [len(truth)]
        self._start()
        return truth

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.stop()
            self.server.__exit__()
            self.server = None
