"""`loadgen align`: translate a vLLM launch line to SGLang's (and back), or `--check` two engines
(URLs or run ids) for effective parameters that differ."""

from __future__ import annotations

import shlex
import sys

import click

from infergauge.engines import ENGINES
from loadgen.analysis.align import AlignError, compare_params, translate, undecided
from loadgen.report.tables import render


def _check(a: str, b: str, results_dir: str, exporters: tuple[str | None, str | None]) -> int:
    from loadgen.results.manifest_schema import ManifestError
    from loadgen.results.rundir import RunNotFound
    from loadgen.run.engine_facts import facts_from_run, facts_from_url, identity_differences

    try:
        facts = [
            facts_from_url(x, e) if x.startswith(("http://", "https://")) else facts_from_run(results_dir, x)
            for x, e in zip((a, b), exporters, strict=True)
        ]
    except (RunNotFound, ManifestError, ConnectionError) as exc:
        click.echo(f"Error: {exc}", err=True)
        return 2
    fa, fb = facts
    click.echo(f"A: {fa.label} ({fa.engine} {fa.version or ''}, from {fa.source})")
    click.echo(f"B: {fb.label} ({fb.engine} {fb.version or ''}, from {fb.source})")
    rows = [[name, str(x), str(y)] for name, x, y in identity_differences(fa, fb)]
    rows += [[d.param, str(d.a), str(d.b)] for d in compare_params(fa.params, fb.params)]
    for name in undecided(fa.params, fb.params):
        click.echo(f"warning: {name} is 'auto' (the engine decides at start-up): set it on both")
    for side, one in (("A", fa), ("B", fb)):
        unknown = sorted(k for k, v in one.param_sources.items() if str(v).startswith("unknown"))
        if unknown:
            click.echo(
                f"warning: {side} does not say {', '.join(unknown)} (its launch flags were not read: "
                f"pass --exporter-{side.lower()} of an exporter on its host); not compared"
            )
    if not rows:
        click.echo("aligned: every effective parameter is the same")
        return 0
    click.echo(render(["parameter", "A", "B"], rows, left=(0, 1, 2)))
    click.echo(f"{len(rows)} differences")
    return 1


def _example_line() -> str:
    """A launch line of the first registered engine that has one (`vllm serve MODEL --max-num-seqs 128`)."""
    spec = next(s for s in ENGINES.values() if s.launcher and "max_num_seqs" in s.flags)
    return shlex.join([*spec.launcher, "MODEL", spec.flags["max_num_seqs"].spellings[0], "128"])


@click.command(context_settings={"ignore_unknown_options": True, "help_option_names": ["-h", "--help"]})
@click.option(
    "--to",
    "target",
    type=click.Choice(tuple(name for name, spec in ENGINES.items() if spec.launcher)),
    help="Engine to translate to.",
)
@click.option("--check", is_flag=True, help="Compare two engines: URL_A URL_B or RUN_A RUN_B.")
@click.option("--results-dir", default="results", show_default=True, help="Where run ids are looked up.")
@click.option("--exporter-a", help="Exporter URL for engine A (its launch flags from the process).")
@click.option("--exporter-b", help="Exporter URL for engine B.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def align(
    target: str | None,
    check: bool,
    results_dir: str,
    exporter_a: str | None,
    exporter_b: str | None,
    args: tuple[str, ...],
) -> None:
    """`loadgen align vllm serve M --max-num-seqs 128 ...` or `loadgen align --check URL_A URL_B`."""
    if check:
        if len(args) != 2:
            raise click.UsageError(f"--check needs two engines (URL_A URL_B or RUN_A RUN_B), got {len(args)}")
        sys.exit(_check(args[0], args[1], results_dir, (exporter_a, exporter_b)))
    argv = shlex.split(args[0]) if len(args) == 1 else list(args)
    if not argv:
        raise click.UsageError(f"give a launch line, e.g. loadgen align {_example_line()}")
    try:
        result = translate(argv, target)
    except AlignError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(result.command)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(align())
