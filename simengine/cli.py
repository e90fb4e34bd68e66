"""`python -m simengine` / `loadgen sim`: parse a vLLM- or SGLang-style launch line and serve."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys

from aiohttp import web

from infergauge.fdlimit import FdLimitWatch, raise_open_files_limit
from simengine.app import build_app
from simengine.config import FLAG_PARSER, ConfigError, SimConfig, parse_args


async def _serve(cfg: SimConfig) -> None:
    raise_open_files_limit()  # one descriptor per stream: the soft limit up to the hard one
    FdLimitWatch("simengine").install(asyncio.get_running_loop())
    runner = web.AppRunner(build_app(cfg), access_log=None, handle_signals=False, shutdown_timeout=5.0)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, backlog=4096)
    await site.start()
    host, port = runner.addresses[0][:2]
    print(
        f"simengine ({cfg.personality} personality, model {cfg.served_model_name}, gpu {cfg.gpu} "
        f"x{cfg.tensor_parallel_size}) listening on http://{host}:{port}",
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


USAGE = """usage: python -m simengine [serve MODEL] [flags]   (also: loadgen sim [flags])

Simulated OpenAI-compatible engine with a vLLM (default, port 8000), SGLang (port 30000) or llama.cpp
(--personality llamacpp, port 8080) personality.
A real vLLM or SGLang launch line runs unchanged; flags it does not model are accepted and recorded.
Examples:
  python -m simengine --tensor-parallel-size 2 --max-num-seqs 128 --gpu-memory-utilization 0.90 \\
      --block-size 16 --enable-chunked-prefill --max-model-len 4096 --port 8000
  python -m simengine --personality sglang --tp-size 2 --max-running-requests 128 \\
      --mem-fraction-static 0.90 --chunked-prefill-size 4096 --port 30000
"""


def main(argv: list[str] | None = None) -> int:
    """Run the server until SIGINT/SIGTERM; exit code 2 on a bad flag (one-line error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        options = FLAG_PARSER.format_help().split("options:", 1)[-1]
        print(USAGE + "\nflags (vLLM and SGLang spellings):" + options)
        return 0
    try:
        cfg = parse_args(args, os.environ)  # the one place the environment is read
    except ConfigError as exc:
        print(f"simengine: error: {exc}", file=sys.stderr)
        return 2
    if cfg.extra_args:
        print(
            f"simengine: accepted, not modelled: {', '.join('--' + k for k in cfg.extra_args)}",
            file=sys.stderr,
        )
    try:
        asyncio.run(_serve(cfg))
    except OSError as exc:
        print(f"simengine: error: cannot listen on {cfg.host}:{cfg.port}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
