"""llama.cpp's `/metrics` (`llama-server --metrics`): `llamacpp:*` names, HELP texts and types as the
real server writes them (tests/fixtures/golden/llamacpp-b1-0c1e570/metrics_*.txt): no labels, no
histograms; prompt tokens counted without the ones reused from the prompt cache."""

from __future__ import annotations

from simengine.promtext import Family, render
from simengine.request import RequestGroup
from simengine.scheduler import Scheduler

NONE: tuple[tuple[str, str], ...] = ()
COUNTERS = (
    ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens"),
    ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache"),
    ("prompt_seconds_total", "Total time spent processing prompts"),
    ("tokens_predicted_total", "Number of generation tokens processed"),
    ("tokens_predicted_seconds_total", "Total time spent generating tokens"),
    (
        "n_decode_total",
        "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
    ),
    ("n_tokens_max", "Largest observed sequence length (prompt + generation)"),
)
GAUGES = (
    ("prompt_tokens_seconds", "Average prompt throughput in tokens/s"),
    ("predicted_tokens_seconds", "Average generation throughput in tokens/s"),
    ("requests_processing", "Number of requests processing"),
    ("requests_deferred", "Number of requests deferred"),
    ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call"),
)


class LlamacppMetrics:
    """The counters llama-server keeps, fed by the simulator's step loop."""

    def __init__(self) -> None:
        self.counters = {
            name: Family(f"llamacpp:{name}", text, "counter", created=False) for name, text in COUNTERS
        }
        self.gauges = {
            name: Family(f"llamacpp:{name}", text, "gauge", created=False) for name, text in GAUGES
        }
        for family in self.counters.values():
            family.set(NONE, 0.0)
        self.busy_slot_steps = 0

    def on_step(self, step_tokens: int) -> None:
        self.counters["n_decode_total"].inc(NONE)

    def on_first_token(self, seq: object) -> None:
        """Nothing per first token: llama.cpp keeps no latency histograms."""

    def on_gaps(self, gaps: dict[int, int]) -> None:
        """Nothing per gap (no inter-token histogram)."""

    def on_finished(self, group: RequestGroup) -> None:
        c = self.counters
        for seq in group.seqs:
            if seq.finish_reason == "abort" or not seq.first_token_ns:
                continue
            c["prompt_tokens_total"].inc(NONE, seq.prompt_len - seq.cached_tokens)
            c["prompt_tokens_cached_total"].inc(NONE, seq.cached_tokens)
            c["tokens_predicted_total"].inc(NONE, seq.generated)
            c["prompt_seconds_total"].inc(NONE, (seq.first_token_ns - seq.scheduled_ns) / 1e9)
            c["tokens_predicted_seconds_total"].inc(NONE, (seq.last_token_ns - seq.first_token_ns) / 1e9)
            longest = max(c["n_tokens_max"].values[NONE], float(seq.prompt_len + seq.generated))
            c["n_tokens_max"].set(NONE, longest)

    def render(self, sched: Scheduler) -> bytes:
        c, g = self.counters, self.gauges
        prompt_s = c["prompt_seconds_total"].values[NONE]
        predict_s = c["tokens_predicted_seconds_total"].values[NONE]
        g["prompt_tokens_seconds"].set(
            NONE, c["prompt_tokens_total"].values[NONE] / prompt_s if prompt_s else 0.0
        )
        g["predicted_tokens_seconds"].set(
            NONE, c["tokens_predicted_total"].values[NONE] / predict_s if predict_s else 0.0
        )
        g["requests_processing"].set(NONE, float(len(sched.running)))
        g["requests_deferred"].set(NONE, float(len(sched.waiting)))
        g["n_busy_slots_per_decode"].set(NONE, float(len(sched.running)) or 1.0)
        return render([*c.values(), *g.values()])
