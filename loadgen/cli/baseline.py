"""`loadgen baseline run|check|schedule|validate`: continuous baselines of a suite file (see examples/).

Exit status of `run` and `check`: 0 no open regression, 1 a confirmed regression (or a suspected one
with `--fail-on suspected`), 2 bad input (suite, options, store URL), 3 the pass failed.
With `--grafana-url` (or GRAFANA_URL; token from GRAFANA_TOKEN) each check also posts its new
confirmed change points to Grafana as annotations.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from loadgen.baseline.check import FAIL_ON, Finding
from loadgen.baseline.gate import EXIT_BAD_INPUT, EXIT_PASS_FAILED, check_store, exit_status, readiness
from loadgen.baseline.marks import left_out
from loadgen.baseline.report import console, document, markdown
from loadgen.baseline.stop import PassInterrupted, StopSignals
from loadgen.baseline.suite import Suite, load_suite
from loadgen.experiments.yamlnodes import PlanError
from loadgen.results.manifest_schema import ManifestError
from loadgen.store.db import StoreError
from loadgen.store.url import StoreURL, StoreURLError, parse_store

GRAFANA_HELP = (
    "Post new confirmed change points as Grafana annotations (or GRAFANA_URL; token: GRAFANA_TOKEN)."
)
STORE_HELP = (
    "Results database: sqlite:///PATH (default: <results-dir>/infergauge.db) or "
    "postgresql://USER@HOST/DB (password from PGPASSWORD or ~/.pgpass); env LOADGEN_STORE."
)


def _suite(path: str, results_dir: str | None) -> Suite:
    try:
        suite = load_suite(path)
    except PlanError as exc:
        click.echo("\n".join(f"Error: {p}" for p in exc.problems), err=True)
        sys.exit(EXIT_BAD_INPUT)
    if results_dir:
        suite = dataclasses.replace(suite, plan=dataclasses.replace(suite.plan, results_dir=results_dir))
    return suite


def _store(value: str | None, results_dir: str) -> StoreURL:
    try:
        url = parse_store(value, results_dir)
    except StoreURLError as exc:
        raise click.UsageError(str(exc)) from None
    if url is None:
        raise click.UsageError("--store none: a baseline needs a store")
    return url


def _output(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options every command that reports a check takes."""
    for option in (
        click.option("--store", metavar="URL", envvar="LOADGEN_STORE", help=STORE_HELP),
        click.option("--json", "as_json", is_flag=True, help="Print the check as JSON."),
        click.option(
            "--markdown", "markdown_file", type=click.Path(dir_okay=False), help="Write a Markdown report."
        ),
        click.option("--fail-on", type=click.Choice(FAIL_ON), default="confirmed", show_default=True),
        click.option("--grafana-url", envvar="GRAFANA_URL", metavar="URL", help=GRAFANA_HELP),
    ):
        fn = option(fn)
    return fn


def _grafana_token() -> str | None:
    """The Grafana service-account token, from the environment only (never an option, never logged)."""
    return os.environ.get("GRAFANA_TOKEN") or None


def _annotate(url: StoreURL, grafana_url: str | None) -> None:
    from loadgen.baseline.annotate import annotate_changes

    try:
        annotate_changes(url, grafana_url, _grafana_token(), log=lambda m: click.echo(m, err=True))
    except StoreError as exc:
        click.echo(f"warning: change points not annotated: results store {url.public}: {exc}", err=True)


def _check(url: StoreURL, suite: str | None, series: str | None) -> list[Finding]:
    try:
        return check_store(url, suite, series)
    except (StoreError, ManifestError) as exc:
        click.echo(f"Error: results store {url.public}: {exc}", err=True)
        sys.exit(EXIT_PASS_FAILED)


def _show(findings: Sequence[Finding], as_json: bool, markdown_file: str | None, fail_on: str) -> None:
    if as_json:
        click.echo(json.dumps(document(findings, fail_on), indent=2, default=str))
    else:
        click.echo("\n".join(console(findings, fail_on)))
    if markdown_file:
        Path(markdown_file).write_text(markdown(findings, fail_on))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def baseline() -> None:
    """Continuous baselines: run a suite's series, store them, find regressions and their causes."""


@baseline.command("validate")
@click.argument("suite_file", type=click.Path(dir_okay=False))
def validate(suite_file: str) -> None:
    """Check a suite file without running anything."""
    suite = _suite(suite_file, None)
    click.echo(
        f"{suite_file}: ok, suite {suite.name!r}, {len(suite.series)} series: {', '.join(suite.series)}"
    )


@baseline.command("run")
@click.argument("suite_file", type=click.Path(dir_okay=False))
@click.option("--results-dir", help="Override the suite's results_dir.")
@_output
def run(
    suite_file: str,
    results_dir: str | None,
    store: str | None,
    as_json: bool,
    markdown_file: str | None,
    fail_on: str,
    grafana_url: str | None,
) -> None:
    """One pass of every series (rows to the store), then the check; exit status as the group says."""
    from loadgen.baseline.cycle import confirm
    from loadgen.baseline.passrun import run_pass
    from loadgen.run.runner import run_benchmark_sync

    suite = _suite(suite_file, results_dir)
    url = _store(store, suite.plan.results_dir)
    api_key = os.environ.get("LOADGEN_API_KEY") or os.environ.get("OPENAI_API_KEY")

    def log(message: str) -> None:
        click.echo(message, err=True)

    result = run_pass(suite, url, run_fn=run_benchmark_sync, log=log, api_key=api_key)
    click.echo(f"pass {result.pass_id} of {suite.name}: {result.outcome}", err=True)
    for line in result.failures():
        click.echo(f"  failed: {line}", err=True)
    findings = _check(url, suite.name, None)
    try:  # a suspected change or a noisy newest run: confirmation runs at once (`confirm_runs`)
        findings = confirm(suite, url, findings, run_fn=run_benchmark_sync, log=log, api_key=api_key)
    except (StoreError, ManifestError) as exc:
        click.echo(f"Error: results store {url.public}: {exc}", err=True)
        sys.exit(EXIT_PASS_FAILED)
    _annotate(url, grafana_url)
    _readiness(url, suite.name)
    _show(findings, as_json, markdown_file, fail_on)
    sys.exit(exit_status(findings, fail_on, result.outcome != "ok"))


def _readiness(url: StoreURL, suite: str) -> None:
    """The store and each series' run count against what a check needs (stderr)."""
    try:
        lines = readiness(url, suite)
    except StoreError as exc:
        lines = [f"warning: results store {url.public}: {exc}"]
    for line in lines:
        click.echo(line, err=True)


@baseline.command("check")
@click.option("--suite", help="Only this suite (default: every suite in the store).")
@click.option("--series", help="Only this series of the suite(s).")
@click.option("--results-dir", default="results", show_default=True, help="Where the default store is.")
@_output
def check(
    suite: str | None,
    series: str | None,
    results_dir: str,
    store: str | None,
    as_json: bool,
    markdown_file: str | None,
    fail_on: str,
    grafana_url: str | None,
) -> None:
    """Change points of every stored series and metric, each with the ranked manifest diff."""
    url = _store(store, results_dir)
    findings = _check(url, suite, series)
    for line in left_out(url, suite, series):  # the check says which runs it left out, and why
        click.echo(line, err=True)
    _annotate(url, grafana_url)
    _show(findings, as_json, markdown_file, fail_on)
    sys.exit(exit_status(findings, fail_on))


@baseline.command("schedule")
@click.argument("suite_file", type=click.Path(dir_okay=False))
@click.option("--cron", required=True, help="When passes start (cron, UTC), e.g. '0 2 * * *'.")
@click.option("--results-dir", help="Override the suite's results_dir.")
@click.option(
    "--metrics-port", type=int, default=9404, show_default=True, help="The scheduler's /metrics (0: off)."
)
@click.option(
    "--metrics-address", default="127.0.0.1", show_default=True, help="Address /metrics listens on."
)
@click.option("--store", metavar="URL", envvar="LOADGEN_STORE", help=STORE_HELP)
@click.option("--fail-on", type=click.Choice(FAIL_ON), default="confirmed", show_default=True)
@click.option("--grafana-url", envvar="GRAFANA_URL", metavar="URL", help=GRAFANA_HELP)
def schedule(
    suite_file: str,
    cron: str,
    results_dir: str | None,
    metrics_port: int,
    metrics_address: str,
    store: str | None,
    fail_on: str,
    grafana_url: str | None,
) -> None:
    """Run a pass at every time of --cron, one at a time, until stopped; serves its own metrics."""
    from prometheus_client import start_http_server

    from loadgen.baseline.cycle import scheduled_pass
    from loadgen.baseline.schedule import Scheduler, SchedulerMetrics, check_cron
    from loadgen.run.runner import run_benchmark_sync

    suite = _suite(suite_file, results_dir)  # bad input is refused before the first pass
    try:
        check_cron(cron)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    url = _store(store, suite.plan.results_dir)
    stop = StopSignals()
    stop.install()
    metrics = SchedulerMetrics(suite.name)
    if metrics_port:
        start_http_server(metrics_port, metrics_address, registry=metrics.registry)
    api_key = os.environ.get("LOADGEN_API_KEY") or os.environ.get("OPENAI_API_KEY")

    def log(message: str) -> None:
        click.echo(message, err=True)

    log(f"baseline schedule of suite {suite.name!r} ({cron}): results store {url.public}")
    one = scheduled_pass(
        suite_file,
        url,
        run_fn=stop.around(run_benchmark_sync),
        results_dir=results_dir,
        fail_on=fail_on,
        log=log,
        api_key=api_key,
        grafana=(grafana_url, _grafana_token()),
    )
    try:
        Scheduler(cron, one, metrics, log=log).run()
    except (KeyboardInterrupt, PassInterrupted) as exc:
        code = stop.exit_code(exc)
        detail = f": {exc}" if str(exc) else ""
        click.echo(f"schedule stopped by {stop.signal_name(exc)}{detail}", err=True)
        sys.exit(code)
