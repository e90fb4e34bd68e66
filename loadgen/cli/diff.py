"""`loadgen diff RUN_A RUN_B`: metrics side by side with deltas, then every manifest difference,
most likely explanation of the gap first."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from loadgen.analysis.diff import manifest_differences, metric_rows, workload_warnings
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


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_a")
@click.argument("run_b")
@click.option("--results-dir", default="results", show_default=True, help="Where the runs are.")
@click.option("--top", type=int, default=0, help="Show only the N most likely differences (0 = all).")
def diff(run_a: str, run_b: str, results_dir: str, top: int) -> None:
    """Explain the gap between two runs: `loadgen diff RUN_A RUN_B`."""
    from loadgen.results.rundir import RunNotFound, load_run

    try:
        a, b = load_run(results_dir, run_a), load_run(results_dir, run_b)
    except RunNotFound as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    rows = [
        [
            r.label + (f" ({r.unit})" if r.unit not in ("", "s") else ""),
            _num(r.a, r.unit),
            _num(r.b, r.unit),
            _num(r.delta, r.unit),
            "-" if r.delta_pct is None else f"{r.delta_pct:+.1f}%",
        ]
        for r in metric_rows(a.summary, b.summary)
    ]
    click.echo(render(["metric", f"A {run_a}", f"B {run_b}", "delta", "delta %"], rows))
    for warning in workload_warnings(a.manifest, b.manifest):
        click.echo(f"warning: {warning}")
    diffs = manifest_differences(a.manifest, b.manifest)
    shown = diffs[:top] if top > 0 else diffs
    click.echo("")
    if not diffs:
        click.echo("manifests: no differences that could explain a gap (same engine, flags, workload, host)")
        return
    click.echo(f"manifest differences ({len(diffs)}), most likely explanation first:")
    click.echo(
        render(
            ["#", "key", "A", "B", "likelihood"],
            [[str(i), d.key, _short(d.a), _short(d.b), f"{d.score:.2f}"] for i, d in enumerate(shown, 1)],
            left=(1, 2, 3),
        )
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(diff())
