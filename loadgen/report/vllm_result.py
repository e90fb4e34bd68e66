"""`--save-result`: the run's numbers as `vllm bench serve --save-result` writes them (same keys, same
units: milliseconds for latencies, `p99_*` from the exact percentiles), for tools that read vLLM's
result files. Built from summary.json and requests.jsonl only (pure but for the final write)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from loadgen.config import RunConfig
from loadgen.results.rundir import write_json

LATENCIES = (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("itl", "itl_s"), ("e2el", "e2e_s"))


def _backend(config: RunConfig) -> str:
    """vLLM's name for the endpoint kind: `openai` (completions) or `openai-chat`."""
    return "openai-chat" if config.endpoint == "chat" else "openai"


def _ms(value: Any) -> float | None:
    return None if value is None else float(value) * 1000.0


def peak_output_rate(lines: Iterable[dict[str, Any]]) -> tuple[float, int]:
    """(max output tokens in any one-second bucket of the run, requests in flight in that bucket),
    as vLLM's `max_output_tokens_per_s` / `max_concurrent_requests`: token times are the first
    token plus the running sum of the ITLs."""
    tokens: Counter[int] = Counter()
    spans: list[tuple[float, float]] = []
    for line in lines:
        first = line.get("first_token_s")
        if line.get("outcome") != "ok" or first is None:
            continue
        t = float(first)
        tokens[int(t)] += 1
        for gap in line.get("itl_s") or ():
            t += float(gap)
            tokens[int(t)] += 1
        spans.append((float(line.get("sent_s") or 0.0), t))
    if not tokens:
        return 0.0, 0
    second, peak = max(tokens.items(), key=lambda kv: (kv[1], -kv[0]))
    in_flight = sum(1 for start, end in spans if start < second + 1 and end >= second)
    return float(peak), in_flight


def vllm_result(
    config: RunConfig, summary: dict[str, Any], lines: list[dict[str, Any]], date: str
) -> dict[str, Any]:
    """The result dictionary (keys and order of vLLM's `result_json`)."""
    traffic = config.traffic
    label = traffic.result_label if traffic else None
    peak_tokens, peak_flight = peak_output_rate(lines)
    out: dict[str, Any] = {
        "date": date,
        "endpoint_type": _backend(config),
        "backend": _backend(config),
        "label": label,
        "model_id": summary.get("model"),
        "tokenizer_id": traffic.tokenizer if traffic else None,
        "num_prompts": config.num_prompts,
        "request_rate": "inf" if math.isinf(config.rate) else config.rate,
        "burstiness": config.burstiness,
        "max_concurrency": config.max_concurrency,
        "duration": summary.get("duration_s"),
        "completed": (summary.get("requests") or {}).get("ok"),
        "failed": (summary.get("requests") or {}).get("failed"),
        "total_input_tokens": summary.get("total_input_tokens"),
        "total_output_tokens": summary.get("total_output_tokens"),
        "request_throughput": summary.get("request_throughput"),
        "request_goodput": summary.get("goodput") if config.slo else None,
        "output_throughput": summary.get("output_token_throughput"),
        "total_token_throughput": summary.get("total_token_throughput"),
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_flight,
        "rtfx": 0.0,
    }
    for short, key in LATENCIES:
        stats = summary.get(key) or {}
        out[f"mean_{short}_ms"] = _ms(stats.get("mean"))
        out[f"median_{short}_ms"] = _ms(stats.get("p50"))
        out[f"std_{short}_ms"] = _ms(stats.get("std"))
        out[f"p99_{short}_ms"] = _ms(stats.get("p99"))
    return out


def file_for(pattern: str, config: RunConfig, model: str) -> Path:
    """Fill vLLM's default name pattern (label, rate, concurrency, model) into the path."""
    traffic = config.traffic
    rate = "inf" if math.isinf(config.rate) else f"{config.rate:g}"
    return Path(
        pattern.format(
            label=(traffic.result_label if traffic else None) or _backend(config),
            rate=rate,
            concurrency=f"-concurrency{config.max_concurrency}" if config.max_concurrency else "",
            model=model.split("/")[-1] or "model",
        )
    )


def save_vllm_result(config: RunConfig, run_dir: Path, summary: dict[str, Any]) -> Path | None:
    """Write the result file when `--save-result` was given; returns its path."""
    if config.traffic is None or config.traffic.save_result is None:
        return None
    lines: list[dict[str, Any]] = []
    requests = run_dir / "requests.jsonl"
    if requests.is_file():
        lines = [json.loads(line) for line in requests.read_text().splitlines() if line.strip()]
    path = file_for(config.traffic.save_result, config, str(summary.get("model") or ""))
    date = datetime.now().strftime("%Y%m%d-%H%M%S")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, vllm_result(config, summary, lines, date))
    return path
