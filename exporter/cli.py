"""`infergauge-exporter`: serve /metrics, /manifest and /healthz (default :9402).

Every option has an environment twin INFERGAUGE_EXPORTER_<OPTION> (e.g. INFERGAUGE_EXPORTER_ENGINE_URL,
space-separated for several); flags win over the environment.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click
from aiohttp import web

from exporter.app import COLLECTORS, Exporter, ExporterConfig, build_app
from exporter.webconfig import WebConfigError, load_web_config

ENV_PREFIX = "INFERGAUGE_EXPORTER"


def _validate_url(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    for url in values:
        if not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"{url!r} is not an http(s) URL")
    return list(values)


def _env(name: str) -> str:
    return f"{ENV_PREFIX}_{name}"


@click.command(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.option("--port", envvar=_env("PORT"), type=click.IntRange(0, 65535), default=9402, help="Listen port.")
@click.option("--host", "listen_host", envvar=_env("HOST"), default="0.0.0.0", help="Listen address.")
@click.option(
    "--engine-url",
    envvar=_env("ENGINE_URL"),
    multiple=True,
    callback=_validate_url,
    help="Engine base URL to poll (repeatable; space-separated in the env), e.g. http://127.0.0.1:8000.",
)
@click.option(
    "--engine-api-key",
    envvar=_env("ENGINE_API_KEY"),
    default=None,
    show_default=False,
    help="Bearer token for the engine's API (never logged or exported).",
)
@click.option(
    "--discover/--no-discover",
    envvar=_env("DISCOVER"),
    default=True,
    help="Find vLLM/SGLang/simulated engine processes on this host.",
)
@click.option(
    "--sample-interval",
    envvar=_env("SAMPLE_INTERVAL"),
    type=click.FloatRange(0, 60),
    default=1.0,
    help="Seconds between background samples of power/utilization peaks and GPM (0 = off).",
)
@click.option(
    "--collector",
    "enabled",
    envvar=_env("COLLECTOR"),
    multiple=True,
    type=click.Choice(COLLECTORS),
    help="Run only these collectors (repeatable). Default: all.",
)
@click.option(
    "--no-collector",
    "disabled",
    envvar=_env("NO_COLLECTOR"),
    multiple=True,
    type=click.Choice(COLLECTORS),
    help="Do not run this collector (repeatable).",
)
@click.option(
    "--web-config-file",
    envvar=_env("WEB_CONFIG_FILE"),
    type=click.Path(dir_okay=False),
    default=None,
    help="exporter-toolkit web config: tls_server_config, basic_auth_users (bcrypt).",
)
@click.option(
    "--once",
    envvar=_env("ONCE"),
    type=click.Choice(["metrics", "manifest"]),
    default=None,
    help="Print one scrape or the manifest to stdout and exit.",
)
@click.option(
    "--fake-gpus",
    envvar=_env("FAKE_GPUS"),
    type=click.IntRange(0, 64),
    default=0,
    hidden=True,
    help="Testing/benchmarks only: N simulated GPUs instead of NVML (modelName says fake).",
)
@click.option(
    "--log-level",
    envvar=_env("LOG_LEVEL"),
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
)
def main(
    port: int,
    listen_host: str,
    engine_url: list[str],
    engine_api_key: str | None,
    discover: bool,
    sample_interval: float,
    enabled: tuple[str, ...],
    disabled: tuple[str, ...],
    web_config_file: str | None,
    once: str | None,
    fake_gpus: int,
    log_level: str,
) -> None:
    """Sidecar exporter: GPU (NVML, dcgm-exporter names), engine launch parameters, host manifest."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    collectors = tuple(c for c in (enabled or COLLECTORS) if c not in disabled)
    config = ExporterConfig(
        host=listen_host,
        port=port,
        collectors=collectors,
        engine_urls=engine_url,
        discover=discover,
        sample_interval_s=sample_interval,
        engine_api_key=engine_api_key,
    )
    web_config = None
    if web_config_file:
        try:
            web_config = load_web_config(web_config_file)
        except WebConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--web-config-file") from exc
    exporter = Exporter(config, session=_fake_session(fake_gpus) if fake_gpus else None)
    if once:
        _print_once(exporter, once)
        return
    ssl_context = web_config.ssl_context() if web_config else None
    logging.getLogger("exporter").info(
        "listening on %s:%d, collectors %s", listen_host, port, ",".join(collectors)
    )
    web.run_app(
        build_app(exporter, web_config),
        host=listen_host,
        port=port,
        ssl_context=ssl_context,
        print=None,
        access_log=None,
    )


def _fake_session(gpus: int) -> Any:
    from exporter.fake_nvml import FakeGpu, FakeNvml
    from exporter.nvml import NvmlSession

    return NvmlSession(FakeNvml([FakeGpu(i, name="NVIDIA H200 (fake)") for i in range(gpus)]))


def _print_once(exporter: Exporter, what: str) -> None:
    try:
        if what == "metrics":
            if exporter.sampler is not None:
                exporter.sampler.tick()
            sys.stdout.write(exporter.metrics_text().decode())
        else:
            sys.stdout.write(exporter.manifest_json().decode() + "\n")
    finally:
        exporter.stop()


def run(argv: list[str] | None = None) -> Any:
    """Entry point usable from `python -m exporter`."""
    return main.main(args=argv, prog_name="infergauge-exporter")
