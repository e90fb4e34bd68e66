"""An engine's own metrics as data: each role's metric with its kind and unit, and the neutral roles.

An engine file maps roles to its metrics (`"ttft": histogram("vllm:time_to_first_token_seconds")`);
the dashboard and rule generator (`python -m grafana.dashgen`) reads these and nothing else, so a
new engine's metrics reach the engine dashboard, the engine-neutral recording rules
(`engine:running_requests`, ...), the engine alerts and the scrape jobs from its one file.

A neutral role (`ROLES`) means the same thing on every engine and feeds one recording rule, named
by its kind: a gauge `<record>`, a counter `<record>:rate1m` (per second over 1 m), a histogram
`<record>:p99_1m`. Other roles (an engine's extras, e.g. SGLang's `cache_hit_rate`) reach only
that engine's dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("counter", "gauge", "histogram", "info")


@dataclass(frozen=True)
class Metric:
    """One metric of an engine's /metrics standing for a role: its name, kind and unit."""

    name: str
    kind: str  # one of KINDS
    unit: str = ""  # seconds | tokens | requests | ratio | tokens/s | "" (a plain count)
    title: str = ""  # the panel title (the role's title when empty)
    help: str = ""  # a panel description
    split_by: str | None = None  # a label worth one series each (vLLM's finished_reason)


def counter(
    name: str, unit: str = "", title: str = "", help: str = "", split_by: str | None = None
) -> Metric:
    """A counter (`_total`): dashboards and rules read its rate."""
    return Metric(name, "counter", unit, title, help, split_by)


def gauge(name: str, unit: str = "", title: str = "", help: str = "") -> Metric:
    """A gauge: read as it is."""
    return Metric(name, "gauge", unit, title, help)


def histogram(name: str, unit: str = "seconds", title: str = "", help: str = "") -> Metric:
    """A histogram (`_bucket`/`_sum`/`_count`): read as quantiles."""
    return Metric(name, "histogram", unit, title, help)


def info(name: str, title: str = "", help: str = "") -> Metric:
    """An `_info` series (value 1) whose labels state configuration."""
    return Metric(name, "info", "", title, help)


@dataclass(frozen=True)
class Role:
    """A role every engine's metric for it shares: the kinds it may have, its unit, its title, the
    recording rule it feeds (None: none) and how series of one instance combine (sum or max)."""

    kinds: tuple[str, ...]
    unit: str
    title: str
    record: str | None = None
    combine: str = "sum"


ROLES: dict[str, Role] = {
    "running": Role(("gauge",), "requests", "Running requests", "engine:running_requests"),
    "waiting": Role(("gauge",), "requests", "Waiting requests", "engine:waiting_requests"),
    "kv_usage": Role(("gauge",), "ratio", "KV-cache usage", "engine:kv_cache_usage:ratio", "max"),
    # a counter of preemptions (vLLM) or a gauge of requests retracted now (SGLang)
    "preemptions": Role(("counter", "gauge"), "requests", "Preemptions", "engine:preemptions"),
    "prompt_tokens": Role(("counter",), "tokens", "Prompt tokens", "engine:prompt_tokens"),
    "generation_tokens": Role(("counter",), "tokens", "Generation tokens", "engine:generation_tokens"),
    "cached_tokens": Role(("counter",), "tokens", "Cached prompt tokens", "engine:cached_prompt_tokens"),
    "prefix_cache_hits": Role(("counter",), "tokens", "Prefix-cache hits"),
    "prefix_cache_queries": Role(("counter",), "tokens", "Prefix-cache queries"),
    "ttft": Role(("histogram",), "seconds", "TTFT", "engine:time_to_first_token_seconds"),
    "itl": Role(("histogram",), "seconds", "Inter-token latency", "engine:inter_token_latency_seconds"),
    "tpot": Role(("histogram",), "seconds", "TPOT", "engine:time_per_output_token_seconds"),
    "e2e": Role(("histogram",), "seconds", "E2E latency", "engine:e2e_request_latency_seconds"),
    "queue_time": Role(("histogram",), "seconds", "Queue time", "engine:queue_time_seconds"),
}


def record_name(role: str, kind: str) -> str | None:
    """The recording rule a neutral role's metric of this kind feeds (None for other roles)."""
    spec = ROLES.get(role)
    if spec is None or spec.record is None:
        return None
    return spec.record + {"counter": ":rate1m", "histogram": ":p99_1m"}.get(kind, "")


def title(role: str, metric: Metric) -> str:
    """A panel title for the role's metric."""
    return metric.title or (ROLES[role].title if role in ROLES else role.replace("_", " ").capitalize())
