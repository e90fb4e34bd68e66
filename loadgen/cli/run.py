"""`loadgen run` (the default command): one benchmark run against a target.

Sources resolve as `--config run.yaml` < environment (`LOADGEN_*`, `OPENAI_API_KEY`, `GRAFANA_URL`,
`GRAFANA_TOKEN`) < flags. Exit codes: 0 ok; 1 the run failed its error budget or was interrupted
(a partial result is still written); 2 usage error, unreachable target or unwritable results dir
(nothing sent); 3 the run was measured but some of its files could not be written (named on stderr).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

import click

from infergauge import engines
from loadgen.cli.shard_options import SCALE_KEYS, scale_options, shard_plan, worker_count
from loadgen.cli.store import STORE_ENV, store_option
from loadgen.cli.traffic_options import traffic_fields, traffic_options
from loadgen.config import (
    ARRIVALS,
    ENDPOINTS,
    HTTP_CLIENTS,
    PROFILES,
    WORKLOADS,
    ConfigError,
    RunConfig,
    env_overrides,
    load_yaml,
    parse_duration,
    parse_rate,
    parse_slo,
    resolve,
    strip_api_suffix,
    target_names,
)
from loadgen.records import RunResult
from loadgen.store.url import StoreURL, StoreURLError, parse_store


class TargetChoice(click.Choice):
    """`--target`'s choices, read from the engine registry at each use (a registered engine counts)."""

    def __init__(self) -> None:
        super().__init__(target_names())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return target_names()

    @choices.setter
    def choices(self, _value: object) -> None:  # click's __init__ assigns it; the registry decides
        pass


class OneLineErrors(click.Command):
    """Usage errors print as one line (`Error: ...`) without the usage banner; exit code 2."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            exc.ctx = None
            raise


def sim_passthrough(extra: list[str]) -> tuple[str, ...]:
    """`--sim-max-num-seqs 64 --sim-x=1` -> ("--max-num-seqs", "64", "--x=1"); other extras are errors."""
    out: list[str] = []
    i = 0
    while i < len(extra):
        token = extra[i]
        if not token.startswith("--sim-"):
            raise click.UsageError(f"no such option {token!r} (see loadgen run --help)")
        out.append("--" + token[len("--sim-") :])
        if "=" not in token and i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            out.append(extra[i + 1])
            i += 1
        i += 1
    return tuple(out)


def _flag_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """Click values (None when not given) converted to RunConfig fields."""
    not_config = ("config", "json_output", "quiet", "store", *SCALE_KEYS)
    flags = {k: v for k, v in params.items() if k not in not_config and v is not None}
    if "rate" in flags:
        flags["rate"] = parse_rate(flags["rate"])
    if "duration" in flags:
        flags["duration_s"] = parse_duration(flags.pop("duration"))
    if "request_timeout" in flags:
        flags["request_timeout_s"] = parse_duration(flags.pop("request_timeout"), "request timeout")
    if "linger" in flags:
        flags["linger_s"] = float(flags.pop("linger"))
    if "slo" in flags:
        flags["slo"] = parse_slo(flags["slo"])
    return traffic_fields(flags)  # trace / sessions / ShareGPT flags and the vllm bench serve aliases


def build_config(params: Mapping[str, Any], extra: list[str], environ: Mapping[str, str]) -> RunConfig:
    """Resolve YAML < env < flags into a RunConfig (raises ConfigError / click.UsageError)."""
    yaml_values = load_yaml(params["config"]) if params.get("config") else {}
    env_values = env_overrides({k: v for k, v in environ.items() if k != STORE_ENV})  # --store's own
    for var, key in (
        ("OPENAI_API_KEY", "api_key"),
        ("GRAFANA_URL", "grafana_url"),
        ("GRAFANA_TOKEN", "grafana_token"),
    ):
        if environ.get(var) and key not in env_values:
            env_values[key] = environ[var]
    flags = _flag_values(params)
    sim_args = sim_passthrough(extra)
    if sim_args:
        flags["sim_args"] = tuple(yaml_values.get("sim_args", ())) + sim_args
    config = resolve(yaml_values, env_values, flags)
    if config.base_url:
        base_url, note = strip_api_suffix(config.base_url)
        if note:
            click.echo(note, err=True)
            config = dataclasses.replace(config, base_url=base_url)
    if config.sim_args:  # a bad --sim-X is a usage error before anything runs
        from loadgen.cli.sim import check_sim_args  # simengine is imported only when used

        check_sim_args(config.sim_args)
    return config


def _fail(ctx: click.Context, message: str) -> NoReturn:
    """One-line usage error on stderr, exit code 2."""
    click.echo(f"Error: {message}", err=True)
    ctx.exit(2)


def _raise_fd_limit() -> None:
    """Many concurrent streams need many sockets: lift the soft open-files limit to the hard one."""
    from infergauge.fdlimit import raise_open_files_limit

    raise_open_files_limit()


@click.command(
    cls=OneLineErrors,
    context_settings={
        "ignore_unknown_options": True,
        "allow_extra_args": True,
        "help_option_names": ["-h", "--help"],
    },
)
@click.option(
    "--config", type=click.Path(dir_okay=False), help="run.yaml with RunConfig fields (flags override)."
)
@click.option("--target", type=TargetChoice(), help="Engine preset (default sim: embedded simulator).")
@click.option(
    "--base-url", help=f"Server URL ({engines.default_ports_text()} by default; required for openai)."
)
@click.option("--model", help="Model name (default: the first of /v1/models).")
@click.option("--endpoint", type=click.Choice(ENDPOINTS), help="completions (default) or chat.")
@click.option("--api-key", help="Bearer token (or OPENAI_API_KEY); never logged or stored.")
@click.option("--seed", type=int, help="Seed of the workload and schedule (default 42).")
@click.option("--workload", type=click.Choice(WORKLOADS), help="Prompt generator (default random).")
@click.option("--dataset", type=click.Path(dir_okay=False), help="JSONL file for --workload jsonl.")
@click.option("--input-len", help="fixed:N | uniform:A-B | normal:MEAN,STD | lognormal:MEDIAN,SIGMA.")
@click.option("--output-len", help="Output length distribution (same forms as --input-len).")
@click.option(
    "--profile", type=click.Choice(tuple(PROFILES)), help="short 64/64, medium 512/256, long 2048/512."
)
@click.option("--shared-prefix-len", type=int, help="Tokens of the shared system prompt (shared-prefix).")
@click.option("--shared-prefix-groups", type=int, help="Number of distinct shared prefixes (shared-prefix).")
@click.option("--ignore-eos/--no-ignore-eos", default=None, help="Exact output lengths (default on).")
@click.option("--rate", help="Requests per second, or inf (default) to send all at once.")
@click.option("--arrival", type=click.Choice(ARRIVALS), help="Arrival process (default poisson).")
@click.option("--burstiness", type=float, help="Gamma shape for --arrival gamma (1 = Poisson).")
@click.option("--max-concurrency", type=int, help="Cap on requests in flight.")
@click.option("--num-prompts", type=int, help="Measured requests (default 1000 unless --duration).")
@click.option("--duration", help="Stop sending after this long (e.g. 30, 30s, 2m).")
@click.option("--warmup", type=int, help="First N requests excluded from the statistics.")
@click.option("--slo", help="Goodput SLOs, e.g. ttft=200ms,tpot=50ms,e2e=2s.")
@click.option("--request-timeout", help="Per-request timeout (default 600s).")
@click.option("--max-error-rate", type=float, help="Stop and exit 1 above this failed share (default 0.1).")
@click.option("--metrics-port", type=int, help="Live /metrics port (default 9403; 0 disables).")
@click.option(
    "--metrics-listen-address",
    help="Address live /metrics listens on (default 127.0.0.1; 0.0.0.0 serves every interface).",
)
@click.option("--linger", type=float, help="Seconds /metrics stays up after the run (default 15).")
@click.option("--results-dir", help="Where results/<run_id>/ go (default results).")
@click.option("--scenario", help="Scenario label (default <workload>-<profile>).")
@click.option("--experiment-id", help="Experiment this run belongs to.")
@click.option(
    "--exporter-url", help="infergauge exporter (default: try http://127.0.0.1:9402; none: attach none)."
)
@click.option("--grafana-url", help="Annotate the run in Grafana (or GRAFANA_URL; token from GRAFANA_TOKEN).")
@store_option
@click.option("--json", "json_output", is_flag=True, help="Print the summary as JSON instead of the table.")
@click.option("--quiet", is_flag=True, help="No progress display.")
@click.option(
    "--http-client",
    type=click.Choice(HTTP_CLIENTS),
    help="Load transport: raw (default: minimal HTTP/1.1 on asyncio.Protocol) or aiohttp.",
)
@scale_options
@traffic_options
@click.pass_context
def run(ctx: click.Context, **params: Any) -> None:
    """Run a benchmark: `loadgen --target sglang --rate 10` (extra `--sim-X V` go to the simulator)."""
    from loadgen.run.runner import run_benchmark_sync

    try:
        config = build_config(params, list(ctx.args), os.environ)
        shard, workers = shard_plan(params, os.environ), worker_count(params.get("workers"))
        if shard is not None and workers is not None:
            raise ConfigError("--workers runs every shard on this host: give it or --shard, not both")
        if workers is not None:  # checked here, before any warning: a bad flag is one line
            from loadgen.scale.workers import concurrency_shares

            concurrency_shares(config.max_concurrency, workers)
        unknown_length = config.total_requests is None and math.isinf(config.rate)
        if (shard is not None or workers is not None) and unknown_length:
            raise ConfigError("a sharded run needs a known schedule: give --num-prompts or a finite --rate")
        if (shard is not None or workers is not None) and config.traffic and config.traffic.closed_loop:
            raise ConfigError(
                "sessions cannot be sharded (each turn waits for its answer): drop --shard/--workers"
            )
    except (ConfigError, click.UsageError) as exc:
        _fail(ctx, str(exc) if isinstance(exc, ConfigError) else exc.format_message())
    try:
        store = parse_store(params["store"], config.results_dir)
    except StoreURLError as exc:
        _fail(ctx, str(exc))
    _raise_fd_limit()
    from loadgen.scale.orphans import recover_and_say
    from loadgen.store.writer import store_run
    from loadgen.workload.warmup import warmup_warning

    for rebuilt in recover_and_say(config.results_dir):  # a --workers run whose coordinator died
        store_run(store, config.results_dir, rebuilt, lambda line: click.echo(line, err=True))

    burst = warmup_warning(config.warmup, config.max_concurrency)
    if burst:
        click.echo(f"warning: {burst}", err=True)
    late = LateSignals()
    show = functools.partial(_show, config, late, json_output=params["json_output"], store=store)
    try:
        if workers is not None:
            from loadgen.scale.workers import run_workers

            result = run_workers(config, workers, params, progress=not params["quiet"], on_result=show)
        else:
            result = run_benchmark_sync(
                config, progress=not params["quiet"], on_result=show, late_signals=late, shard=shard
            )
    except ConfigError as exc:  # unreachable target, busy metrics port, unusable dataset
        _fail(ctx, str(exc))
    for sig in (signal.SIGINT, signal.SIGTERM):  # the record is written: exit with its code
        signal.signal(sig, signal.SIG_IGN)
    ctx.exit(result.exit_code)


class LateSignals:
    """Ctrl-C / SIGTERM outside the run's own handling: before the run it aborts (nothing measured);
    once the record is written it is absorbed, so the exit code stays the run's (never 130)."""

    def __init__(self) -> None:
        self.recorded = False

    def __call__(self, sig: signal.Signals) -> None:
        """Route one signal (see the class docstring)."""
        if not self.recorded:
            raise KeyboardInterrupt


def _show(
    config: RunConfig, late: LateSignals, result: RunResult, *, json_output: bool, store: StoreURL | None
) -> None:
    """Print the summary (before the linger), write the run's row to the results store, say where
    the record went and how long /metrics stays."""
    from loadgen.results.manifest_schema import read_manifest
    from loadgen.run.progress import summary_table
    from loadgen.store.writer import store_run
    from loadgen.targets.cache_counters import cache_warning

    late.recorded = True
    if json_output:
        click.echo(json.dumps(result.summary, indent=2, default=str))
    else:
        click.echo(summary_table(result.summary))
    warning = cache_warning(result.run_id, read_manifest(result.manifest).cache.raw)
    if warning:
        click.echo(warning, err=True)
    from loadgen.report.vllm_result import save_vllm_result

    saved = save_vllm_result(config, result.result_dir, result.summary)
    if saved is not None:
        click.echo(f"vllm bench serve result: {saved}", err=True)
    # the row first: a record not fully written stays the last line the user reads
    store_run(store, config.results_dir, result.run_id, lambda line: click.echo(line, err=True))
    click.echo(results_line(result.result_dir, result.not_written), err=True)
    if config.metrics_port and config.linger_s:
        click.echo(
            f"metrics stay up for {config.linger_s:g} s on :{config.metrics_port}/metrics (Ctrl-C ends it)",
            err=True,
        )


def results_line(result_dir: Any, not_written: Mapping[str, str]) -> str:
    """Where the record went, or exactly which of its files could not be written and why."""
    if not not_written:
        return f"results: {result_dir}/ (manifest.json, summary.json, requests.jsonl)"
    missing = ", ".join(f"{name} ({why})" for name, why in not_written.items())
    return f"Error: not written under {result_dir}/: {missing}; the summary above is printed anyway"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
