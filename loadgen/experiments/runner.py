"""Run an experiment plan: engine lifecycle, cache clearing between runs, state for resuming.

Between runs a launched engine is restarted (or, with `restart_between_runs: false`, has its
prefix cache flushed) and an external engine has its prefix cache flushed (SGLang
`POST /flush_cache`, vLLM `POST /reset_prefix_cache`); each run's manifest says what was done in
`cache` and marks `flushed: false` when the cache could not be cleared. Before each run a kept
launched engine is checked (process alive, health path 200); a dead one is relaunched once
(`on_engine_failure: relaunch`, the default) or fails the rest of its runs (`fail`), or stops the
plan (`stop`). An engine that never becomes healthy fails its runs.
Ctrl-C stops after saving state: finished runs are kept and `loadgen experiment resume` goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from infergauge.engines.params import parse_cmdline
from infergauge.redact import redact_argv, redact_mapping
from loadgen.config import ConfigError, RunConfig
from loadgen.experiments.expand import RunSpec, build_config, effective_warmup, expand, warmup_warnings
from loadgen.experiments.launch import EngineFailed, LaunchedEngine
from loadgen.experiments.plantypes import EngineSpec, Plan
from loadgen.experiments.state import DONE, ExperimentState
from loadgen.records import RunResult
from loadgen.results.manifest_schema import read_manifest
from loadgen.run.runner import run_benchmark_sync
from loadgen.targets import get_target
from loadgen.targets.cache_counters import cache_warning

RunFn = Callable[[RunConfig], RunResult]
Log = Callable[[str], None]


class ExperimentInterrupted(Exception):
    """Ctrl-C during an experiment: state is saved, finished runs kept."""


class ExperimentStopped(Exception):
    """An engine failed and the plan says `on_engine_failure: stop`."""


@dataclass
class _Active:
    """The engine currently serving runs: which group it was started for, and its handle."""

    group: tuple[str, str, str]
    engine: LaunchedEngine | None
    base_url: str
    runs_served: int = 0


FLUSH_ATTEMPTS = 3
FLUSH_RETRY_S = 0.5


def flush_external(target: str, base_url: str) -> dict[str, Any]:
    """Flush an engine's prefix cache over HTTP; the manifest's `cache` section. SGLang refuses a
    flush while requests are still running (e.g. the tail of a cancelled run), so a refused flush is
    retried a few times before the run is marked as not cleared."""

    async def _flush() -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            for attempt in range(1, FLUSH_ATTEMPTS + 1):
                result = await get_target(target).flush_cache(session, base_url)
                if result.ok or result.method == "none" or attempt == FLUSH_ATTEMPTS:
                    break
                await asyncio.sleep(FLUSH_RETRY_S)
        detail = result.detail + (f" (attempt {attempt})" if attempt > 1 else "")
        return {"flushed": result.ok, "method": result.method, "detail": detail}

    return asyncio.run(_flush())


def launched_engine_facts(argv: list[str]) -> dict[str, Any]:
    """The redacted launch command and its parsed args, for the manifest's `engine` section: the run's
    one resolution of `params` reads `launch_args` as the engine's command line (vLLM does not
    report its flags over HTTP), the engine's HTTP answers filling what the command left out."""
    family, args = parse_cmdline(argv)
    facts: dict[str, Any] = {"launch_command": redact_argv(argv)}
    if family is not None:
        facts["launch_args"] = redact_mapping(args)
    return facts


class ExperimentRunner:
    """Runs every not-yet-finished run of a plan, in order."""

    def __init__(
        self,
        plan: Plan,
        state: ExperimentState,
        *,
        run_fn: RunFn = run_benchmark_sync,
        log: Log = print,
        api_key: str | None = None,
    ) -> None:
        self.plan, self.state, self.run_fn, self.log = plan, state, run_fn, log
        self.api_key = api_key
        self.active: _Active | None = None
        self.failed_groups: dict[tuple[str, str, str], str] = {}
        self.relaunched: set[tuple[str, str, str]] = set()

    def run(self) -> ExperimentState:
        """Execute the plan; raises ExperimentInterrupted / ExperimentStopped after saving state."""
        self.state.status = "running"
        self.state.save()
        for warning in warmup_warnings(self.plan, expand(self.plan)):
            self.log(f"warning: {warning}")
        try:
            for spec in expand(self.plan):
                if self.state.done(spec.key):
                    continue
                self._one(spec)
            self.state.status = "done"
        except (KeyboardInterrupt, ExperimentInterrupted):
            self.state.status = "interrupted"
            raise ExperimentInterrupted(self._resume_hint()) from None
        except ExperimentStopped:
            self.state.status = "stopped"
            raise
        finally:
            self._stop_active()
            self.state.save()
        return self.state

    def _resume_hint(self) -> str:
        done = len(self.state.run_ids())
        return (
            f"experiment {self.state.experiment_id} interrupted after {done} finished runs; "
            f"continue with: loadgen experiment resume {self.state.experiment_id} "
            f"--results-dir {self.plan.results_dir}"
        )

    def _one(self, spec: RunSpec) -> None:
        group = (spec.phase, spec.engine, spec.variant)
        if group in self.failed_groups:
            self.state.record(spec.key, status="failed", error=self.failed_groups[group])
            return
        engine = self.plan.engines[spec.engine]
        try:
            base_url, cache = self._prepare(spec, engine, group)
        except EngineFailed as exc:
            self._engine_failed(spec, group, str(exc))
            return
        self._execute(spec, engine, base_url, cache)

    def _engine_failed(self, spec: RunSpec, group: tuple[str, str, str], error: str) -> None:
        self.log(f"error: {error}")
        self.state.record(spec.key, status="failed", error=error)
        if self.plan.on_engine_failure == "stop":
            raise ExperimentStopped(f"{error} (on_engine_failure: stop)")
        self.failed_groups[group] = f"not run: {error}"

    def _prepare(self, spec: RunSpec, engine: EngineSpec, group: tuple[str, str, str]) -> tuple[str, dict]:
        if engine.kind == "external":
            assert engine.base_url is not None
            self._stop_active()  # never leave a launched engine holding the GPU meanwhile
            return engine.base_url.rstrip("/"), self._flush(engine, engine.base_url.rstrip("/"))
        reuse = self.active is not None and self.active.group == group and not engine.restart_between_runs
        if reuse and self.active is not None:
            dead = self.active.engine.check() if self.active.engine is not None else None
            if dead is None:
                return self.active.base_url, self._flush(engine, self.active.base_url)
            self._relaunch_or_fail(group, dead)
        self._stop_active()
        log = self.state.directory / f"engine-{spec.engine}.log"
        launched = LaunchedEngine(engine, spec.params, log, self.api_key)
        self.log(f"starting engine {spec.engine} ({spec.variant})")
        try:
            base_url = launched.start()
        except BaseException:  # Ctrl-C while waiting for health must not leave it running
            launched.stop()
            raise
        self.active = _Active(group, launched, base_url)
        detail = f"engine launched fresh: {' '.join(redact_argv(launched.argv))}"
        cache = {"flushed": True, "method": "restart", "detail": detail}
        return base_url, cache

    def _relaunch_or_fail(self, group: tuple[str, str, str], dead: str) -> None:
        """A kept engine found dead before a run: relaunch it once (on_engine_failure: relaunch)."""
        self._stop_active()
        if self.plan.on_engine_failure != "relaunch" or group in self.relaunched:
            raise EngineFailed(dead)
        self.relaunched.add(group)
        self.log(f"warning: {dead}; relaunching it (on_engine_failure: relaunch)")

    def _flush(self, engine: EngineSpec, base_url: str) -> dict[str, Any]:
        if not engine.flush_cache:
            return {"flushed": False, "method": "none", "detail": "flush_cache: false in the plan"}
        cache = flush_external(engine.target, base_url)
        if not cache["flushed"]:
            self.log(f"warning: prefix cache of {engine.name} not cleared: {cache['detail']}")
        return cache

    def _execute(self, spec: RunSpec, engine: EngineSpec, base_url: str, cache: dict[str, Any]) -> None:
        experiment = {
            "id": self.state.experiment_id,
            "name": self.plan.name,
            "key": spec.key,
            "slo": list(self.plan.slo),
            **spec.point(),
        }
        extra: dict[str, Any] = {"cache": cache, "experiment": experiment}
        if self.active is not None and self.active.engine is not None and engine.kind == "launch":
            extra["engine"] = launched_engine_facts(self.active.engine.argv)
        if cache.get("flushed") is True and engine.warmup_after_launch:  # a fresh or emptied engine
            spec = dataclasses.replace(
                spec, settings={**spec.settings, "warmup": effective_warmup(self.plan, spec)}
            )
        config = build_config(
            spec,
            target=engine.target,
            base_url=base_url,
            results_dir=self.plan.results_dir,
            experiment_id=self.state.experiment_id,
            extra_manifest=extra,
            api_key=self.api_key,
        )
        self.log(f"run {spec.key}")
        try:
            result = self.run_fn(config)
        except ConfigError as exc:  # e.g. target unreachable: a failed run, the plan goes on
            self.state.record(spec.key, status="failed", error=str(exc), cache=cache)
            self.log(f"error: run {spec.key}: {exc}")
            return
        warning = cache_warning(result.run_id, read_manifest(result.manifest).cache.raw)
        if warning:
            self.log(warning)
        reason = str(result.summary.get("partial_reason") or "")
        if result.partial and reason.startswith("interrupted"):
            self.state.record(spec.key, status="interrupted", run_id=result.run_id, cache=cache)
            raise ExperimentInterrupted(reason)
        self.state.record(
            spec.key,
            status=DONE,
            run_id=result.run_id,
            partial=result.partial,
            partial_reason=reason or None,
            cache=cache,
            result_dir=str(result.result_dir),
        )

    def _stop_active(self) -> None:
        if self.active is not None and self.active.engine is not None:
            self.active.engine.stop()
        self.active = None
