"""PNG charts of a report (matplotlib, Agg backend): one chart per load kind, legends outside the
plot, a line style per percentile and a labelled SLA line that is always in view."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.typing import LineStyleType  # noqa: E402

from loadgen.analysis.series import Series, request_latencies  # noqa: E402
from loadgen.analysis.slo import Objective  # noqa: E402

LOAD_AXIS = {"concurrency": "concurrency (requests in flight)", "rate": "offered rate (requests/s)"}
LOAD_UNIT = {"concurrency": "c={:g}", "rate": "{:g}/s"}
# (line style, marker) per percentile: told apart by dash pattern and by marker shape
PERCENTILE_STYLES: dict[str, tuple[LineStyleType, str]] = {
    "p50": (":", "o"),
    "p90": ("--", "s"),
    "p99": ("-", "^"),
}
SLA_COLOR = "red"
LEGEND_SIZE = 7

Draw = Callable[[list[Series], str, Objective | None], Figure]


def by_load_kind(series: list[Series]) -> dict[str, list[Series]]:
    """Series grouped by load kind (concurrency first), so no chart mixes the two load axes."""
    order = list(LOAD_AXIS)
    kinds = sorted({s.kind for s in series}, key=lambda k: (order + [k]).index(k))
    return {kind: [s for s in series if s.kind == kind] for kind in kinds}


def _color(index: int) -> str:
    return f"C{index % 10}"


def _outside_legend(fig: Figure, handles: list, title: str | None = None) -> None:
    """One legend for the whole figure, right of the plots (constrained layout makes room)."""
    if handles:
        fig.legend(handles=handles, loc="outside right upper", fontsize=LEGEND_SIZE, title=title)


def _sla_line(ax: Axes, objective: Objective, *, vertical: bool, scale: float = 1.0) -> Line2D:
    """The SLA bound as a dashed red line, labelled on the plot, with the axis stretched to show it
    (`scale` converts seconds to the axis unit: 1000 on a millisecond axis)."""
    limit = objective.limit_s * scale
    if vertical:
        line = ax.axvline(limit, color=SLA_COLOR, linestyle="--", linewidth=1.5)
        low, high = ax.get_xlim()
        ax.set_xlim(min(low, 0.0), max(high, limit * 1.15))
        ax.annotate(
            f"SLA {objective.label}",
            (limit, 0.02),
            xycoords=ax.get_xaxis_transform(),
            xytext=(-3, 0),
            textcoords="offset points",
            color=SLA_COLOR,
            fontsize=8,
            ha="left",  # in the unrotated frame: the text runs up from the anchor, left of the line
            va="bottom",
            rotation=90,
            rotation_mode="anchor",
        )
    else:
        line = ax.axhline(limit, color=SLA_COLOR, linestyle="--", linewidth=1.5)
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 0.0), max(high, limit * 1.15))
        ax.text(
            0.01,
            limit,
            f"SLA {objective.label}",
            color=SLA_COLOR,
            fontsize=8,
            transform=ax.get_yaxis_transform(),
            ha="left",
            va="bottom",
        )
    line.set_label(f"SLA: {objective.label}")
    return line


def _labels(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)


def throughput_vs_latency(series: list[Series], kind: str, objective: Objective | None) -> Figure:
    """The seed's curve: P99 latency (x) vs output token throughput (y) per series; up-left is better."""
    key = objective.summary_key if objective else "e2e_s"
    name = key.removesuffix("_s").upper()
    fig, ax = plt.subplots(figsize=(11, 5.5), layout="constrained")
    handles: list = []
    for index, s in enumerate(series):
        points = [p for p in s.points() if p.stat(key, "p99") is not None]
        xs = [p.stat(key, "p99") or 0.0 for p in points]
        ys = [p.output_token_throughput for p in points]
        handles += ax.plot(xs, ys, marker="o", color=_color(index), label=s.label)
        for p, x, y in zip(points, xs, ys, strict=True):
            ax.annotate(
                LOAD_UNIT.get(kind, "{:g}").format(p.load),
                (x, y),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
                color=_color(index),
            )
    ax.set_ylim(0.0, ax.get_ylim()[1] * 1.06)  # room above the top point for its load label
    low, high = ax.get_xlim()
    ax.set_xlim(low, high + (high - low) * 0.08)  # and right of the rightmost one: never cut off
    if objective is not None and objective.stat == "p99":
        handles.append(_sla_line(ax, objective, vertical=True))
    _labels(
        ax,
        f"Throughput vs P99 {name} latency, by {kind} (point labels: load; up-left is better)",
        f"P99 {name} latency (s)",
        "output token throughput (tokens/s)",
    )
    _outside_legend(fig, handles)
    return fig


def _percentile_lines(ax: Axes, series: list[Series], key: str) -> None:
    for index, s in enumerate(series):
        points = s.points()
        for stat, (style, marker) in PERCENTILE_STYLES.items():
            # a `--rate inf` run has no place on a load axis (its tables still show it)
            pairs = [
                (p.load, p.stat(key, stat))
                for p in points
                if p.stat(key, stat) is not None and math.isfinite(p.load)
            ]
            if pairs:
                xs, ys = zip(*pairs, strict=True)
                ax.plot(
                    xs,
                    ys,
                    linestyle=style,
                    marker=marker,
                    markersize=4,
                    color=_color(index),
                    label=f"{s.label} {stat}",
                    gid=stat,
                )


def latency_vs_load(series: list[Series], kind: str, objective: Objective | None) -> Figure:
    """TTFT and E2E p50/p90/p99 against offered load of one kind: colour = series, style = percentile."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    loads = [p.load for s in series for p in s.points() if 0 < p.load < math.inf]
    sla: list = []
    for ax, key, title in ((axes[0], "ttft_s", "TTFT"), (axes[1], "e2e_s", "E2E latency")):
        _percentile_lines(ax, series, key)
        ax.set_ylim(bottom=0.0)
        if objective is not None and objective.summary_key == key:
            sla = [_sla_line(ax, objective, vertical=False)]
        if loads and max(loads) / min(loads) >= 8:
            ax.set_xscale("log", base=2)
        elif loads:
            ax.set_xlim(0.0, max(loads) * 1.1)  # a single load reads as its value, not as a lone tick
        _labels(ax, f"{title} percentiles vs {kind}", LOAD_AXIS.get(kind, kind), f"{title} (s)")
    colours = [Line2D([], [], color=_color(i), linewidth=2, label=s.label) for i, s in enumerate(series)]
    styles = [
        Line2D([], [], color="black", linestyle=style, marker=marker, markersize=4, label=stat)
        for stat, (style, marker) in PERCENTILE_STYLES.items()
    ]
    _outside_legend(fig, colours + styles + sla)
    return fig


def distributions(series: list[Series], kind: str, objective: Objective | None) -> Figure:
    """Histograms of per-request TTFT and TPOT, for each series' highest-load run."""
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5), layout="constrained")
    handles: list = []
    for index, s in enumerate(series):
        points = s.points()
        if not points:
            continue
        top = points[-1]
        ttft, tpot = [], []
        for record in s.records_at(top.load):  # every repetition at the highest load
            more_ttft, more_tpot = request_latencies(record.requests_path)
            ttft += more_ttft
            tpot += more_tpot
        style = {"histtype": "step", "linewidth": 1.5, "color": _color(index), "bins": 30}
        if ttft:  # both panels in ms: TTFT and TPOT side by side read in one unit
            axes[0].hist([v * 1000 for v in ttft], **style)  # outlines, so many series stay readable
        if tpot:
            axes[1].hist([v * 1000 for v in tpot], **style)
        if ttft or tpot:
            label = f"{s.label} @ {LOAD_UNIT.get(kind, '{:g}').format(top.load)}"
            handles.append(Line2D([], [], color=_color(index), linewidth=2, label=label))
    if objective is not None and objective.metric == "ttft":
        handles.append(_sla_line(axes[0], objective, vertical=True, scale=1000.0))
    if objective is not None and objective.metric == "tpot":
        handles.append(_sla_line(axes[1], objective, vertical=True, scale=1000.0))
    for ax, title, unit in ((axes[0], "TTFT", "TTFT (ms)"), (axes[1], "TPOT", "TPOT (ms per token)")):
        _labels(ax, f"{title} distribution at each series' highest {kind}", unit, "requests")
    _outside_legend(fig, handles)
    return fig


# file name pattern ({kind} = concurrency | rate) -> the function drawing it for one load kind
CHARTS: dict[str, Draw] = {
    "throughput_vs_p99_{kind}.png": throughput_vs_latency,
    "latency_vs_{kind}.png": latency_vs_load,
    "ttft_tpot_distribution_{kind}.png": distributions,
}


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_charts(series: list[Series], out_dir: Path, objective: Objective | None) -> list[Path]:
    """Write every chart, once per load kind present, into out_dir; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        _save(draw(group, kind, objective), out_dir / name.format(kind=kind))
        for kind, group in by_load_kind(series).items()
        for name, draw in CHARTS.items()
    ]
