"""Run one load point for sweeps and capacity searches: same workload and seed, fresh cache."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from loadgen.analysis.points import Point, point_from_summary
from loadgen.config import ConfigError, RunConfig
from loadgen.experiments.runner import RunFn, flush_external
from loadgen.experiments.state import DONE, ExperimentState


def parse_loads(text: str, kind: str) -> list[float]:
    """`1,8,16` -> [1.0, 8.0, 16.0]; concurrency must be positive integers, rates positive numbers."""
    out = []
    for part in text.split(","):
        raw = part.strip()
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"invalid {kind} {raw!r}: expected a comma-separated list of numbers") from None
        if not math.isfinite(value) or value <= 0 or (kind == "concurrency" and value != int(value)):
            need = "positive integers" if kind == "concurrency" else "positive finite numbers"
            raise ConfigError(f"invalid {kind} {raw!r}: values must be {need}")
        out.append(value)
    if len(set(out)) != len(out):
        raise ConfigError(f"invalid {kind} list {text!r}: repeated value")
    return sorted(out)


def config_at(base: RunConfig, kind: str, load: float, extra: dict[str, Any]) -> RunConfig:
    """The base config at one load: concurrency at an infinite rate, or a request rate."""
    fields: dict[str, Any] = (
        {"max_concurrency": int(load), "rate": math.inf} if kind == "concurrency" else {"rate": load}
    )
    return dataclasses.replace(base, **fields, extra_manifest={**base.extra_manifest, **extra})


def clear_cache(config: RunConfig) -> dict[str, Any]:
    """The embedded simulator starts fresh for every run; other targets get their prefix cache flushed."""
    if config.target == "sim" and not config.base_url:
        return {"flushed": True, "method": "restart", "detail": "embedded simulated engine started fresh"}
    base_url = (config.base_url or _default_url(config.target)).rstrip("/")
    return flush_external(config.target, base_url)


def _default_url(target: str) -> str:
    from loadgen.targets import get_target

    return get_target(target).default_base_url or ""


def make_measure(
    base: RunConfig,
    kind: str,
    state: ExperimentState,
    run_fn: RunFn,
    what: str,
    log: Callable[[str], None],
    slo: tuple[str, ...] = (),
) -> Callable[[float], Point]:
    """A `measure(load) -> Point` that runs the load, records it in the state, and returns its figures;
    `slo` (objective specs, `e2e_p99=500ms`) goes into each run's `experiment` block, where
    `loadgen report` finds it."""

    def measure(load: float) -> Point:
        key = f"{what}/{kind}={load:g}"
        cache = clear_cache(base)
        experiment = {"id": state.experiment_id, "kind": what, "key": key, kind: load, "load_kind": kind}
        if slo:
            experiment["slo"] = list(slo)
        config = config_at(base, kind, load, {"cache": cache, "experiment": experiment})
        log(f"{what}: {kind} {load:g} ...")
        result = run_fn(config)
        state.record(
            key,
            status=DONE,
            run_id=result.run_id,
            partial=result.partial,
            cache=cache,
            result_dir=str(result.result_dir),
        )
        if result.partial and str(result.summary.get("partial_reason") or "").startswith("interrupted"):
            raise KeyboardInterrupt
        return point_from_summary(result.summary, load, kind)

    return measure
