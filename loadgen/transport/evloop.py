"""The event loop a run uses: uvloop when it is installed (less CPU per request, steadier send
times), else the stock asyncio loop. The manifest's `client.event_loop` records which one ran."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None (asyncio's default) when uvloop cannot be imported."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)` on the preferred loop (see module docstring)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)


def loop_name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """`uvloop 0.23.0` or `asyncio` for the given (default: running) loop."""
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return "none"
    if type(loop).__module__.split(".")[0] == "uvloop":
        import uvloop

        return f"uvloop {uvloop.__version__}"
    return "asyncio"
