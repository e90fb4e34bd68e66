"""`loadgen experiment run|resume|validate|status`: run a YAML experiment plan (see examples/)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import click

from loadgen.cli.store import store_option
from loadgen.experiments.expand import expand, warmup_warnings
from loadgen.experiments.plan import load_plan
from loadgen.experiments.plantypes import Plan
from loadgen.experiments.state import (
    DONE,
    ExperimentNotFound,
    ExperimentState,
    experiment_dir,
    load_state,
    new_experiment_id,
)
from loadgen.experiments.yamlnodes import PlanError
from loadgen.report.tables import render


def _plan(path: str, results_dir: str | None) -> Plan:
    try:
        plan = load_plan(path)
    except PlanError as exc:
        click.echo("\n".join(f"Error: {p}" for p in exc.problems), err=True)
        raise SystemExit(2) from None
    return dataclasses.replace(plan, results_dir=results_dir) if results_dir else plan


def _status_table(plan: Plan, state: ExperimentState) -> str:
    rows = []
    for spec in expand(plan):
        entry = state.runs.get(spec.key, {})
        cache = entry.get("cache") or {}
        flushed = cache.get("flushed")
        cleared = "yes" if flushed is True else "NO" if flushed is False else "-"
        rows.append(
            [
                spec.key,
                "partial" if entry.get("partial") else entry.get("status", "pending"),
                entry.get("run_id") or "-",
                f"{cleared} ({cache.get('method') or '-'})",
                (entry.get("error") or "")[:60],
            ]
        )
    return render(["run", "status", "run_id", "cache cleared", "error"], rows, left=(0, 1, 2, 3, 4))


def _execute(plan: Plan, state: ExperimentState, store: str | None) -> None:
    from loadgen.experiments.runner import ExperimentInterrupted, ExperimentRunner, ExperimentStopped
    from loadgen.run.runner import run_benchmark_sync
    from loadgen.store.url import StoreURLError
    from loadgen.store.writer import storing

    api_key = os.environ.get("LOADGEN_API_KEY") or os.environ.get("OPENAI_API_KEY")

    def log(message: str) -> None:
        click.echo(message, err=True)

    try:
        run_fn = storing(run_benchmark_sync, store, log)
    except StoreURLError as exc:
        raise click.UsageError(str(exc)) from None
    runner = ExperimentRunner(plan, state, run_fn=run_fn, log=log, api_key=api_key)
    code = 0
    try:
        runner.run()
    except ExperimentInterrupted as exc:
        click.echo(f"interrupted: {exc}", err=True)
        code = 130
    except ExperimentStopped as exc:
        click.echo(f"Error: {exc}", err=True)
        code = 1
    click.echo(f"experiment {state.experiment_id} ({plan.name}): {state.status}")
    click.echo(_status_table(plan, state))
    if code == 0 and any(e.get("status") != DONE for e in state.runs.values()):
        code = 1
    click.echo(f"report: loadgen report {state.experiment_id} --results-dir {plan.results_dir}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def experiment() -> None:
    """Run experiment plans: phases x engines x workloads x loads, resumable."""


@experiment.command("validate")
@click.argument("plan_file", type=click.Path(dir_okay=False))
def validate(plan_file: str) -> None:
    """Check a plan without running anything; prints the runs it would do."""
    plan = _plan(plan_file, None)
    runs = expand(plan)
    click.echo(f"{plan_file}: ok, {len(runs)} runs in {len(plan.phases)} phases")
    for warning in warmup_warnings(plan, runs):
        click.echo(f"warning: {warning}", err=True)
    for spec in runs:
        click.echo(f"  {spec.key}")


@experiment.command("run")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--results-dir", help="Override the plan's results_dir.")
@click.option("--experiment-id", help="Use this id (default: exp-<UTC time>-<random>).")
@store_option
def run(plan_file: str, results_dir: str | None, experiment_id: str | None, store: str | None) -> None:
    """Validate then run a plan; Ctrl-C keeps finished runs (continue with `resume`)."""
    plan = _plan(plan_file, results_dir)
    experiment_id = experiment_id or new_experiment_id()
    directory = experiment_dir(plan.results_dir, experiment_id)
    if (directory / "state.json").exists():
        raise click.UsageError(f"experiment {experiment_id!r} exists; use `loadgen experiment resume`")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(plan_file, directory / "plan.yaml")
    state = ExperimentState(experiment_id, directory, plan.name, plan.purpose)
    _execute(plan, state, store)


def _existing(fn: Callable[..., None]) -> Callable[..., None]:
    """EXPERIMENT_ID and --results-dir: the arguments naming an experiment that exists."""
    where = click.option(
        "--results-dir", default="results", show_default=True, help="Where the experiment lives."
    )
    return click.argument("experiment_id")(where(fn))


@experiment.command("resume")
@_existing
@store_option
def resume(experiment_id: str, results_dir: str, store: str | None) -> None:
    """Continue an interrupted experiment: runs already finished are not repeated."""
    _execute(*_load(experiment_id, results_dir), store)


@experiment.command("status")
@_existing
def status(experiment_id: str, results_dir: str) -> None:
    """Show each run of an experiment and whether it finished."""
    plan, state = _load(experiment_id, results_dir)
    click.echo(f"experiment {experiment_id} ({plan.name}): {state.status}")
    click.echo(_status_table(plan, state))


def _load(experiment_id: str, results_dir: str) -> tuple[Plan, ExperimentState]:
    """An existing experiment's plan (its plan.yaml, results under `results_dir`) and state."""
    try:
        state = load_state(results_dir, experiment_id)
    except ExperimentNotFound as exc:
        raise click.UsageError(str(exc)) from None
    if not (Path(state.directory) / "plan.yaml").is_file():
        raise click.UsageError(f"experiment {experiment_id!r} has no plan.yaml (a sweep or capacity search?)")
    return _plan(str(state.directory / "plan.yaml"), results_dir), state


if __name__ == "__main__":  # pragma: no cover
    sys.exit(experiment())
