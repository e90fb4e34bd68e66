"""`LOADGEN_NATIVE=0` leaves every C module of the per-request path out, each where it is used; without
it, each C part is used where its module is built."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

# module -> (its name for the C part, the C module that part comes from)
SWITCHED = {
    "loadgen.results.record": ("_json", "loadgen._json"),  # the requests.jsonl line
    "loadgen.jsonbytes": ("_json", "loadgen._json"),  # the orjson-equals-json check of a body
    "loadgen.workload.generator": ("_json", "loadgen._json"),  # a prompt's token ids
    "loadgen.transport.finish": ("_native_finish", "loadgen.transport._sse"),  # finalize, usual record
    "loadgen.run.backlog": ("_sse", "loadgen.transport._sse"),  # held_bytes
    "loadgen.transport.sse": ("_sse", "loadgen.transport._sse"),  # the marked parse
    "loadgen.transport.kernel_stamps": ("parse_head", "loadgen.transport._kread"),  # the response head
}


def _built(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:  # no compiler where the suite was installed: the Python parts run
        return False
    return True


def _left_out(env: dict[str, str]) -> list[bool]:
    code = "import importlib\n" + "".join(
        f"print(getattr(importlib.import_module({module!r}), {name!r}) is None)\n"
        for module, (name, _) in SWITCHED.items()
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [line == "True" for line in out.stdout.split()]


def test_loadgen_native_0_leaves_each_c_module_out() -> None:
    assert _left_out({**os.environ, "LOADGEN_NATIVE": "0"}) == [True] * len(SWITCHED)
    left_out = _left_out({k: v for k, v in os.environ.items() if k != "LOADGEN_NATIVE"})
    assert left_out == [not _built(c) for _, c in SWITCHED.values()]  # where built, they are used
