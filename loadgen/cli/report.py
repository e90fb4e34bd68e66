"""`loadgen report RUN_OR_EXPERIMENT...`: Markdown report (seed's template), results CSV and charts."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from loadgen.analysis.slo import Objective, SloError, parse_objective


def _collect(ids: tuple[str, ...], results_dir: str) -> tuple[list, list[str], str]:
    """(run records, experiment ids, purpose) for a mix of run ids and experiment ids."""
    from loadgen.experiments.state import experiment_dir, load_state
    from loadgen.results.rundir import load_run

    records, experiments, purposes = [], [], []
    for item in ids:
        if (experiment_dir(results_dir, item) / "state.json").is_file():
            state = load_state(results_dir, item)
            experiments.append(item)
            purposes.append(state.purpose or state.name)
            records += [load_run(results_dir, run_id) for run_id in state.run_ids()]
        else:
            records.append(load_run(results_dir, item))
    return records, experiments, "; ".join(p for p in purposes if p)


def _recorded_objective(records: list) -> Objective | None:
    """The first objective an experiment plan recorded in its runs' manifests, if any."""
    for record in records:
        experiment = record.typed.experiment
        for spec in experiment.slo if experiment else ():
            return parse_objective(spec)
    return None


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("ids", nargs=-1, required=True)
@click.option("--results-dir", default="results", show_default=True, help="Where runs and experiments are.")
@click.option("--out", "out_dir", help="Output directory (default RESULTS_DIR/reports/<first id>).")
@click.option("--slo", help="Objective for the SLA line and throughput at the SLA, e.g. e2e_p99=500ms.")
@click.option("--cost-per-hour", type=float, help="Price of the serving hardware per hour (any currency).")
@click.option("--title", help="Report title (default: the ids).")
@click.option("--purpose", help="Purpose line (default: the experiment's).")
def report(
    ids: tuple[str, ...],
    results_dir: str,
    out_dir: str | None,
    slo: str | None,
    cost_per_hour: float | None,
    title: str | None,
    purpose: str | None,
) -> None:
    """Write report.md + results.csv + PNG charts for runs and/or experiments."""
    from loadgen.report.markdown import ReportOptions, write_report
    from loadgen.results.manifest_schema import ManifestError
    from loadgen.results.rundir import RunNotFound

    try:
        objective = parse_objective(slo) if slo else None
    except SloError as exc:
        raise click.UsageError(str(exc)) from None
    if cost_per_hour is not None and cost_per_hour < 0:
        raise click.UsageError(f"invalid --cost-per-hour {cost_per_hour!r}: must be >= 0")
    try:
        records, experiments, found_purpose = _collect(ids, results_dir)
    except RunNotFound as exc:
        click.echo(f"Error: {exc} (nor an experiment id)", err=True)
        sys.exit(2)
    except ManifestError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    if not records:
        click.echo(f"Error: no finished runs in {', '.join(ids)}", err=True)
        sys.exit(2)
    if objective is None:
        objective = _recorded_objective(records)
    out = Path(out_dir) if out_dir else Path(results_dir) / "reports" / ids[0]
    options = ReportOptions(
        title=title or ", ".join(ids),
        purpose=purpose or found_purpose,
        experiment_ids=tuple(experiments),
        objective=objective,
        cost_per_hour=cost_per_hour,
    )
    path = write_report(records, out, options)
    click.echo(f"report: {path} (+ results.csv and charts in {out}/)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(report())
