"""The `loadgen` console script: `loadgen.cli.main.main` without the interpreter's start-up and exit
bookkeeping, which a run of a few thousand requests paid for in full (docs/client-cost.md).

- Start-up builds ~20,000 long-lived objects (modules, classes, functions). Python's automatic
  collections walk them again and again as they are made (~60 collections on the way to `run`); they
  hold no garbage, so collection is off until the subcommand is imported (`loadgen.cli.main.LazyGroup`
  turns it back on and freezes what start-up made, so later collections skip it).
- At the end, once the command has returned and every file it wrote is closed, the interpreter would
  tear down every module and free every object one by one (a run's records, arrays, connections:
  ~45 ms of CPU for 3,200 requests on the development VM). The process leaves instead with
  `os._exit` after running the exit handlers and flushing stdout and stderr, the way a C program's
  exit frees nothing by hand. Where a non-daemon thread is still alive, it exits the usual way (the
  interpreter waits for the thread).
- The methods dataclasses generate are compiled once and kept beside the bytecode cache
  (`loadgen.cli.codecache`): 264 compilations at every start-up before, ~20-26 ms on the VM.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading
from typing import NoReturn

from loadgen.cli.codecache import GeneratedCode, cache_path

_CODE: list[GeneratedCode] = []  # the process's dataclass code cache, saved as it leaves


def console() -> NoReturn:
    """Entry point of the `loadgen` console script (pyproject's [project.scripts])."""
    gc.disable()
    code = GeneratedCode(cache_path())
    code.install()
    _CODE.append(code)
    from loadgen.cli import main as cli_main

    cli_main.START_UP_GC_OFF[0] = True
    try:
        cli_main.main()
    except SystemExit as done:
        leave(done.code)
    leave(0)


def leave(code: object) -> NoReturn:
    """End the process with `code` (a SystemExit code: None, an int, or text printed to stderr and
    status 1) without tearing the interpreter down; the usual exit where a non-daemon thread runs."""
    status = _status(code)
    for cache in _CODE:
        cache.save()
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(not t.daemon and t.is_alive() for t in others):
        sys.exit(status)  # (a text code is printed already)
    atexit._run_exitfuncs()  # logging's flush, weakref finalizers, executors: what exit runs first
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe: nothing reaches it
            stream.flush()
    os._exit(status)


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1
