"""PNG charts of a report (matplotlib, Agg backend): titles, units, labelled axes, legend, SLA line."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from loadgen.analysis.series import Series, request_latencies  # noqa: E402
from loadgen.analysis.slo import Objective  # noqa: E402

LOAD_AXIS = {"concurrency": "concurrency (requests in flight)", "rate": "offered rate (requests/s)"}
PERCENTILE_STYLES = (("p50", ":"), ("p90", "--"), ("p99", "-"))


def _finish(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _style(ax: plt.Axes, title: str, xlabel: str, ylabel: str, *, legend_size: int | None) -> None:
    """Title, axis labels, a light grid and (unless `legend_size` is None) the legend."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if legend_size is not None:
        ax.legend(fontsize=legend_size)


def throughput_vs_latency(series: list[Series], path: Path, objective: Objective | None) -> Path:
    """The seed's curve: P99 latency (x) vs output token throughput (y) per engine; up-left is better."""
    key = objective.summary_key if objective else "e2e_s"
    name = key.removesuffix("_s").upper()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for s in series:
        points = [p for p in s.points() if p.stat(key, "p99") is not None]
        xs = [p.stat(key, "p99") or 0.0 for p in points]
        ax.plot(xs, [p.output_token_throughput for p in points], marker="o", label=s.label)
        for p, x in zip(points, xs, strict=True):
            ax.annotate(
                f"{p.load:g}",
                (x, p.output_token_throughput),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=8,
            )
    if objective is not None and objective.stat == "p99":
        ax.axvline(objective.limit_s, color="red", linestyle="--", label=f"SLA: {objective.label}")
    _style(
        ax,
        f"Throughput vs P99 {name} latency (labels: load; up and to the left is better)",
        f"P99 {name} latency (s)",
        "output token throughput (tokens/s)",
        legend_size=8,
    )
    return _finish(fig, path)


def latency_vs_load(series: list[Series], path: Path, objective: Objective | None) -> Path:
    """TTFT and E2E p50/p90/p99 against offered load, one colour per series."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    kind = series[0].kind if series else "concurrency"
    for ax, key, title in ((axes[0], "ttft_s", "TTFT"), (axes[1], "e2e_s", "E2E latency")):
        for index, s in enumerate(series):
            color = f"C{index % 10}"
            points = s.points()
            for stat, style in PERCENTILE_STYLES:
                ys = [p.stat(key, stat) for p in points]
                pairs = [(p.load, y) for p, y in zip(points, ys, strict=True) if y is not None]
                if pairs:
                    ax.plot(
                        *zip(*pairs, strict=True),
                        linestyle=style,
                        marker=".",
                        color=color,
                        label=f"{s.label} {stat}",
                    )
        if objective is not None and objective.summary_key == key:
            ax.axhline(objective.limit_s, color="red", linestyle="--", label=f"SLA: {objective.label}")
        loads = [p.load for s in series for p in s.points() if p.load > 0]
        if loads and max(loads) / min(loads) >= 8:
            ax.set_xscale("log", base=2)
        _style(ax, f"{title} percentiles vs {kind}", LOAD_AXIS.get(kind, kind), f"{title} (s)", legend_size=7)
    return _finish(fig, path)


def distributions(series: list[Series], path: Path, objective: Objective | None) -> Path:
    """Histograms of per-request TTFT and TPOT, for each series' highest-load run."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for s in series:
        points = s.points()
        if not points:
            continue
        top = points[-1]
        ttft, tpot = [], []
        for record in s.records_at(top.load):  # every repetition at the highest load
            more_ttft, more_tpot = request_latencies(record.requests_path)
            ttft += more_ttft
            tpot += more_tpot
        label = f"{s.label} @ {top.load:g}"
        # outlines, not filled bars, so many series stay readable on one axis
        if ttft:
            axes[0].hist(ttft, bins=30, histtype="step", linewidth=1.5, label=label)
        if tpot:
            axes[1].hist([v * 1000 for v in tpot], bins=30, histtype="step", linewidth=1.5, label=label)
    if objective is not None and objective.metric == "ttft":
        axes[0].axvline(objective.limit_s, color="red", linestyle="--", label=f"SLA: {objective.label}")
    for ax, title, unit in (
        (axes[0], "TTFT distribution", "TTFT (s)"),
        (axes[1], "TPOT distribution", "TPOT (ms per token)"),
    ):
        legend_size = 7 if ax.get_legend_handles_labels()[0] else None
        _style(ax, f"{title} (highest load of each series)", unit, "requests", legend_size=legend_size)
    return _finish(fig, path)


CHARTS = {
    "throughput_vs_p99.png": throughput_vs_latency,
    "latency_vs_load.png": latency_vs_load,
    "ttft_tpot_distribution.png": distributions,
}


def write_charts(series: list[Series], out_dir: Path, objective: Objective | None) -> list[Path]:
    """Write every chart into out_dir; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [draw(series, out_dir / name, objective) for name, draw in CHARTS.items()]
