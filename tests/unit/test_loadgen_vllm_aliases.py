"""`vllm bench serve` aliases map onto our options with vLLM's defaults and semantics, conflicting
values are one-line errors, and `--save-result` has vLLM's result keys."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from loadgen.cli.traffic_options import traffic_fields
from loadgen.config import ConfigError, RunConfig
from loadgen.report.vllm_result import file_for, peak_output_rate, vllm_result
from loadgen.workload.traffic_config import TrafficConfig

# vllm/benchmarks/serve.py: the keys of result_json with the default --percentile-metrics
# (ttft,tpot,itl) and --metric-percentiles 99, plus e2el
VLLM_KEYS = [
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
    "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens",
    "total_output_tokens", "request_throughput", "request_goodput", "output_throughput",
    "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
    *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "std", "p99")),
]  # fmt: skip


def _fields(**flags: Any) -> dict[str, Any]:
    return traffic_fields(dict(flags))


def test_random_defaults_and_range_ratio() -> None:
    assert _fields(dataset_name="random") == {
        "input_len": "fixed:1024", "output_len": "fixed:128", "workload": "random"}  # fmt: skip
    out = _fields(dataset_name="random", random_input_len=100, random_output_len=10, random_range_ratio=0.5)
    assert (out["input_len"], out["output_len"]) == ("uniform:50-150", "uniform:5-15")
    assert _fields(dataset_name="random", endpoint="chat")["workload"] == "random-text"
    prefixed = _fields(dataset_name="random", random_prefix_len=64)
    assert (prefixed["workload"], prefixed["shared_prefix_len"], prefixed["shared_prefix_groups"]) == (
        "shared-prefix", 64, 1)  # fmt: skip


def test_prefix_repetition_defaults() -> None:
    out = _fields(dataset_name="prefix_repetition", prefix_repetition_num_prefixes=4)
    assert out == {
        "workload": "shared-prefix", "shared_prefix_len": 256, "shared_prefix_groups": 4,
        "input_len": "fixed:256", "output_len": "fixed:128",
    }  # fmt: skip


def test_sharegpt_custom_and_request_rate() -> None:
    out = _fields(dataset_name="sharegpt", dataset_path="sg.json", sharegpt_output_len=64, request_rate="4")
    assert out["rate"] == 4.0
    assert out["traffic"] == TrafficConfig(sharegpt="sg.json", sharegpt_output_len=64)
    custom = _fields(dataset_name="custom", dataset_path="c.jsonl")
    assert (custom["dataset"], custom["output_len"]) == ("c.jsonl", "fixed:256")
    assert math.isinf(_fields(request_rate="inf")["rate"])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"dataset_name": "sharegpt"}, "--dataset-name sharegpt needs --dataset-path FILE"),
        ({"dataset_name": "random", "dataset_path": "x"}, "--dataset-name random takes no --dataset-path"),
        ({"dataset_path": "x"}, "--dataset-path needs --dataset-name sharegpt or custom"),
        ({"request_rate": "5", "rate": 2.0},
         "--request-rate 5.0 disagrees with the option it aliases (rate 2.0)"),
        ({"dataset_name": "random", "random_input_len": 10, "input_len": "fixed:20"},
         "--random-input-len 'fixed:10' disagrees"),
        ({"dataset_name": "random", "random_range_ratio": 1.5}, "invalid --random-range-ratio 1.5"),
    ],
)  # fmt: skip
def test_conflicts_and_missing_values_are_one_line(flags: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _fields(**flags)
    assert str(err.value).startswith(message)


def test_save_result_path_follows_vllm_names() -> None:
    out = _fields(save_result=True, result_dir="out", result_filename="r.json", label="mine")
    assert out["traffic"] == TrafficConfig(save_result="out/r.json", result_label="mine")
    pattern = _fields(save_result=True)["traffic"].save_result
    assert pattern.startswith("{label}-{rate}qps{concurrency}-{model}-")
    assert pattern.endswith(".json")


def test_the_result_has_vllms_keys_and_units() -> None:
    summary = {
        "model": "m", "duration_s": 2.0, "requests": {"ok": 3, "failed": 1}, "total_input_tokens": 30,
        "total_output_tokens": 12, "request_throughput": 1.5, "output_token_throughput": 6.0,
        "total_token_throughput": 21.0, "goodput": None,
        "ttft_s": {"mean": 0.01, "p50": 0.009, "std": 0.001, "p99": 0.02},
        "tpot_s": {}, "itl_s": {"mean": 0.002, "p50": 0.002, "std": 0.0, "p99": 0.003}, "e2e_s": {},
    }  # fmt: skip
    lines = [
        # tokens at .5 .6 .7 1.2, then at .9 .95
        {"outcome": "ok", "sent_s": 0.0, "first_token_s": 0.5, "itl_s": [0.1, 0.1, 0.5]},
        {"outcome": "ok", "sent_s": 0.2, "first_token_s": 0.9, "itl_s": [0.05]},
    ]  # fmt: skip
    result = vllm_result(RunConfig(num_prompts=4, max_concurrency=2), summary, lines, "20261201-120000")
    assert list(result) == VLLM_KEYS
    assert result["mean_ttft_ms"] == pytest.approx(10.0)
    assert result["p99_itl_ms"] == pytest.approx(3.0)
    assert result["median_e2el_ms"] is None
    assert (result["completed"], result["failed"], result["request_rate"]) == (3, 1, "inf")
    assert peak_output_rate(lines) == (5.0, 2)  # second 0 holds 5 tokens, both requests in flight


def test_a_traffic_workload_and_another_workload_are_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^--trace and --workload are two workloads: give one$"):
        RunConfig(workload="random", traffic=TrafficConfig(trace="t.jsonl"))
    with pytest.raises(ConfigError, match=r"^--trace and --sessions are two workloads"):
        RunConfig(traffic=TrafficConfig(trace="t.jsonl", sessions="synthetic"))
    with pytest.raises(ConfigError, match=r"^--trace-sessions replays a trace's conversations"):
        RunConfig(traffic=TrafficConfig(trace_sessions=True))
    assert (
        RunConfig(traffic=TrafficConfig(sessions="synthetic"), endpoint="chat").resolved_workload
        == "sessions"
    )


def test_a_run_yaml_takes_a_traffic_mapping(tmp_path: Path) -> None:
    from loadgen.config import env_overrides, load_yaml, resolve

    path = tmp_path / "run.yaml"
    path.write_text("traffic:\n  trace: t.jsonl\n  trace-speedup: 2\n")
    config = resolve(load_yaml(path), {}, {})
    assert config.traffic == TrafficConfig(trace="t.jsonl", trace_speedup=2)
    assert config.to_manifest()["traffic"]["trace_speedup"] == 2
    path.write_text("traffic:\n  trace: t.jsonl\n  speed: 2\n")
    with pytest.raises(ConfigError, match=r"run\.yaml:1: unknown traffic key\(s\) speed; valid: trace, "):
        load_yaml(path)
    with pytest.raises(ConfigError, match=r"invalid traffic 'x': expected a mapping"):
        env_overrides({"LOADGEN_TRAFFIC": "x"})


def test_the_default_file_name_is_vllms() -> None:
    pattern = _fields(save_result=True, result_dir="out{1}")["traffic"].save_result
    config = RunConfig(rate=20.0, max_concurrency=2, endpoint="chat")
    # vLLM: f"{label}-{args.request_rate}qps-concurrency{N}-{base_model_id}-{current_dt}.json"
    assert str(file_for(pattern, config, "org/llama-8b", "20261201-120000")) == (
        "out{1}/openai-chat-20.0qps-concurrency2-llama-8b-20261201-120000.json"
    )
    named = _fields(save_result=True, result_filename="r{x}.json")["traffic"].save_result
    assert str(file_for(named, RunConfig(), "m", "d")) == "r{x}.json"
