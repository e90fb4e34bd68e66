"""`python -m bench [NAME ...]`: run each benchmark module's `main()` and print its figures."""

from __future__ import annotations

import importlib
import sys
import time

# name -> module with a `main() -> None` that prints its figures
BENCHMARKS: dict[str, str] = {
    "loadgen": "bench.loadgen_client",
    "vsgo": "bench.vs_go",
    "kstamp": "bench.read_stamps",
    "simengine": "bench.sim_capacity",
    "exporter": "bench.exporter_scrape",
    "scaling": "bench.scaling",
    "workers1": "bench.worker_overhead",
    "baseline": "bench.baseline_check",
    "cpuprofile": "bench.cpu_profile",
}
# `python -m bench` with no names: these (scaling needs a many-core host: `python -m bench scaling`)
DEFAULT: tuple[str, ...] = ("loadgen", "vsgo", "cpuprofile", "simengine", "exporter", "baseline")


def main(argv: list[str]) -> int:
    names = argv or list(DEFAULT)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    for name in names:
        started = time.monotonic()
        print(f"\n=== bench: {name} ===", flush=True)
        importlib.import_module(BENCHMARKS[name]).main()
        print(f"=== {name} done in {time.monotonic() - started:.0f} s ===", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
