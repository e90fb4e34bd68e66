"""`infergauge-exporter`: serve /metrics, /manifest and /healthz (default :9402).

Every option has an environment twin INFERGAUGE_EXPORTER_<OPTION> (e.g. INFERGAUGE_EXPORTER_ENGINE_URL,
space-separated for several); flags win over the environment.
"""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from aiohttp import web

from exporter.app import Exporter, ExporterConfig, build_app
from exporter.collectors.registry import COLLECTORS
from exporter.nvml.reading import DEFAULT_TIMEOUT_S
from exporter.webconfig import WebConfigError, load_web_config
from infergauge.engines import names_text

ENV_PREFIX = "INFERGAUGE_EXPORTER"
# All interfaces, as before the option existed: the compose stack's Prometheus reaches the exporter
# from another container (its port is published on 127.0.0.1 only). See README "Exporter".
DEFAULT_LISTEN_ADDRESS = "0.0.0.0"
F = TypeVar("F", bound=Callable[..., Any])


def _validate_url(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    for url in values:
        if not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"{url!r} is not an http(s) URL")
    return list(values)


def _validate_address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    try:
        socket.getaddrinfo(value, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise click.BadParameter(f"{value!r} is not an address of this host ({exc})") from None
    return value


def _env(name: str) -> str:
    return f"{ENV_PREFIX}_{name}"


def _option(flag: str, *decls: str, **kwargs: Any) -> Callable[[F], F]:
    """A click option with its environment twin: `--engine-url` reads INFERGAUGE_EXPORTER_ENGINE_URL."""
    name = flag.split("/")[0].removeprefix("--").replace("-", "_").upper()
    return click.option(flag, *decls, envvar=_env(name), **kwargs)


def _collectors(flag: str, dest: str, help_text: str) -> Callable[[F], F]:
    """A repeatable choice among the collectors."""
    return _option(flag, dest, multiple=True, type=click.Choice(COLLECTORS), help=help_text)


@click.command(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@_option("--port", type=click.IntRange(0, 65535), default=9402, help="Listen port.")
@click.option(
    "--listen-address",
    "--host",
    "listen_host",
    envvar=[_env("LISTEN_ADDRESS"), _env("HOST")],
    default=DEFAULT_LISTEN_ADDRESS,
    callback=_validate_address,
    help="Address to listen on: 127.0.0.1 keeps /metrics and /manifest (launch flags, host facts) on "
    "this host; the default serves a Prometheus on another host or in a container.",
)
@_option(
    "--engine-url",
    multiple=True,
    callback=_validate_url,
    help="Engine base URL to poll (repeatable; space-separated in the env), e.g. http://127.0.0.1:8000.",
)
@_option(
    "--engine-api-key",
    default=None,
    show_default=False,
    help="Bearer token for the engine's API (never logged or exported).",
)
@_option(
    "--discover/--no-discover",
    default=True,
    help=f"Find {names_text('and')} processes on this host (every registered engine).",
)
@_option(
    "--sample-interval",
    type=click.FloatRange(0, 60),
    default=1.0,
    help="Seconds between background samples of power/utilization peaks and GPM (0 = off).",
)
@_option(
    "--nvml-timeout",
    type=click.FloatRange(0.01, 60),
    default=DEFAULT_TIMEOUT_S,
    help="Seconds a scrape waits for one GPU's NVML reading; a late GPU serves its last good values.",
)
@_collectors("--collector", "enabled", "Run only these collectors (repeatable). Default: all.")
@_collectors("--no-collector", "disabled", "Do not run this collector (repeatable).")
@_option(
    "--web-config-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="exporter-toolkit web config: tls_server_config, basic_auth_users (bcrypt).",
)
@_option(
    "--once",
    type=click.Choice(["metrics", "manifest"]),
    default=None,
    help="Print one scrape or the manifest to stdout and exit.",
)
@_option(
    "--fake-gpus",
    type=click.IntRange(0, 64),
    default=0,
    hidden=True,
    help="Testing/benchmarks only: N simulated GPUs instead of NVML (modelName says fake).",
)
@_option(
    "--fake-hung-gpu",
    type=click.IntRange(0, 63),
    multiple=True,
    hidden=True,
    help="Testing/benchmarks only: this fake GPU's NVML calls never return (repeatable).",
)
@_option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
def main(
    port: int,
    listen_host: str,
    engine_url: list[str],
    engine_api_key: str | None,
    discover: bool,
    sample_interval: float,
    nvml_timeout: float,
    enabled: tuple[str, ...],
    disabled: tuple[str, ...],
    web_config_file: str | None,
    once: str | None,
    fake_gpus: int,
    fake_hung_gpu: tuple[int, ...],
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
        nvml_timeout_s=nvml_timeout,
    )
    web_config = None
    if web_config_file:
        try:
            web_config = load_web_config(web_config_file)
        except WebConfigError as exc:  # one line, no usage banner: the flag is fine, the file is not
            click.echo(f"Error: --web-config-file: {exc}", err=True)
            raise SystemExit(2) from None
    for index in fake_hung_gpu:
        if index >= fake_gpus:
            raise click.BadParameter(
                f"{index} is not one of the {fake_gpus} fake GPUs", param_hint="--fake-hung-gpu"
            )
    session = _fake_session(fake_gpus, fake_hung_gpu) if fake_gpus else None
    exporter = Exporter(config, session=session)
    if once:
        _print_once(exporter, once)
        return
    ssl_context = web_config.ssl_context() if web_config else None
    exporter.warm()  # the first /manifest then answers from facts, not after the engines' slowest endpoint
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


def _fake_session(gpus: int, hung: tuple[int, ...]) -> Any:
    from exporter.nvml.fake import FakeGpu, FakeNvml
    from exporter.nvml.session import NvmlSession

    nvml = FakeNvml([FakeGpu(i, name="NVIDIA H200 (fake)") for i in range(gpus)])
    for index in hung:
        nvml.hang(index, float("inf"))
    return NvmlSession(nvml)


def _print_once(exporter: Exporter, what: str) -> None:
    try:
        if what == "metrics":
            exporter.tick()
            sys.stdout.write(exporter.metrics_text().decode())
        else:
            sys.stdout.write(exporter.manifest_json().decode() + "\n")
    finally:
        exporter.stop()


def run(argv: list[str] | None = None) -> Any:
    """Entry point usable from `python -m exporter`."""
    return main.main(args=argv, prog_name="infergauge-exporter")
