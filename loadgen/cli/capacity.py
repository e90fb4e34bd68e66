"""`loadgen capacity --slo ttft_p99=300ms`: the highest load that holds a latency SLO, found by the
seed's procedure (start low, +10% a step until P99 > 1.5x the target, then narrow down)."""

from __future__ import annotations

import sys
from typing import Any

import click

from loadgen.analysis.capacity import CapacityResult, SearchSettings, search_capacity
from loadgen.analysis.slo import SloError, format_seconds, parse_objective
from loadgen.cli.options import (
    CONTEXT,
    base_config,
    echo_err,
    report_hint,
    run_points,
    runner_for,
    split_params,
    with_run_options,
)
from loadgen.cli.run import OneLineErrors
from loadgen.experiments.loads import make_measure
from loadgen.experiments.state import ExperimentState, experiment_dir, new_experiment_id
from loadgen.report.tables import render

OWN = ("slo", "kind", "start", "growth", "stop_factor", "max_steps", "max_time", "resolution")


def steps_table(result: CapacityResult) -> str:
    """Each step's load, objective value, verdict and headline figures; E2E p99 once (its own column
    only when the objective is another statistic)."""
    own_e2e = result.objective.summary_key != "e2e_s" or result.objective.stat != "p99"
    rows = []
    for s in result.steps:
        row = [str(s.index), s.phase, f"{s.load:g}", format_seconds(s.value), "yes" if s.met else "no"]
        row += [f"{s.point.request_throughput:.2f}", f"{s.point.output_token_throughput:.1f}"]
        if own_e2e:
            row.append(format_seconds(s.point.stat("e2e_s", "p99")))
        rows.append([*row, f"{s.point.error_rate * 100:.1f}%", s.point.run_id])
    objective = result.objective.label.split(" <=")[0]  # `E2E p99`, `TTFT p90`
    head = ["step", "phase", "load", objective, "met", "req/s", "tok/s"]
    return render([*head, *(["E2E p99"] if own_e2e else []), "errors", "run_id"], rows)


def verdict(result: CapacityResult, unit: str) -> str:
    """One line: the capacity found, or why there is none."""
    if result.best is None:
        return f"capacity at {result.objective.label}: none ({result.stop_reason})"
    best = result.best
    return (
        f"capacity at {result.objective.label}: {unit} {best.load:g} "
        f"({best.point.request_throughput:.2f} req/s, "
        f"{best.point.output_token_throughput:.1f} output tok/s, "
        f"{result.objective.stat} {format_seconds(best.value)}); stopped: {result.stop_reason}"
    )


@click.command(cls=OneLineErrors, context_settings=CONTEXT)
@click.option("--slo", "slo", required=True, help="The objective, e.g. ttft_p99=300ms.")
@click.option(
    "--kind",
    type=click.Choice(("concurrency", "rate")),
    default="concurrency",
    show_default=True,
    help="Search over concurrency (rate = inf) or over request rate.",
)
@click.option("--start", type=float, default=1.0, show_default=True, help="First load.")
@click.option("--growth", type=float, default=1.10, show_default=True, help="Load factor per ramp step.")
@click.option(
    "--stop-factor",
    type=float,
    default=1.5,
    show_default=True,
    help="The ramp stops once the statistic exceeds this multiple of the target.",
)
@click.option("--max-steps", type=int, default=30, show_default=True, help="Most runs in the search.")
@click.option("--max-time", type=float, default=1800.0, show_default=True, help="Most seconds in the search.")
@click.option("--resolution", type=float, help="Narrow until the bracket is this small (default 1 / 5%).")
@click.pass_context
def capacity(ctx: click.Context, **params: Any) -> None:
    """Find the capacity at an SLO: `loadgen capacity --slo ttft_p99=300ms` (+ `loadgen run` options)."""

    own, run_params = split_params(params, OWN)
    try:
        objective = parse_objective(own["slo"])
    except SloError as exc:
        raise click.UsageError(str(exc)) from None
    for name in ("start", "max_steps", "max_time"):
        if own[name] <= 0:
            raise click.UsageError(f"invalid --{name.replace('_', '-')} {own[name]!r}: must be > 0")
    if own["growth"] <= 1 or own["stop_factor"] < 1:
        raise click.UsageError("invalid --growth/--stop-factor: growth must be > 1 and stop factor >= 1")
    integer = own["kind"] == "concurrency"
    settings = SearchSettings(
        start=own["start"],
        growth=own["growth"],
        stop_factor=own["stop_factor"],
        max_steps=own["max_steps"],
        max_time_s=own["max_time"],
        integer=integer,
        resolution=own["resolution"] or (1.0 if integer else own["start"] * 0.05),
    )
    experiment_id = new_experiment_id()
    base = base_config(run_params, list(ctx.args), experiment_id, [objective], own["kind"], own["start"])
    state = ExperimentState(
        experiment_id,
        experiment_dir(base.results_dir, experiment_id),
        name="capacity",
        purpose=f"capacity at {objective.label} over {own['kind']}",
    )
    run_fn = runner_for(run_params)
    measure = make_measure(base, own["kind"], state, run_fn, "capacity", echo_err, (objective.spec(),))
    result = run_points(
        ctx, state, lambda: search_capacity(measure, objective, settings), lambda: "finished steps"
    )
    click.echo(f"experiment {experiment_id}: capacity search over {own['kind']}, {base.resolved_scenario}")
    click.echo(steps_table(result))
    click.echo(verdict(result, "concurrency" if integer else "rate"))
    report_hint(experiment_id, base.results_dir, [objective])


with_run_options(capacity)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(capacity())
