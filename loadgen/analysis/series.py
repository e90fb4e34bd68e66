"""Group stored runs into series (one curve per engine/variant/workload) for reports and charts."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadgen.analysis.points import Point, mean_point, point_from_summary
from loadgen.results.run_fields import engine_name, resolve_params
from loadgen.results.rundir import RunRecord
from loadgen.results.summary import iter_lines

NS = 1e9
LABEL_PARAMS = ("tensor_parallel_size", "max_num_seqs")


@dataclass
class Series:
    """Runs of one engine configuration under one workload, ordered by offered load."""

    label: str
    kind: str  # "concurrency" | "rate"
    records: list[RunRecord] = field(default_factory=list)

    def points(self) -> list[Point]:
        """One Point per load, sorted by load; repetitions at a load are averaged (mean_point)."""
        by_load: dict[float, list[Point]] = {}
        for r in self.records:
            load = run_load(r, self.kind)
            by_load.setdefault(load, []).append(point_from_summary(r.summary, load, self.kind))
        return [mean_point(by_load[load]) for load in sorted(by_load)]

    def records_at(self, load: float) -> list[RunRecord]:
        """The runs of this series at one load."""
        return [r for r in self.records if run_load(r, self.kind) == load]


def load_kind(record: RunRecord) -> str:
    """`concurrency` when the run was bounded by concurrency at an infinite rate, else `rate`."""
    rate = record.summary.get("asked_rate")
    if record.summary.get("max_concurrency") and rate in (None, "inf", float("inf")):
        return "concurrency"
    return "rate"


def run_load(record: RunRecord, kind: str) -> float:
    """The run's offered load of the given kind (0 when unknown)."""
    key = "max_concurrency" if kind == "concurrency" else "asked_rate"
    value = record.summary.get(key)
    try:
        return float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def series_label(record: RunRecord) -> str:
    """Phase, engine (plan engine name, else engine/target), variant (or, for runs outside an
    experiment, TP and max_num_seqs) and workload; engine and parameters by the rules runs.csv and
    `loadgen diff` read them by (loadgen.results.run_fields)."""
    m = record.typed
    exp = m.experiment
    engine = (
        (exp.engine if exp else None)
        or engine_name(m)
        or record.summary.get("engine")
        or record.summary.get("target")
        or "engine"
    )
    parts = [f"{exp.phase}: {engine}" if exp and exp.phase else str(engine)]
    if exp and exp.variant not in (None, "default", "base"):
        parts.append(str(exp.variant))
    if exp is None:  # runs outside an experiment: tell configurations apart by their key parameters
        # the one rule `loadgen diff` reads a parameter by (an unknown or `auto` value is no value)
        params = resolve_params(m)[0]
        parts += [f"{key}={params[key]}" for key in LABEL_PARAMS if params.get(key) is not None]
    workload = (exp.workload if exp else None) or record.summary.get("scenario")
    if workload:
        parts.append(str(workload))
    return " · ".join(parts)


def group_series(records: list[RunRecord]) -> list[Series]:
    """Group runs by (label, load kind), keeping first-seen order; a configuration measured both by
    rate and by concurrency gets two names (`... · rate`, `... · concurrency`), not one twice."""
    groups: dict[tuple[str, str], Series] = {}
    for record in records:
        kind = load_kind(record)
        key = (series_label(record), kind)
        groups.setdefault(key, Series(key[0], kind)).records.append(record)
    kinds: dict[str, int] = {}
    for label, _kind in groups:
        kinds[label] = kinds.get(label, 0) + 1
    for (label, kind), series in groups.items():
        if kinds[label] > 1:
            series.label = f"{label} · {kind}"
    return list(groups.values())


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    """The measured ok request lines, through the one requests.jsonl reader (a torn line is skipped)."""
    for row in iter_lines(path):
        if row.get("outcome") == "ok" and not row.get("warmup"):
            yield row


def request_latencies(path: Path) -> tuple[list[float], list[float]]:
    """(TTFT seconds, TPOT seconds) of the measured ok requests in a requests.jsonl (its `ttft_s` and
    `tpot_s`, else computed from `sent_ns`/`first_token_ns`/`last_token_ns` and `output_tokens`)."""
    ttft, tpot = [], []
    for row in _rows(path):
        first_s, per_token_s = row.get("ttft_s"), row.get("tpot_s")
        sent, first, last = row.get("sent_ns"), row.get("first_token_ns"), row.get("last_token_ns")
        tokens = int(row.get("output_tokens") or 0)
        if first_s is None and isinstance(sent, int) and isinstance(first, int):
            first_s = (first - sent) / NS
        if per_token_s is None and isinstance(first, int) and isinstance(last, int) and tokens >= 2:
            per_token_s = (last - first) / NS / (tokens - 1)
        if isinstance(first_s, int | float):
            ttft.append(float(first_s))
        if isinstance(per_token_s, int | float):
            tpot.append(float(per_token_s))
    return ttft, tpot
