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
    """(`max_output_tokens_per_s`, `max_concurrent_requests`) as vLLM computes them over the ok
    requests: output tokens counted in one-second buckets from the first send (token times = first
    token + the running sum of the ITLs), and the peak of requests in flight over [send, end)
    (a sweep line; an end before a start at the same instant)."""
    ok = [line for line in lines if line.get("outcome") == "ok" and line.get("first_token_s") is not None]
    if not ok:
        return 0.0, 0
    origin = min(float(line["sent_s"]) for line in ok)
    tokens: Counter[int] = Counter()
    events: list[tuple[float, int]] = []
    for line in ok:
        t = float(line["first_token_s"])
        tokens[int(t - origin)] += 1
        for gap in line.get("itl_s") or ():
            t += float(gap)
            tokens[int(t - origin)] += 1
        end = line.get("done_s") if line.get("done_s") is not None else line.get("last_token_s")
        events += [(float(line["sent_s"]), 1), (float(end if end is not None else t), -1)]
    level = peak = 0
    for _, delta in sorted(events):
        level += delta
        peak = max(peak, level)
    return float(max(tokens.values())), peak


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


def file_for(pattern: str, config: RunConfig, model: str, date: str) -> Path:
    """Fill vLLM's default name pattern (label, rate, concurrency, model) into the path."""
    traffic = config.traffic
    rate = str(config.rate)  # vLLM's `{args.request_rate}`: 20.0, inf
    return Path(
        pattern.format(
            label=(traffic.result_label if traffic else None) or _backend(config),
            rate=rate,
            concurrency=f"-concurrency{config.max_concurrency}" if config.max_concurrency else "",
            model=model.split("/")[-1] or "model",
            date=date,
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
    date = datetime.now().strftime("%Y%m%d-%H%M%S")  # one stamp for the name and the `date` key
    path = file_for(config.traffic.save_result, config, str(summary.get("model") or ""), date)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, vllm_result(config, summary, lines, date))
    return path
