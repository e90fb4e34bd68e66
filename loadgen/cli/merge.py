"""`loadgen merge RUN_DIRS...`: combine shard records (`loadgen run --shard i/N`, `--workers`) into one
run folder, one runs.csv row and one row in the results store (`--store`, as `loadgen run`'s; the
shards' own rows stay marked as shards). Exit codes: 0 merged whole; 1 merged partial (a shard missing or not
whole, named in the summary); 2 the records are not one run (nothing written); 3 some files not written."""

from __future__ import annotations

import json
from pathlib import Path

import click

from loadgen.cli.run import OneLineErrors, results_line
from loadgen.cli.store import resolve_store, store_option


@click.command(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--results-dir", default="results", show_default=True, help="Where the merged run goes.")
@click.option("--json", "json_output", is_flag=True, help="Print the merged summary as JSON.")
@store_option
@click.pass_context
def merge(
    ctx: click.Context, run_dirs: tuple[str, ...], results_dir: str, json_output: bool, store: str | None
) -> None:
    """Merge shard run folders (results/<run_id>/ of each shard) into one run."""
    from loadgen.results.merge import merge as merge_shards
    from loadgen.results.merge import write_merged
    from loadgen.results.shard_record import MergeError, read_shard
    from loadgen.run.progress import summary_table
    from loadgen.store.writer import store_run

    url = resolve_store(store, results_dir)  # a bad --store is a usage error before anything is read
    paths = [Path(p) for p in run_dirs]
    try:
        merged = merge_shards([read_shard(p) for p in paths])
        written = write_merged(results_dir, merged, paths)
    except MergeError as exc:
        click.echo(f"Error: {exc}", err=True)
        ctx.exit(2)
    if json_output:
        click.echo(json.dumps(merged.summary, indent=2, default=str))
    else:
        click.echo(summary_table(merged.summary))
    click.echo(results_line(written.run_dir, written.not_written), err=True)
    if not written.not_written:  # the row is built from the folder: only once the folder is whole
        store_run(url, results_dir, merged.run_id, lambda line: click.echo(line, err=True))
    if merged.summary["partial"]:
        click.echo(f"partial: {merged.summary['partial_reason']}", err=True)
    ctx.exit(3 if written.not_written else 1 if merged.summary["partial"] else 0)
