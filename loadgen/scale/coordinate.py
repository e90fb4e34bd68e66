"""The coordinator's live side of a `--workers` run: spawn the workers, forward Ctrl-C / SIGTERM to
them, show one progress line and serve one /metrics (the workers' sum) until the record is written."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

import loadgen.run.annotations as grafana_notes
from loadgen.config import ConfigError, RunConfig
from loadgen.run.metrics_http import MetricsServer, ScrapeWatch
from loadgen.run.metrics_sum import WorkerScrapes
from loadgen.run.progress import Counts, Progress
from loadgen.scale.pinning import CorePlan, pin, usable_cores
from loadgen.workload.shard import ShardPlan

Outcome = tuple[int, int, str]  # (worker index, exit code, run folder or error line)
TICK_S = 0.25
POLL_S = 1.0  # the progress line's partial polls of the workers (and how soon their end is seen)


def died(index: int, pid: int | None, exitcode: int) -> str:
    """How a worker ended without reporting: `worker 1 (pid 4242) killed by SIGKILL`."""
    if exitcode < 0:
        try:
            how = f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"killed by signal {-exitcode}"
    else:
        how = f"exited with code {exitcode}"
    return f"worker {index} (pid {pid}) {how} before writing its record"


class Coordinator:
    """Workers' processes, their summed /metrics and the progress line of one run."""

    def __init__(self, config: RunConfig, run_id: str, progress: bool, cores: CorePlan) -> None:
        self.config, self.run_id, self.cores = config, run_id, cores
        self.progress = Progress(progress)
        self.scrapes = WorkerScrapes()
        self.watch = ScrapeWatch()
        self.server: MetricsServer | None = None
        self.stopping = 0
        self.tags: list[str] = []
        self.text, self.started_ms = "", 0
        self.ann_id: int | None = None

    def serve(self) -> None:
        """The run's one /metrics on --metrics-port (the workers' sum)."""
        if not self.config.metrics_port:
            return
        registry = CollectorRegistry()
        registry.register(self.scrapes)  # type: ignore[arg-type]
        try:
            self.server = MetricsServer(
                registry, self.config.metrics_listen_address, self.config.metrics_port, self.watch
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {self.config.metrics_listen_address} port "
                f"{self.config.metrics_port} ({exc.strerror}): pass another --metrics-port, or 0"
            ) from None

    def run(
        self, main: Callable[..., None], configs: Sequence[RunConfig], plans: Sequence[ShardPlan]
    ) -> list[Outcome]:
        """Start one process per (config, plan), wait for all; returns their outcomes."""
        self.serve()
        self.annotate_start()
        ctx = multiprocessing.get_context("spawn")
        results: Any = ctx.Queue()
        procs = [
            ctx.Process(target=main, args=(c, p, results, core, os.getpid()), daemon=True)
            for c, p, core in zip(configs, plans, self.cores.workers, strict=True)
        ]
        self.scrapes.start([f"http://127.0.0.1:{c.metrics_port}/metrics" for c in configs if c.metrics_port])
        with self._forward_signals(procs):
            for proc in procs:
                proc.start()
            before = usable_cores()
            pin(self.cores.coordinator)  # after the start: the workers' own pins are theirs to set
            start = plans[0].start_at.timestamp() if plans and plans[0].start_at else 0.0
            try:
                outcomes = self._wait(procs, results, start)
            finally:
                pin(before or None)  # the merge and the linger may use every core again
        self.progress.close()
        self.annotate_end()
        return outcomes

    def _wait(self, procs: Sequence[Any], results: Any, start: float) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        polled = 0.0
        while len(outcomes) < len(procs):
            if time.monotonic() - polled >= POLL_S and self.scrapes.urls:
                self.scrapes.poll()  # a few samples per worker; a worker seen ended: its final scrape
                polled = time.monotonic()
            try:
                got = results.get(timeout=TICK_S)
                outcomes[got[0]] = got
            except queue.Empty:
                for i, proc in enumerate(procs):  # a worker killed before reporting
                    if i not in outcomes and proc.exitcode is not None and results.empty():
                        outcomes[i] = (i, 1, died(i, proc.pid, proc.exitcode))
                        self.progress.close()  # the warning on its own line
                        print(
                            f"warning: {outcomes[i][2]}: its journaled requests are merged", file=sys.stderr
                        )
            if time.time() >= start:  # no progress line before the common start
                self.progress.update(self.counts())
        for proc in procs:
            proc.join(timeout=5)
        return [outcomes[i] for i in sorted(outcomes)]

    def counts(self) -> Counts:
        """The progress line's counts from the workers' summed metrics."""
        s = self.scrapes
        total = s.value("loadgen_requests_total")
        ok = s.value("loadgen_requests_total", outcome="ok")
        cancelled = s.value("loadgen_requests_total", outcome="cancelled")
        active = s.value("loadgen_in_flight_requests")
        return Counts(
            int(total - cancelled), self.config.total_requests, int(active), int(total - ok - cancelled)
        )

    @contextlib.contextmanager
    def _forward_signals(self, procs: Sequence[Any]) -> Any:
        """Ctrl-C / SIGTERM go to the workers (each stops and writes a partial record); a third kills."""

        def forward(sig: int, _frame: Any) -> None:
            self.stopping += 1
            for proc in procs:
                if proc.pid is not None and proc.exitcode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL if self.stopping > 2 else sig)

        old = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def annotate_start(self) -> None:
        """The run's one Grafana annotation (the workers make none), when --grafana-url is given."""
        c = self.config
        self.tags = [
            "loadgen",
            f"run_id:{self.run_id}",
            f"target:{c.target}",
            f"scenario:{c.resolved_scenario}",
        ]
        self.started_ms = int(time.time() * 1000)
        self.text = f"loadgen run {self.run_id} ({c.target}, {c.model or 'default model'}, workers)"
        self.ann_id = grafana_notes.annotate_run_start(
            c.grafana_url, c.grafana_token, run_id=self.run_id, tags=self.tags, text=self.text
        )

    def annotate_end(self) -> None:
        """Close the run's annotation (a region from start to now)."""
        c = self.config
        grafana_notes.annotate_run_end(
            c.grafana_url,
            c.grafana_token,
            self.ann_id,
            run_id=self.run_id,
            tags=self.tags,
            text=f"{self.text} ended",
            start_ms=self.started_ms,
            end_ms=int(time.time() * 1000),
        )

    def finish(self, linger_s: float) -> None:
        """Mark the end for the last scrape, keep /metrics up `linger_s` (Ctrl-C ends it), stop."""
        if self.server is None:
            return
        self.watch.mark_end()
        with contextlib.suppress(KeyboardInterrupt):
            time.sleep(linger_s if not self.stopping else 0.0)
        self.server.stop()
        self.server = None
