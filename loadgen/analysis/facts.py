"""The numbers a conclusion rests on, per series: peak, knee, throughput at the SLA, cost, advice."""

from __future__ import annotations

from loadgen.analysis.costs import PRODUCTION_MEMORY_FRACTION, cost_per_million_tokens, max_num_seqs_advice
from loadgen.analysis.knee import find_knee, throughput_at_sla
from loadgen.analysis.series import Series
from loadgen.analysis.slo import Objective


def _cost_line(cost_per_hour: float | None, tok_s: float | None, where: str) -> list[str]:
    if cost_per_hour is None or not tok_s:
        return []
    cost = cost_per_million_tokens(cost_per_hour, tok_s)
    return (
        [
            f"- Cost per million output tokens {where}: {cost:.3f} "
            f"(= {cost_per_hour:g}/h / 3600 x 1e6 / {tok_s:.1f} tok/s)"
        ]
        if cost is not None
        else []
    )


def series_facts(series: Series, objective: Objective | None, cost_per_hour: float | None) -> list[str]:
    """Markdown bullet lines for one series."""
    points = series.points()
    if not points:
        return ["- no runs"]
    unit = "concurrency" if series.kind == "concurrency" else "req/s"
    peak = max(points, key=lambda p: p.output_token_throughput)
    lines = [
        f"- Peak: {peak.output_token_throughput:.1f} output tok/s ({peak.request_throughput:.2f} req/s) "
        f"at {unit} {peak.load:g} (run {peak.run_id})"
    ]
    knee = find_knee(points)
    if len(points) < 2:
        lines.append("- Knee: needs two or more load points")
    elif knee is None:
        lines.append("- Knee: not reached in this sweep (throughput still grows with load)")
    else:
        lines.append(
            f"- Knee: {unit} {knee.load:g} ({knee.throughput:.2f} req/s); the next step's "
            f"elasticity is {knee.elasticity_after:.2f}. Method: {knee.method}"
        )
    lines += _cost_line(cost_per_hour, peak.output_token_throughput, "at peak")
    if objective is None:
        return lines
    sla = throughput_at_sla(points, objective)
    if sla.load is None:
        lines.append(f"- Throughput at the SLA ({objective.label}): none, {sla.how}")
        return lines
    lines.append(
        f"- Throughput at the SLA ({objective.label}): {sla.output_token_throughput:.1f} output "
        f"tok/s, {sla.request_throughput:.2f} req/s at {unit} {sla.load:.3g} ({sla.how})"
    )
    lines += _cost_line(cost_per_hour, sla.output_token_throughput, "at the SLA")
    if series.kind == "concurrency":
        advice = max_num_seqs_advice(sla.load)
        lines.append(
            f"- Production (seed 6.3): max_num_seqs <= {advice} (concurrency at the SLA "
            f"{sla.load:.3g} less 20% headroom), gpu_memory_utilization "
            f"{PRODUCTION_MEMORY_FRACTION}, then monitor and re-run after upgrades"
        )
    return lines
