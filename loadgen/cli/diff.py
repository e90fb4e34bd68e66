"""`loadgen diff RUN_A RUN_B`: metrics side by side with deltas, then the ranked differences: facts
first (engine, version, model, endpoint, measured tokens, workload and neutral parameters, GPU),
raw arguments last as one context row per group (`--all` lists their keys, `--json` prints all)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from loadgen.analysis.diff import manifest_differences, metric_rows, workload_warnings
from loadgen.analysis.diff_rank import Difference
from loadgen.report.tables import render


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1000:.1f} ms"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


def _short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _cells(rank: str, d: Difference, detail: bool = False) -> list[str]:
    if d.group == "context" and not detail:
        a, b = f"{d.a} set", f"{d.b} set"
        return [rank, d.group, f"{d.key} ({len(d.details)} keys)", a, b, f"{d.score:.2f}"]
    return [rank, "" if detail else d.group, d.key, _short(d.a), _short(d.b), f"{d.score:.2f}"]


def _table(diffs: list[Difference], top: int, show_all: bool) -> str:
    rows = []
    for i, d in enumerate(diffs[:top] if top > 0 else diffs, 1):
        rows.append(_cells(str(i), d))
        if show_all and d.group == "context":
            rows += [_cells(f"{i}.{j}", detail, detail=True) for j, detail in enumerate(d.details, 1)]
    return render(["#", "kind", "key", "A", "B", "weight"], rows, left=(0, 1, 2, 3, 4))


def _metrics_table(run_a: str, run_b: str, summary_a: dict[str, Any], summary_b: dict[str, Any]) -> str:
    rows = [
        [
            r.label + (f" ({r.unit})" if r.unit not in ("", "s") else ""),
            _num(r.a, r.unit),
            _num(r.b, r.unit),
            _num(r.delta, r.unit),
            "-" if r.delta_pct is None else f"{r.delta_pct:+.1f}%",
        ]
        for r in metric_rows(summary_a, summary_b)
    ]
    return render(["metric", f"A {run_a}", f"B {run_b}", "delta", "delta %"], rows)


def _as_json(run_a: str, run_b: str, a: Any, b: Any, diffs: list[Difference], warnings: list[str]) -> str:
    metrics = [
        {"label": r.label, "unit": r.unit, "a": r.a, "b": r.b, "delta": r.delta, "delta_pct": r.delta_pct}
        for r in metric_rows(a.summary, b.summary)
    ]
    rows = [d.as_dict(i) for i, d in enumerate(diffs, 1)]
    body = {"run_a": run_a, "run_b": run_b, "metrics": metrics, "warnings": warnings, "differences": rows}
    return json.dumps(body, indent=2, default=str)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_a")
@click.argument("run_b")
@click.option("--results-dir", default="results", show_default=True, help="Where the runs are.")
@click.option("--top", type=int, default=0, help="Show only the N most likely differences (0 = all).")
@click.option("--all", "show_all", is_flag=True, help="List every raw key under its context row.")
@click.option("--json", "as_json", is_flag=True, help="Print metrics, warnings and every row as JSON.")
def diff(run_a: str, run_b: str, results_dir: str, top: int, show_all: bool, as_json: bool) -> None:
    """Explain the gap between two runs: `loadgen diff RUN_A RUN_B`."""
    from loadgen.results.manifest_schema import ManifestError
    from loadgen.results.rundir import RunNotFound, load_run

    try:
        a, b = load_run(results_dir, run_a), load_run(results_dir, run_b)
    except (RunNotFound, ManifestError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    warnings = workload_warnings(a.manifest, b.manifest)
    diffs = manifest_differences(a.manifest, b.manifest, a.summary, b.summary)
    if as_json:
        click.echo(_as_json(run_a, run_b, a, b, diffs, warnings))
        return
    click.echo(_metrics_table(run_a, run_b, a.summary, b.summary))
    for warning in warnings:
        click.echo(f"warning: {warning}")
    click.echo("")
    if not diffs:
        click.echo("manifests: no differences that could explain a gap (same engine, flags, workload, host)")
        return
    raw = sum(len(d.details) for d in diffs if d.group == "context")
    click.echo(f"differences ({len(diffs)} rows, {raw} raw keys as context), most likely explanation first:")
    click.echo(_table(diffs, top, show_all))
    if raw and not show_all:
        click.echo("(context rows group raw server/exporter arguments; --all lists their keys)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(diff())
