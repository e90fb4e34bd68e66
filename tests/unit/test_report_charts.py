"""Report charts: one chart per load kind, legends outside the plots, a style per percentile, SLA in view."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from loadgen.analysis.series import group_series
from loadgen.analysis.slo import parse_objective
from loadgen.report.charts import (
    PERCENTILE_STYLES,
    by_load_kind,
    distributions,
    latency_vs_load,
    throughput_vs_latency,
    write_charts,
)
from loadgen.results.rundir import load_run, write_json

SERIES_PER_KIND = 9  # enough labels that an inside legend would cover the data


def _store(root: Path, run_id: str, engine: str, *, conc: int | None, rate: float | None, p99: float) -> None:
    summary = {
        "run_id": run_id,
        "engine": engine,
        "max_concurrency": conc,
        "asked_rate": "inf" if rate is None else rate,
        "request_throughput": 10.0,
        "output_token_throughput": 640.0,
        "ttft_s": {"p50": p99 / 8, "p90": p99 / 4, "p99": p99 / 2},
        "e2e_s": {"p50": p99 / 3, "p90": p99 / 1.5, "p99": p99},
    }
    write_json(root / run_id / "summary.json", summary)
    write_json(root / run_id / "manifest.json", {"run_id": run_id, "engine": {"engine": engine}})
    (root / run_id / "requests.jsonl").write_text('{"outcome": "ok", "ttft_s": 0.1, "tpot_s": 0.01}\n')


@pytest.fixture
def mixed(tmp_path: Path) -> list:
    """SERIES_PER_KIND concurrency-bound series and as many rate-bound ones, three loads each."""
    ids = []
    for n in range(SERIES_PER_KIND):
        for load in (1, 4, 16):
            ids.append(f"c-{n}-{load}")
            _store(tmp_path, ids[-1], f"conc-engine-{n}", conc=load, rate=None, p99=0.1 * load)
            ids.append(f"r-{n}-{load}")
            _store(tmp_path, ids[-1], f"rate-engine-{n}", conc=None, rate=float(load), p99=0.1 * load)
    return group_series([load_run(tmp_path, run_id) for run_id in ids])


def _line_labels(fig: Figure) -> set[str]:
    return {str(line.get_label()) for ax in fig.axes for line in ax.get_lines()}


def test_series_are_split_by_load_kind(mixed):
    groups = by_load_kind(mixed)
    assert list(groups) == ["concurrency", "rate"]
    assert all(s.label.startswith("conc-engine") for s in groups["concurrency"])
    assert all(s.label.startswith("rate-engine") for s in groups["rate"])


def test_no_rate_series_on_the_concurrency_axis(mixed):
    fig = latency_vs_load(by_load_kind(mixed)["concurrency"], "concurrency", None)
    labels = _line_labels(fig)
    assert any("conc-engine" in label for label in labels)
    assert not any("rate-engine" in label for label in labels)
    assert all("concurrency" in ax.get_xlabel() for ax in fig.axes)


def test_write_charts_writes_each_chart_once_per_kind(mixed, tmp_path):
    paths = write_charts(mixed, tmp_path / "out", parse_objective("e2e_p99=500ms"))
    names = sorted(p.name for p in paths)
    assert "latency_vs_concurrency.png" in names
    assert "latency_vs_rate.png" in names
    assert len(names) == 2 * len({n.replace("concurrency", "").replace("rate", "") for n in names})
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


@pytest.mark.parametrize("draw", [latency_vs_load, throughput_vs_latency, distributions])
def test_legend_lies_outside_every_plot(mixed, draw):
    fig = draw(by_load_kind(mixed)["concurrency"], "concurrency", parse_objective("e2e_p99=500ms"))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert fig.legends, "the figure has a legend"
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        assert len(legend.get_texts()) >= SERIES_PER_KIND
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer))
        assert fig.bbox.contains(box.x1 - 1, box.y0 + 1)  # and inside the saved figure


def test_each_percentile_has_its_own_style(mixed):
    fig = latency_vs_load(by_load_kind(mixed)["concurrency"], "concurrency", None)
    first = mixed[0].label
    styles = {
        line.get_gid(): (line.get_linestyle(), line.get_marker())
        for line in fig.axes[0].get_lines()
        if str(line.get_label()).startswith(first + " ")
    }
    assert set(styles) == set(PERCENTILE_STYLES)
    assert len(set(styles.values())) == len(PERCENTILE_STYLES)


def test_sla_line_is_in_view_and_labelled(mixed):
    objective = parse_objective("e2e_p99=20s")  # far above every point: autoscaling would hide it
    fig = latency_vs_load(by_load_kind(mixed)["concurrency"], "concurrency", objective)
    e2e = fig.axes[1]
    low, high = e2e.get_ylim()
    assert low <= objective.limit_s < high
    assert any(objective.label in text.get_text() for text in e2e.texts)
    legend_texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any(objective.label in text for text in legend_texts)


def test_a_run_at_rate_inf_without_a_concurrency_cap_still_charts(tmp_path: Path) -> None:
    # `--rate inf` with no --max-concurrency is a rate-kind run whose load is inf: it has no place on
    # a load axis (matplotlib refuses inf limits: "Axis limits cannot be NaN or Inf"), and the
    # report must still be written
    for run_id in ("all-at-once-a", "all-at-once-b"):
        _store(tmp_path, run_id, run_id, conc=None, rate=None, p99=0.5)
    series = group_series([load_run(tmp_path, run_id) for run_id in ("all-at-once-a", "all-at-once-b")])
    paths = write_charts(series, tmp_path / "charts", parse_objective("e2e_p99=2s"))
    assert paths
    assert all(path.stat().st_size > 0 for path in paths)
