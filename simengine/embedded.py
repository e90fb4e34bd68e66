"""`EmbeddedEngine(argv)`: the simulated engine in a daemon thread of this process, on 127.0.0.1:0.

Used by `loadgen --target sim`: `with EmbeddedEngine(["--max-num-seqs", "64"]) as eng: eng.base_url`.

The embedded engine starts in dev mode (`--dev-mode`, vLLM's `VLLM_SERVER_DEV_MODE=1`) unless told
`--no-dev-mode`: it runs inside loadgen, so no exporter can read its launch flags from a process command
line, and its `/server_info` is where loadgen reads them (and `/reset_prefix_cache` flushes it if a
caller keeps it between runs; loadgen itself starts a fresh one per run). A standalone
`python -m simengine` reads `VLLM_SERVER_DEV_MODE` from its environment, as real vLLM does.
It also reports `usage.prompt_tokens_details.cached_tokens` (`--enable-prompt-tokens-details`) unless
told `--no-enable-prompt-tokens-details`, so `--target sim` runs record cached tokens per request;
a standalone engine, like the real ones, sends them only with the flag.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from types import TracebackType

from aiohttp import web

from infergauge.fdlimit import FdLimitWatch, raise_open_files_limit
from simengine.app import build_app
from simengine.config import SimConfig, parse_args

START_TIMEOUT_S = 30.0
DEV_MODE_FLAGS = ("--dev-mode", "--no-dev-mode")
# usage.prompt_tokens_details: the engine loadgen embeds reports cached tokens unless told not to
DETAILS_FLAGS = (
    "--enable-prompt-tokens-details",
    "--enable-cache-report",
    "--no-enable-prompt-tokens-details",
)


class EmbeddedEngine:
    """A simulated engine on a free loopback port, with its own event loop in a daemon thread."""

    def __init__(self, argv: list[str] | None = None) -> None:
        args = list(argv or [])
        if "--port" not in args:
            args += ["--port", "0"]
        if "--host" not in args:
            args += ["--host", "127.0.0.1"]
        if not any(a.split("=", 1)[0] in DEV_MODE_FLAGS for a in args):
            args.append("--dev-mode")
        if not any(a.split("=", 1)[0] in DETAILS_FLAGS for a in args):
            args.append("--enable-prompt-tokens-details")
        self.config: SimConfig = parse_args(args)
        self.base_url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._cpu_ns = 0  # the engine thread's CPU at its last reading

    @property
    def app(self) -> web.Application | None:
        return self._runner.app if self._runner is not None else None

    def cpu_ns(self) -> int:
        """CPU time of the engine's thread so far, ns (0 before it starts; once it has ended, its last
        reading): what loadgen leaves out of its own CPU figures (loadgen/run/client_cpu.py)."""
        thread = self._thread
        if thread is not None and thread.ident is not None:
            with contextlib.suppress(OSError, AttributeError):  # ended; no per-thread clocks here
                self._cpu_ns = time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))
        return self._cpu_ns

    def start(self) -> EmbeddedEngine:
        """Start serving; returns once the port is bound (raises what the server raised)."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._thread_main, name="simengine", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError("simulated engine did not start within 30 s")
        if self._error is not None:
            raise self._error
        return self

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._setup())
        except BaseException as exc:  # handed to the starting thread
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._cleanup())
        loop.close()

    async def _setup(self) -> None:
        cfg = self.config
        raise_open_files_limit()  # one descriptor per stream: the soft limit up to the hard one
        FdLimitWatch("the simulated engine").install(asyncio.get_running_loop())
        self._runner = web.AppRunner(
            build_app(cfg), access_log=None, handle_signals=False, shutdown_timeout=5.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, cfg.host, cfg.port, backlog=4096)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}"

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        self._thread = None
        self._loop = None

    def __enter__(self) -> EmbeddedEngine:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
