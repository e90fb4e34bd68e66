"""`python -m bench workers1`: what `--workers 1` costs against a plain `loadgen run` (issue #14).

A worker must be about as fast as a plain run, or `--workers N` scales from a lower ceiling than one
process has. One fast server (bench.reuseport_servers.ServerGroup, one instance) on the last usable
core; `loadgen run` (plain, then `--workers 1`) on the cores bench.scaling gives it (plain: one core;
workers: one per worker and one for the coordinator, shared when the host has too few), at each of
OVERHEAD_RATES (default 150,300 req/s; 32 tokens, TTFT 20 ms, 5 ms/token) for BENCH_SECONDS (4).
Figures per (mode, rate): achieved rate, schedule-lag p99, TTFT error p99 against the server's true
send, the `loadgen run` process tree's CPU ms/request (interpreter start-up included: compare the
modes, not the absolute figure), its wall seconds, and where the sends later than 2 ms fell
(bench.late_sends: bunched in a few 100 ms windows is the host stalling the client, spread over the run
is the client short of CPU). Runs on any host with two or more cores.
"""

from __future__ import annotations

import os

from bench.late_sends import late_spread
from bench.reuseport_servers import ServerGroup
from bench.scaling import _p, client_cores, parse_rates, run_point, ttft_errors_ms

DEFAULT_RATES = "150,300"
MODES: dict[str, int | None] = {"plain": None, "workers=1": 1}


def main() -> None:
    """Print plain vs `--workers 1` at each rate (see module docstring)."""
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        print("workers1: needs two usable cores (one for the server)")
        return
    try:
        rates = parse_rates(os.environ.get("OVERHEAD_RATES") or DEFAULT_RATES)
    except ValueError as exc:
        raise SystemExit(f"workers1: {exc}") from None
    seconds = float(os.environ.get("BENCH_SECONDS", "4"))
    server_cpu, client = usable[-1], usable[:-1]
    print(f"workers1: server on core {server_cpu}, loadgen on cores {client}; {seconds:g} s per point")
    head = "mode        rate  cores  achieved  lag_p99_ms  ttft_err_p99_ms  tree_cpu_ms/req  wall_s  ok"
    print(f"{head}  late sends")
    with ServerGroup([server_cpu], ttft_s=0.020, itl_s=0.005) as servers:
        for rate in rates:
            n = int(rate * seconds)
            args = ["--rate", str(rate), "--arrival", "constant", "--num-prompts", str(n)]
            args += ["--output-len", "fixed:32"]
            for name, workers in MODES.items():
                cores = client_cores(workers, client)
                got = run_point(servers, workers, args, cores)
                s, errs = got.summary, ttft_errors_ms(got.lines, got.base_ns, got.truth)
                lag_ms = (s["schedule_lag_s"]["p99"] or float("nan")) * 1e3
                print(
                    f"{name:<10}  {rate:>4}  {len(cores):>5}  {s['achieved_rate'] or 0.0:8.1f}  "
                    f"{lag_ms:10.3f}  {_p(errs, 99):15.3f}  {got.client_cpu_s * 1e3 / n:15.3f}  "
                    f"{got.wall_s:6.1f}  {s['requests']['ok']}/{n}  {late_spread(got.lines).line()}"
                )


if __name__ == "__main__":
    main()
