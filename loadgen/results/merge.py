"""Merge shard records into one run: request lines on one time base (ns after the common start),
every request once in index order, the summary computed by the same code as a single run's over the
union (percentiles exact, not averaged), fingerprints checked, missing or failed shards named.

Each shard wrote its times relative to its own start, which every shard mapped to the one
`--start-at` through its host's wall clock; the merged `*_ns` fields are those times in ns after the
common start, so the record's spans (duration, achieved rate) are measured across shards."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from loadgen.records import RequestRecord
from loadgen.results.prompt_cache import merged_cache_facts
from loadgen.results.record import Written, write_run
from loadgen.results.rundir import line_text
from loadgen.results.shard_record import MergeError, ShardRecord, check_one_run, shortfalls
from loadgen.results.summary import achieved_rate, record_from_line
from loadgen.stats import NS, describe, summarize
from loadgen.workload.shard import schedule_fingerprint

NS_FIELDS = ("sent_ns", "first_token_ns", "last_token_ns")


@dataclass(frozen=True)
class Merged:
    """One merged run: its manifest, summary and index-ordered records and line texts."""

    run_id: str
    manifest: dict[str, Any]
    summary: dict[str, Any]
    records: list[RequestRecord]
    lines: dict[int, str]


def rebased(line: dict[str, Any]) -> dict[str, Any]:
    """A request line with its raw `*_ns` times moved to ns after the common start (its shard's start
    is sent_ns - sent_s; the relative `*_s` times already count from there)."""
    start_ns = int(line["sent_ns"]) - round(line["sent_s"] * NS)
    out = dict(line)
    for key in NS_FIELDS:
        if out.get(key) is not None:
            out[key] = int(out[key]) - start_ns
    return out


def first_send_lags(shards: Sequence[ShardRecord]) -> dict[int, float | None]:
    """Per shard: its first request's send minus its scheduled send (s), i.e. how late it started
    against the common start, each host reading the start through its own clock."""
    out: dict[int, float | None] = {}
    for shard in shards:
        sent = [x for x in shard.lines if x.get("sent_ns")]
        first = min(sent, key=lambda x: x["index"], default=None)
        out[shard.index] = None if first is None else first["sent_s"] - first["scheduled_s"]
    return out


def skew_facts(shards: Sequence[ShardRecord]) -> dict[str, Any]:
    """The measured skew between shards: first-send lags, their spread, and each host's clock facts."""
    lags = first_send_lags(shards)
    known = [v for v in lags.values() if v is not None]
    return {
        "first_send_lag_s": {str(k): v for k, v in sorted(lags.items())},
        "spread_s": (max(known) - min(known)) if known else None,
        "clocks": {str(s.index): s.shard.get("clock") for s in shards},
    }


def merge(shards: Sequence[ShardRecord], causes: dict[int, str] | None = None) -> Merged:
    """Merge checked shard records (MergeError when they are not one run; see shard_record);
    `causes` says why a shard is not whole where the caller knows better (a worker killed by a signal)."""
    shards = sorted(shards, key=lambda s: s.index)
    check_one_run(shards)
    lines = sorted((rebased(x) for s in shards for x in s.lines), key=lambda x: x["index"])
    records = [record_from_line(x) for x in lines]
    missing = {**shortfalls(shards), **(causes or {})}
    base = shards[0]
    shard = base.shard
    complete = not missing
    merged_schedule = schedule_fingerprint([round(x["scheduled_s"] * NS) for x in lines])
    if complete and merged_schedule != shard["run_schedule_fingerprint"]:
        raise MergeError(
            f"the merged schedule {merged_schedule} is not the run's {shard['run_schedule_fingerprint']}"
        )
    reason = (
        None if complete else "shards not whole: " + "; ".join(f"{i} {why}" for i, why in missing.items())
    )
    section = {
        "count": shard["count"],
        "assignment": shard["assignment"],
        "start_at": shard["start_at"],
        "merged": [s.index for s in shards],
        "not_whole": {str(i): why for i, why in missing.items()},
        "run_fingerprint": shard["run_fingerprint"],
        "run_schedule_fingerprint": shard["run_schedule_fingerprint"],
        "skew": skew_facts(shards),
        "records": {str(s.index): str(s.path) for s in shards},
    }
    times = _span(shards)
    summary = _summary(shards, records, times, reason, section)
    manifest = _manifest(base, shards, times, reason, section, len(lines), merged_schedule, complete)
    manifest["cache"] = {**manifest["cache"], **summary["cache"]}
    texts = {int(x["index"]): line_text(x) for x in lines}
    return Merged(base.typed.run_id, manifest, summary, records, texts)


def _span(shards: Sequence[ShardRecord]) -> tuple[str, str]:
    """(earliest start, latest end) of the shards, as written."""
    starts = [str(s.summary.get("started_at") or s.typed.started_at) for s in shards]
    ends = [str(s.summary.get("ended_at") or s.typed.ended_at or "") for s in shards]
    return min(starts, key=_when), max(ends, key=_when)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else datetime.min.astimezone()


CACHE_KEPT = ("flushed", "method", "detail")


def total_concurrency(shards: Sequence[ShardRecord]) -> int | None:
    """The run's --max-concurrency: the sum of the shards' caps (None when any shard had none)."""
    caps = [s.typed.config.get("max_concurrency") for s in shards]
    known = [int(c) for c in caps if c is not None]
    return sum(known) if len(known) == len(caps) else None


def _summary(
    shards: Sequence[ShardRecord],
    records: list[RequestRecord],
    times: tuple[str, str],
    reason: str | None,
    section: dict[str, Any],
) -> dict[str, Any]:
    base = shards[0]
    cfg = base.typed.config
    head = {
        k: base.summary.get(k) for k in ("run_id", "target", "engine", "model", "scenario", "experiment_id")
    }
    head.update(
        partial=reason is not None,
        partial_reason=reason,
        started_at=times[0],
        ended_at=times[1],
        asked_rate=base.summary.get("asked_rate"),
        achieved_rate=achieved_rate(records),
        max_concurrency=total_concurrency(shards),
        peak_in_flight=None,  # each shard saw its own peak; their sum is only an upper bound
    )
    lag = section["skew"]["first_send_lag_s"]
    facts = {**section, "first_send_lag_s": describe(v for v in lag.values() if v is not None)}
    saturation = client_saturation(shards)
    extra = {"client_saturated": saturation} if saturation is not None else {}
    stalls = [s.summary["host_stalls"] for s in shards if s.summary.get("host_stalls")]
    if stalls:  # each shard's loop stalled on its own: counts add up, the longest is the worst
        extra["host_stalls"] = {
            **{k: sum(x[k] for x in stalls) for k in ("count", "total_s", "requests_affected")},
            "max_s": max(x["max_s"] for x in stalls),
            "threshold_s": stalls[0]["threshold_s"],
        }
    cpu = merged_client_cpu(
        {str(s.index): s.summary["client_cpu"] for s in shards if s.summary.get("client_cpu")}
    )
    if cpu is not None:
        extra["client_cpu"] = cpu
    stats = summarize(records, cfg.get("slo") or {})
    extra["cache"] = merged_cache_facts(records, stats["total_input_tokens"])
    return {**head, **stats, **extra, "shards": facts}


def merged_client_cpu(shards: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """A `--workers` run's `client_cpu` (loadgen.run.client_cpu) from its shards' (by shard index): CPU
    and cores summed (the workers ran side by side), per request over every shard's requests, and each
    shard's own."""
    if not shards:
        return None
    values = list(shards.values())
    load = sum(v.get("load_s") or 0.0 for v in values)
    requests = sum(v.get("requests") or 0 for v in values)
    cores = [v["load_cores"] for v in values if v.get("load_cores") is not None]
    out = {
        "load_s": round(load, 6),
        "load_ms_per_request": round(load * 1e3 / requests, 6) if requests else None,
        "load_cores": round(sum(cores), 4) if cores else None,
        "total_s": round(sum(v.get("total_s") or 0.0 for v in values), 6),
        "requests": requests,
    }
    if any("embedded_engine_s" in v for v in values):
        out["embedded_engine_s"] = round(sum(v.get("embedded_engine_s") or 0.0 for v in values), 6)
    return {**out, "shards": shards}


def client_saturation(shards: Sequence[ShardRecord]) -> dict[str, Any] | None:
    """The run's `client_saturated`: the worst shard's figures (longest time saturated, highest peak,
    episodes summed), saturated when any shard's client was, and each shard's own under `shards`."""
    per = {str(s.index): s.summary["client_saturated"] for s in shards if s.summary.get("client_saturated")}
    if not per:
        return None  # shards from before the backlog was bounded, or crashed ones
    values = list(per.values())
    worst = {key: max(v.get(key) or 0 for v in values) for key in ("saturated_s", "peak_backlog_requests")}
    return {
        "saturated": any(v.get("saturated") for v in values),
        **worst,
        "episodes": sum(v.get("episodes") or 0 for v in values),
        "peak_backlog_mb": max(v.get("peak_backlog_mb") or 0.0 for v in values),
        "bound_requests": values[0].get("bound_requests"),
        "bound_mb": values[0].get("bound_mb"),
        "shards": per,
    }


def _manifest(
    base: ShardRecord,
    shards: Sequence[ShardRecord],
    times: tuple[str, str],
    reason: str | None,
    section: dict[str, Any],
    sent: int,
    merged_schedule: str,
    complete: bool,
) -> dict[str, Any]:
    manifest = copy.deepcopy(base.manifest)
    manifest.pop("shard", None)
    manifest.pop("crashed", None)
    manifest.update(status="complete", partial=reason is not None, partial_reason=reason)
    manifest.update(started_at=times[0], ended_at=times[1], shards=section)
    manifest["clients"] = {str(s.index): s.typed.raw.get("client") for s in shards}
    # the flush facts; not shard 0's counters and bound (merge() adds the merged run's figures)
    manifest["cache"] = {k: v for k, v in (manifest.get("cache") or {}).items() if k in CACHE_KEPT}
    if isinstance(manifest.get("config"), dict):  # the run's cap, not shard 0's share of it
        manifest["config"]["max_concurrency"] = total_concurrency(shards)
    workload = manifest["workload"]
    # the sequence sent: the whole run's when every slice was sent whole; unknown (None) otherwise,
    # since a merge has the shards' fingerprints, not their prompts
    workload.update(
        fingerprint=section["run_fingerprint"] if complete else None,
        schedule_fingerprint=merged_schedule,
        num_requests=sent,
    )
    return manifest


def write_merged(results_dir: str | Path, merged: Merged, inputs: Sequence[Path]) -> Written:
    """Write the merged run under `results_dir/<run_id>/` and its runs.csv row (never over a shard)."""
    target = (Path(results_dir) / merged.run_id).resolve()
    for path in inputs:
        if path.resolve() == target:
            raise MergeError(f"--results-dir {str(results_dir)!r} would overwrite shard record {str(path)!r}")
    return write_run(
        Path(results_dir), merged.run_id, merged.manifest, merged.summary, merged.records, 0, merged.lines
    )
