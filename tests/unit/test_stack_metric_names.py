"""Every metric name a dashboard or a rule reads is one something emits ("a stale name never errors").

Allowed: names listed in docs/METRICS.md (what loadgen and the exporter emit), the recording rules'
own names, engine names present in the real vLLM 0.26.0 / SGLang 0.5.14 captures, dcgm-exporter's
documented fields, and Prometheus's `up`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import GOLDEN_LLAMACPP, GOLDEN_SGLANG, GOLDEN_VLLM

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from grafana.dashgen.queries import iter_queries, metric_names  # noqa: E402

RULE_FILES = sorted((REPO / "prometheus" / "rules").glob("*.yml"))
BOARD_FILES = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
# NVIDIA dcgm-exporter etc/default-counters.csv and etc/dcp-metrics-included.csv (fields it can emit)
DCGM_FIELDS = {
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_POWER_VIOLATION",
    "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
    "DCGM_FI_DEV_RELIABILITY_VIOLATION",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_RETIRED_SBE",
    "DCGM_FI_DEV_RETIRED_DBE",
    "DCGM_FI_DEV_RETIRED_PENDING",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_SM_OCCUPANCY",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
}
SERIES_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def documented_in_metrics_md() -> set[str]:
    """First-column backticked names of docs/METRICS.md's tables (label sets like `{a,b}` dropped)."""
    names = set()
    for line in (REPO / "docs" / "METRICS.md").read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\|\s*`([A-Za-z_:][\w:]*)", line)
        if match:
            names.add(match.group(1))
    return names


def golden_engine_names() -> set[str]:
    """The engines' own series names (`<engine>:*`) in their real /metrics captures."""
    from infergauge.engines import ENGINES

    prefix = "|".join(ENGINES)
    names = set()
    for directory in (GOLDEN_VLLM, GOLDEN_SGLANG, GOLDEN_LLAMACPP):
        for path in directory.glob("metrics_*.txt"):
            for line in path.read_text(encoding="utf-8").splitlines():
                match = re.match(rf"^((?:{prefix}):[\w:]+)[{{ ]", line)
                if match:
                    names.add(match.group(1))
    return names


def recording_rule_names() -> set[str]:
    return {
        r["record"]
        for p in RULE_FILES
        for g in yaml.safe_load(p.read_text())["groups"]
        for r in g["rules"]
        if "record" in r
    }


def used_names() -> dict[str, set[str]]:
    """name -> where it is used (rule or dashboard query)."""
    used: dict[str, set[str]] = {}
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                for name in metric_names(rule["expr"]):
                    used.setdefault(name, set()).add(f"{path.name}:{rule.get('record') or rule.get('alert')}")
    for path in BOARD_FILES:
        for query in iter_queries(json.loads(path.read_text(encoding="utf-8"))):
            for name in metric_names(query.expr):
                used.setdefault(name, set()).add(f"{path.name}:{query.title}")
    return used


def is_known(name: str, known: set[str]) -> bool:
    if name in known:
        return True
    for suffix in SERIES_SUFFIXES:  # histogram/counter series of a documented family
        if name.endswith(suffix) and name[: -len(suffix)] in known:
            return True
    return f"{name}_total" in known


@pytest.fixture(scope="module")
def known() -> set[str]:
    return (
        documented_in_metrics_md()
        | golden_engine_names()
        | recording_rule_names()
        | DCGM_FIELDS
        | PROMETHEUS_OWN
    )


def test_golden_captures_and_rules_are_found() -> None:
    engine = golden_engine_names()
    assert "vllm:num_requests_running" in engine
    assert "sglang:num_running_reqs" in engine
    assert "run_id:loadgen_time_to_first_token_seconds:p99" in recording_rule_names()


def test_unknown_names_are_caught(known: set[str]) -> None:
    # the check itself must be able to fail: a renamed engine metric is not known
    assert not is_known("vllm:gpu_cache_usage_perc", known)  # vLLM's pre-V1 name, gone in 0.26
    assert not is_known("sglang:request_time_per_output_token_seconds_bucket", known)  # absent in 0.5.14
    assert not is_known("DCGM_FI_DEV_GPU_UTILIZATION", known)


def test_every_used_metric_name_is_emitted_or_documented(known: set[str]) -> None:
    used = used_names()
    assert len(used) > 40
    unknown = {name: sorted(where)[:3] for name, where in used.items() if not is_known(name, known)}
    assert unknown == {}, (
        "names nothing emits (add them to docs/METRICS.md if loadgen/exporter emit them, "
        f"or fix the query): {unknown}"
    )


def test_engine_names_exist_in_the_real_captures() -> None:
    engine = golden_engine_names()
    stale = {n for n in used_names() if n.startswith(("vllm:", "sglang:")) and not is_known(n, engine)}
    assert stale == set()
