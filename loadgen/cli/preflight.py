"""`loadgen preflight`: the environment snapshot before a run, as tables, with checks.

The seed's `preflight.sh` as a command: host, GPUs (clocks, locks, power, throttling), topology,
engines and their launch parameters, then checks. Reads this host directly, or a remote exporter's
`/manifest` with `--exporter-url`. Exit codes: 0 no error check; 1 an error check (e.g. the GPU is
thermally throttled, a configured engine is down); 2 bad input or exporter unreachable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
from rich.console import Console

from infergauge.redact import redact_url
from loadgen.cli.preflight_view import has_error, render
from loadgen.config import NO_EXPORTER
from loadgen.targets.exporter_client import ExporterUnreachable, read_exporter_manifest


def local_manifest(engine_urls: list[str]) -> dict[str, Any]:
    """Build the manifest on this host (NVML, processes, --engine-url polling)."""
    from exporter.app import Exporter, ExporterConfig

    exporter = Exporter(ExporterConfig(engine_urls=engine_urls, sample_interval_s=0))
    try:
        return json.loads(exporter.manifest_json())
    finally:
        exporter.stop()


def _fail(message: str) -> None:
    """One-line usage error, exit code 2."""
    click.echo(f"Error: {message}", err=True)
    raise SystemExit(2)


@click.command("preflight")
@click.option(
    "--exporter-url",
    default=None,
    envvar="LOADGEN_EXPORTER_URL",
    help="Read the manifest of this exporter (e.g. http://gpu-host:9402) instead of this host.",
)
@click.option("--engine-url", multiple=True, help="Engine URL to check when reading this host (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON instead of tables.")
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the manifest JSON to this file.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the exporter.",
)
def preflight(
    exporter_url: str | None, engine_url: tuple[str, ...], as_json: bool, save: Path | None, timeout: float
) -> None:
    """Snapshot host, GPUs, topology and engines; exit 1 when a check is an error."""
    if exporter_url == NO_EXPORTER:  # LOADGEN_EXPORTER_URL=none (as for runs): read this host
        exporter_url = None
    for url in (exporter_url, *engine_url):
        if url is not None and urlsplit(url).scheme not in ("http", "https"):
            _fail(f"{redact_url(url)!r} is not an http(s) URL (e.g. http://127.0.0.1:9402)")
    if exporter_url:
        try:
            manifest = read_exporter_manifest(exporter_url, timeout)
        except ExporterUnreachable as exc:
            _fail(f"cannot read {exc}")
    else:
        manifest = local_manifest(list(engine_url))
    if save is not None:
        save.write_text(json.dumps(manifest, indent=2) + "\n")
    if as_json:
        click.echo(json.dumps(manifest, indent=2))
    else:
        render(manifest, Console(width=160))
    if has_error(manifest):
        raise SystemExit(1)
