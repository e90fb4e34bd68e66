"""Options shared by `loadgen sweep` and `loadgen capacity`: every `loadgen run` option except the
load itself (rate / concurrency), which the command varies."""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from loadgen.analysis.slo import Objective
from loadgen.cli.run import build_config
from loadgen.cli.run import run as run_command
from loadgen.config import ConfigError, RunConfig
from loadgen.experiments.state import ExperimentState

T = TypeVar("T")

# The load is varied by the command; `--slo` takes percentile objectives here (ttft_p99=300ms).
VARIED = ("rate", "max_concurrency", "json_output", "experiment_id", "slo")
CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h", "--help"]}


def with_run_options(command: click.Command) -> click.Command:
    """Append copies of `loadgen run`'s options (minus the varied ones) to a command."""
    for param in run_command.params:
        if param.name not in VARIED:
            command.params.append(copy.copy(param))
    return command


def split_params(params: dict[str, Any], own: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(this command's own values, the run options)."""
    mine = {k: v for k, v in params.items() if k in own}
    return mine, {k: v for k, v in params.items() if k not in own}


def base_config(
    run_params: dict[str, Any],
    extra: list[str],
    experiment_id: str,
    objectives: list[Objective],
    kind: str,
    first_load: float,
) -> RunConfig:
    """The RunConfig every point starts from: linger 0 unless given; the objectives' limits become
    the per-request goodput SLO (a request counts when its TTFT/TPOT/E2E is within the limit)."""
    if run_params.get("linger") is None:
        run_params = {**run_params, "linger": 0.0}
    # validate with the first point's load in place (each point replaces it)
    load = {"max_concurrency": int(first_load)} if kind == "concurrency" else {"rate": str(first_load)}
    run_params = {**run_params, **load}
    try:
        config = build_config(run_params, extra, os.environ)
        slo = {o.summary_key: o.limit_s for o in objectives if o.metric in ("ttft", "tpot", "e2e")}
        return dataclasses.replace(config, experiment_id=experiment_id, slo={**config.slo, **slo})
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def runner_for(run_params: dict[str, Any]) -> Callable[[RunConfig], Any]:
    """run_benchmark_sync with the progress display unless --quiet; each point's row goes to --store."""
    from loadgen.run.runner import run_benchmark_sync
    from loadgen.store.url import StoreURLError
    from loadgen.store.writer import storing

    quiet = bool(run_params.get("quiet"))
    try:
        return storing(lambda c: run_benchmark_sync(c, progress=not quiet), run_params.get("store"), echo_err)
    except StoreURLError as exc:
        raise click.UsageError(str(exc)) from None


def echo_err(message: str) -> None:
    """Progress lines go to stderr so stdout holds the tables."""
    click.echo(message, err=True)


def run_points(
    ctx: click.Context, state: ExperimentState, work: Callable[[], T], kept: Callable[[], str]
) -> T:
    """Run an experiment's points and mark its state done; Ctrl-C keeps what finished (exit 1), a bad
    point configuration marks the state failed and exits 2."""
    try:
        result = work()
    except KeyboardInterrupt:
        state.status = "interrupted"
        state.save()
        echo_err(f"interrupted: {kept()} kept in experiment {state.experiment_id}")
        ctx.exit(1)
    except ConfigError as exc:
        state.status = "failed"
        state.save()
        click.echo(f"Error: {exc}", err=True)
        ctx.exit(2)
    state.status = "done"
    state.save()
    return result


def report_hint(
    experiment_id: str, results_dir: str | os.PathLike[str], objectives: Sequence[Objective] = ()
) -> None:
    """The `loadgen report` command for an experiment (with its first objective), on stderr."""
    slo = f" --slo {objectives[0].spec()}" if objectives else ""
    echo_err(f"report: loadgen report {experiment_id} --results-dir {results_dir}{slo}")


LogFn = Callable[[str], None]
