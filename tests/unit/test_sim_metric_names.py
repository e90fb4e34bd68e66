"""Each personality's /metrics against the metric families read in the engines' newer sources.

simengine/data/engine_metric_sources.json lists the families of vLLM's `vllm/v1/metrics/loggers.py` (+
`worker.py`, `perf.py`, `spec_decode/metrics.py`) and SGLang's `observability/metrics_collector.py` at
the commits it names: name, type, HELP, label names, buckets, and whether the simulator emits it. The
golden captures (vLLM 0.26.0, SGLang 0.5.14) are pinned by tests/integration/test_sim_personalities.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import simengine.data
from simengine.config import parse_args
from simengine.engine import record_step
from simengine.personalities.registry import PERSONALITIES
from simengine.personalities.vllm_metrics import build_1_2_5_buckets
from simengine.request import RequestGroup, Sequence
from simengine.virtual import build_scheduler
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM
from tests.integration.test_sim_api import golden_body

SOURCES = json.loads((Path(simengine.data.__file__).parent / "engine_metric_sources.json").read_text())
FAMILIES: list[dict[str, Any]] = SOURCES["families"]
GOLDEN = {"vllm": GOLDEN_VLLM, "sglang": GOLDEN_SGLANG}
# a small KV cache (preemption / SGLang retraction), prompts sharing a prefix (cache hits)
ARGS = ["--served-model-name", "tiny-llama", "--max-model-len", "256", "--kv-cache-tokens", "512"]
ARGS += ["--block-size", "16", "--max-num-seqs", "8"]


def _families(engine: str, *, emitted: bool) -> list[dict[str, Any]]:
    return [f for f in FAMILIES if f["engine"] == engine and f["emitted"] is emitted]


def _group(i: int, stream: bool, now_ns: int) -> RequestGroup:
    prompt = [7] * 32 + [1000 + i] * 16
    group = RequestGroup(f"r{i}", None, now_ns, 0, {"stream": stream})
    group.seqs.append(Sequence(group, 0, prompt, 64, 40 + i, i))
    return group


def scrape(personality: str, *extra: str) -> str:
    """/metrics after two rounds of 8 requests (streamed and not) through the real scheduler, and an abort."""
    cfg = parse_args(["--personality", personality, *ARGS, *extra])
    metrics = PERSONALITIES[personality].build_metrics(cfg)
    sched = build_scheduler(cfg)
    now = 0
    for first in (0, 8):
        for i in range(first, first + 8):
            sched.add(_group(i, stream=i % 2 == 0, now_ns=now))
        while (batch := sched.schedule(now)) is not None:
            now += int(batch.duration_s * 1e9)
            out = sched.complete(batch, now)
            record_step(metrics, batch, out.emitted)
            for group in out.finished_groups:
                metrics.on_finished(group)
    aborted = _group(16, stream=True, now_ns=now)  # a client that goes away before its first token
    sched.add(aborted)
    sched.abort(aborted)
    metrics.on_finished(aborted)
    assert sched.counters.preemptions > 0  # the scenario holds: preemption (SGLang: retraction) ...
    assert sched.counters.cached_prompt_tokens > 0  # ... and prefix-cache hits
    return metrics.render(sched).decode()


def exposed(text: str) -> dict[str, dict[str, Any]]:
    """family -> TYPE, HELP, sample label names (without le) and histogram bounds, from exposition text."""
    out: dict[str, dict[str, Any]] = {}
    for name, help_text in re.findall(r"^# HELP (\S+) (.*)$", text, re.M):
        out[name] = {"help": help_text, "labels": set(), "les": set()}
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        out[name]["type"] = kind
    for fam in text_string_to_metric_families(text):
        key = next(n for n in (fam.name, fam.name + "_total") if n in out)
        for s in fam.samples:
            out[key]["labels"].update(k for k in s.labels if k != "le")
            if "le" in s.labels:
                out[key]["les"].add(float(s.labels["le"]))

    def created_of_another(name: str) -> bool:  # vLLM's `<counter|histogram>_created` companions
        base = name.removesuffix("_created")
        return name != base and (base in out or base + "_total" in out)

    return {k: v for k, v in out.items() if k.startswith(("vllm:", "sglang:")) and not created_of_another(k)}


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def scraped(request: pytest.FixtureRequest) -> tuple[str, dict[str, dict[str, Any]]]:
    return request.param, exposed(scrape(request.param))


def test_the_source_file_names_its_commits_and_each_family_once() -> None:
    for engine in ("vllm", "sglang"):
        src = SOURCES["sources"][engine]
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]), engine
        assert src["paths"], engine
    names = [f["name"] for f in FAMILIES]
    assert len(names) == len(set(names))
    for fam in FAMILIES:
        assert fam["type"] in ("counter", "gauge", "histogram", "summary"), fam["name"]
        assert fam["emitted"] or fam["why"], fam["name"]
        assert fam["type"] != "counter" or fam["name"].endswith("_total"), fam["name"]


def test_emitted_families_have_the_source_type_help_labels_and_buckets(
    scraped: tuple[str, dict[str, dict[str, Any]]],
) -> None:
    engine, ours = scraped
    for fam in _families(engine, emitted=True):
        name = fam["name"]
        assert name in ours, f"{name} missing"
        got = ours[name]
        assert (got["type"], got["help"]) == (fam["type"], fam["help"]), name
        if not fam["series"]:
            assert not got["labels"], f"{name} should have no series"
            continue
        if fam["labels"] is not None:
            assert got["labels"] == set(fam["labels"]), name
        else:  # vllm:cache_config_info: CacheConfig.metrics_info() keys + engine
            assert "engine" in got["labels"], name
            assert len(got["labels"]) > 5, name
        buckets = fam["buckets"]
        if isinstance(buckets, str):  # vLLM's 1-2-5 token buckets up to --max-model-len
            buckets = build_1_2_5_buckets(256)
        if buckets is not None:
            assert got["les"] == {*map(float, buckets), float("inf")}, name


def test_the_simulator_emits_no_family_outside_the_source(
    scraped: tuple[str, dict[str, dict[str, Any]]],
) -> None:
    engine, ours = scraped
    allowed = {f["name"] for f in _families(engine, emitted=True)}
    assert set(ours) <= allowed, set(ours) - allowed


def test_families_not_modelled_are_absent(scraped: tuple[str, dict[str, dict[str, Any]]]) -> None:
    engine, ours = scraped
    absent = _families(engine, emitted=False)
    assert absent
    assert not {f["name"] for f in absent} & set(ours)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_source_and_golden_capture_agree_on_type_and_help(engine: str) -> None:
    gold = golden_body(GOLDEN[engine] / "metrics_2_after.txt")
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", gold, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", gold, re.M))
    shared = [f for f in FAMILIES if f["engine"] == engine and f["name"] in types]
    assert len(shared) >= 20
    for fam in shared:
        assert types[fam["name"]] == fam["type"], fam["name"]
        if fam.get("help"):
            assert helps[fam["name"]] == fam["help"], fam["name"]


def test_the_captured_versions_keep_the_captured_layout() -> None:
    """`--engine-version 0.26.0 / 0.5.14` reproduce the captures; other versions follow the source."""
    old_vllm, new_vllm = exposed(scrape("vllm", "--engine-version", "0.26.0")), exposed(scrape("vllm"))
    assert set(new_vllm) - set(old_vllm) == {
        "vllm:worker_model_execute_time_seconds",
        "vllm:worker_spec_decode_proposer_time_seconds",
        "vllm:worker_step_time_seconds",
    }
    old, new = exposed(scrape("sglang", "--engine-version", "0.5.14")), exposed(scrape("sglang"))
    assert set(new) - set(old) == {"sglang:prefill_effective_tokens_total"}
    for name in ("sglang:prompt_tokens_total", "sglang:time_to_first_token_seconds"):
        assert new[name]["labels"] - old[name]["labels"] == {"is_streaming"}, name


def test_sglang_counts_streamed_and_plain_requests_apart() -> None:
    text = scrape("sglang")
    req = {
        s.labels["is_streaming"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "sglang:num_requests_total"
    }
    assert req == {"true": 8.0, "false": 8.0}
    effective = {
        s.labels["mode"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "sglang:prefill_effective_tokens_total"
    }
    assert set(effective) == {"input", "device_hit", "host_hit", "storage_hit"}
    assert effective["input"] + effective["device_hit"] == 16 * 48  # every prompt token, counted once
    assert effective["device_hit"] > 0
    assert effective["host_hit"] == effective["storage_hit"] == 0
