"""`loadgen sweep`: the same workload and seed at several concurrencies or rates, one experiment id;
prints a table per point, the knee (and its method) and the throughput at each SLO."""

from __future__ import annotations

import sys
from typing import Any

import click

from loadgen.analysis.knee import KNEE_METHOD, find_knee, throughput_at_sla
from loadgen.analysis.points import Point
from loadgen.analysis.slo import Objective, SloError, parse_objectives
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
from loadgen.config import ConfigError
from loadgen.experiments.loads import make_measure, parse_loads
from loadgen.experiments.state import ExperimentState, experiment_dir, new_experiment_id
from loadgen.report.tables import points_table

OWN = ("concurrency", "rate_list", "slo", "knee_threshold")


def summary_lines(points: list[Point], objectives: list[Objective], threshold: float) -> list[str]:
    """The knee and throughput-at-SLO lines printed under the table."""
    unit = "concurrency" if points[0].kind == "concurrency" else "req/s"
    knee = find_knee(points, threshold)
    if knee is None:
        lines = ["knee: not reached (throughput still grows with load)"]
    else:
        lines = [
            f"knee: {unit} {knee.load:g} ({knee.throughput:.2f} req/s; "
            f"next step's elasticity {knee.elasticity_after:.2f})"
        ]
    lines.append(f"knee method: {KNEE_METHOD.format(threshold=threshold)}")
    for objective in objectives:
        sla = throughput_at_sla(points, objective)
        if sla.load is None:
            lines.append(f"throughput at SLO {objective.label}: none ({sla.how})")
            continue
        lines.append(
            f"throughput at SLO {objective.label}: {sla.request_throughput:.2f} req/s, "
            f"{sla.output_token_throughput:.1f} output tok/s at {unit} {sla.load:.3g} ({sla.how})"
        )
    return lines


@click.command(cls=OneLineErrors, context_settings=CONTEXT)
@click.option("--concurrency", help="Comma-separated concurrencies, e.g. 1,8,16,32,64 (rate = inf).")
@click.option("--rate", "rate_list", help="Comma-separated request rates (req/s), e.g. 1,2,4,8,16.")
@click.option("--slo", multiple=True, help="Latency objective, e.g. e2e_p99=500ms (repeatable).")
@click.option(
    "--knee-threshold",
    type=float,
    default=0.2,
    show_default=True,
    help="Elasticity below which throughput counts as no longer growing.",
)
@click.pass_context
def sweep(ctx: click.Context, **params: Any) -> None:
    """Sweep the load: `loadgen sweep --concurrency 1,8,16 --slo e2e_p99=500ms` (+ `loadgen run` options)."""
    own, run_params = split_params(params, OWN)
    if bool(own["concurrency"]) == bool(own["rate_list"]):
        raise click.UsageError("give exactly one of --concurrency 1,8,16 or --rate 1,2,4")
    kind = "concurrency" if own["concurrency"] else "rate"
    try:
        loads = parse_loads(own["concurrency"] or own["rate_list"], kind)
        objectives = parse_objectives(own["slo"])
    except (ConfigError, SloError) as exc:
        raise click.UsageError(str(exc)) from None
    experiment_id = new_experiment_id()
    base = base_config(run_params, list(ctx.args), experiment_id, objectives, kind, loads[0])
    state = ExperimentState(
        experiment_id,
        experiment_dir(base.results_dir, experiment_id),
        name="sweep",
        purpose=f"{kind} sweep {','.join(f'{v:g}' for v in loads)}",
    )
    specs = tuple(o.spec() for o in objectives)
    measure = make_measure(base, kind, state, runner_for(run_params), "sweep", echo_err, specs)
    points: list[Point] = []
    run_points(
        ctx, state, lambda: points.extend(measure(load) for load in loads), lambda: f"{len(points)} points"
    )
    click.echo(f"experiment {experiment_id}: {kind} sweep, {base.resolved_scenario}, seed {base.seed}")
    click.echo(points_table(points))
    click.echo("\n".join(summary_lines(points, objectives, own["knee_threshold"])))
    report_hint(experiment_id, base.results_dir, objectives)


with_run_options(sweep)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(sweep())
