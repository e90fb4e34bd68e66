"""`python -m bench scaling`: loadgen's ceiling with `--workers 1, 2, 4, 8` (issue #14, many-core host).

S fast servers (bench.loadgen_client's FastServer, each in its own process pinned to its own core) all
listen on ONE port with SO_REUSEPORT, so Linux spreads the client's connections over them; each stamps
the true send time of every chunk (perf_counter_ns: CLOCK_MONOTONIC, shared by every process on the
host) per X-Request-Id, and the union of their dumps is the ground truth. A plain `loadgen run` (one
process, the row `plain`: the ceiling the target is read against) runs pinned to core 0; `loadgen run
--workers N` to cores 0..N (the coordinator takes one, loadgen.scale.pinning), all off the servers'
cores. The merged record's `*_ns` count from the run's common
start (`--start-at`, mapped to perf_counter_ns by `loadgen.workload.shard.perf_base`), so the bench adds
`perf_base(start_at)` back before comparing with the servers' stamps (the wall/monotonic drift between
the run's start and the analysis is microseconds on one host).
Figures: per (workers, rate): achieved rate, schedule-lag p99, TTFT error p99 (client first token minus
the server's true send), client CPU ms/request (the `loadgen run` process tree, RUSAGE_CHILDREN: it
includes interpreter start-up), the busiest server's CPU share (its CPU seconds over the servers'
serving span, first token sent to last: start-up idling excluded) and the streams each server
finished (min-max: how evenly SO_REUSEPORT spread the connections); per (workers, streams):
client-ingested vs server-sent tokens/s; and a ceiling line per worker count with its ratio to the
plain run's. With SCALING_GRID=small the grid is reduced (plain, workers 1, 2; rates 100, 200; 64
streams; two servers; cores shared) to exercise the code. `python -m bench workers1`
(bench.worker_overhead) compares a plain run with `--workers 1` on any host of two cores or more.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench import host_noise
from bench.late_sends import late_spread
from bench.reuseport_servers import ServerGroup
from loadgen.scale.pinning import sysfs_siblings
from loadgen.stats import percentile
from loadgen.workload.shard import parse_start_at, perf_base

# what the `loadgen` console script runs (loadgen.cli.console; a tree from before it: cli.main's main)
LOADGEN = (
    "import sys; sys.argv[0] = 'loadgen'\n"
    "try:\n    from loadgen.cli.console import console as main\n"
    "except ImportError:\n    from loadgen.cli.main import main\n"
    "main()"
)
MIN_CORES = 8
MAX_SERVERS = 8
WORKERS = (1, 2, 4, 8)
PLAIN = 0  # a grid's "workers" for a plain `loadgen run` (one process): the ceiling --workers scales from
RATES = (500, 1000, 2000, 4000)  # req/s (issue #14); SCALING_RATES overrides
STREAMS = (1000, 4000, 8000)
SUSTAINED_SHARE = 0.99  # achieved >= 99% of asked
LAG_LIMIT_MS = 2.0
QUIET_WAIT_S = 15.0  # before a retry, the longest wait for the host's timer floor to be quiet (host_noise)
TRIES = 3  # runs of a point before it counts as not sustained: host noise only ever adds lag (below)
SERVER_BUSY = 0.9  # a server's CPU share above this: the server, not loadgen, may be the limit


@dataclass(frozen=True)
class Grid:
    """The points to run: worker counts, rates (req/s), concurrent-stream counts, server count."""

    workers: tuple[int, ...]
    rates: tuple[int, ...]
    streams: tuple[int, ...]
    servers: int
    label: str


class Servers(Protocol):
    """What a point needs of its server(s): bench.reuseport_servers.ServerGroup or bench.ref_group's."""

    url: str
    split: list[int]

    def cpu(self) -> list[float]:
        """CPU seconds so far, per server."""
        ...

    def dump(self) -> dict[str, list[int]]:
        """X-Request-Id -> each token's send time, for the streams finished since the last dump."""
        ...


# (cpus, ttft_s, itl_s) -> a context manager giving Servers (ServerGroup, or the reference server's)
ServerFactory = Callable[[Sequence[int], float, float], AbstractContextManager[Servers]]


@dataclass(frozen=True)
class Point:
    """One rate point's figures."""

    workers: int
    asked: float
    achieved: float
    lag_p99_ms: float
    server_busy: float
    ttft_err_p99_ms: float = math.nan  # client first token minus the server's true send, p99


def plan_grid(cores: int, small: bool, rates: tuple[int, ...] = RATES) -> Grid | None:
    """The grid for `cores`: a plain run (workers 0) and the most workers of 1/2/4/8 that leave a core
    for the coordinator and one for a server, servers on the cores left (at most 8); None when too few
    cores for the full grid and `small` is not asked."""
    if small:
        return Grid(
            (PLAIN, 1, 2), (100, 200), (64,), 2, "reduced grid (SCALING_GRID=small; 2 servers, cores shared)"
        )
    if cores < MIN_CORES:
        return None
    most = max(w for w in WORKERS if w + 2 <= cores)
    servers = min(MAX_SERVERS, cores - most - 1)
    workers = (PLAIN, *(w for w in WORKERS if w <= most))
    label = (
        f"{cores} cores: loadgen on cores 0..N (a plain run on 0; --workers N: the coordinator on 0, "
        f"worker i on i + 1), {servers} servers on cores {cores - servers}..{cores - 1}"
    )
    return Grid(workers, rates, STREAMS, servers, label)


def mode_name(workers: int) -> str:
    """`plain` for a plain `loadgen run` (workers 0), else the worker count."""
    return "plain" if workers == PLAIN else str(workers)


def positive_ints(name: str, text: str, hint: str) -> tuple[int, ...]:
    """`name`=`text` ("250,500"): positive whole numbers, ascending; ValueError naming the bad value."""
    try:
        values = tuple(sorted(int(v) for v in text.split(",")))
    except ValueError:
        values = ()
    if not values or values[0] <= 0:
        raise ValueError(f"{name}={text!r}: give comma-separated positive whole numbers ({hint})")
    return values


def parse_rates(text: str | None) -> tuple[int, ...]:
    """SCALING_RATES ("250,500,1000"): positive req/s, ascending; the issue's rates when unset."""
    return positive_ints("SCALING_RATES", text, "req/s, e.g. 250,500") if text else RATES


def parse_workers(text: str | None, grid: Grid) -> Grid:
    """SCALING_WORKERS ("plain,4,8"): only these rows of `grid` (its worker counts; `plain` is the
    plain run); SCALING_STREAMS ("1000,4000", or "none" for no ingest table) is read by the caller."""
    if not text:
        return grid
    names = {mode_name(w): w for w in grid.workers}
    asked = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in asked if x not in names]
    if bad or not asked:
        raise ValueError(f"SCALING_WORKERS={text!r}: give rows of this host's grid, from {','.join(names)}")
    keep = tuple(w for w in grid.workers if mode_name(w) in asked)
    return Grid(keep, grid.rates, grid.streams, grid.servers, grid.label)


def parse_streams(text: str | None, grid: Grid) -> Grid:
    """SCALING_STREAMS ("1000,4000"; "none": no ingest table): the concurrent-stream counts to run."""
    if not text:
        return grid
    none = text.strip() == "none"
    streams = () if none else positive_ints("SCALING_STREAMS", text, "stream counts, or none")
    return Grid(grid.workers, grid.rates, streams, grid.servers, grid.label)


def sustained(p: Point) -> bool:
    """Achieved >= 99% of asked and schedule-lag p99 < 2 ms."""
    return p.achieved >= SUSTAINED_SHARE * p.asked and p.lag_p99_ms < LAG_LIMIT_MS


def ceiling(points: Sequence[Point]) -> dict[int, float | None]:
    """Per worker count: the highest asked rate sustained (achieved >= 99% of asked, lag p99 < 2 ms)."""
    out: dict[int, float | None] = {}
    for p in points:
        best = out.get(p.workers)
        out[p.workers] = max(best or 0.0, p.asked) if sustained(p) else best
    return out


def ceiling_lines(points: Sequence[Point]) -> list[str]:
    """One line per worker count: its ceiling (a lower bound when it is the grid's top rate), the ratio
    to the plain run's ceiling (else the fewest workers'), and a note when a server was busy."""
    ceilings, lines = ceiling(points), []
    grid_top = max((p.asked for p in points), default=0.0)
    base = min(ceilings) if ceilings else PLAIN
    one = ceilings.get(base)
    base_name = "plain-run" if base == PLAIN else f"{base}-worker"
    for workers, top in sorted(ceilings.items()):
        ratio = f"{top / one:.2f}x the {base_name} ceiling" if top and one else "no ratio"
        busy = max(p.server_busy for p in points if p.workers == workers)
        note = (
            f"; a server reached {100 * busy:.0f}% CPU: the server may be the limit"
            if busy > SERVER_BUSY
            else ""
        )
        shown = f"{top:g} req/s" if top else "none of the rates"
        shown = f"at least {shown} (the grid's top rate)" if top == grid_top else shown
        who = "plain run" if workers == PLAIN else f"{workers} worker(s)"
        held = [p.ttft_err_p99_ms for p in points if p.workers == workers and sustained(p)]
        worst = max((v for v in held if not math.isnan(v)), default=math.nan)
        ttft = f"; TTFT error p99 <= {worst:.2f} ms at the rates held" if held else ""
        lines.append(f"ceiling, {who}: {shown} sustained ({ratio}){ttft}{note}")
    return lines


def ttft_errors_ms(
    lines: Sequence[Mapping[str, Any]], base_ns: int, truth: Mapping[str, list[int]]
) -> list[float]:
    """Client first token (merged time base + base_ns) minus the server's true first-token send, ms."""
    return [
        (x["first_token_ns"] + base_ns - truth[x["x_request_id"]][0]) / 1e6
        for x in lines
        if x.get("first_token_ns") is not None and x.get("x_request_id") in truth
    ]


def token_rate(tokens: int, first_ns: int, last_ns: int) -> float:
    """Tokens per second over [first_ns, last_ns] (nan when the span is empty)."""
    return tokens / ((last_ns - first_ns) / 1e9) if last_ns > first_ns else float("nan")


def ingest_rates(lines: Sequence[Mapping[str, Any]], truth: Mapping[str, list[int]]) -> tuple[float, float]:
    """(server tokens/s over its first to last send, client tokens/s over its first to last token)."""
    sent = [v for v in truth.values() if v]
    ok = [x for x in lines if x.get("first_token_ns") is not None and x.get("last_token_ns") is not None]
    if not sent or not ok:
        return float("nan"), float("nan")
    server = token_rate(sum(map(len, sent)), min(v[0] for v in sent), max(v[-1] for v in sent))
    c_first, c_last = min(x["first_token_ns"] for x in ok), max(x["last_token_ns"] for x in ok)
    return server, token_rate(sum(x["output_tokens"] for x in ok), c_first, c_last)


def serving_span_s(truth: Mapping[str, list[int]]) -> float:
    """Seconds from the servers' first token send to their last (0 when nothing was sent)."""
    stamps = [v for v in truth.values() if v]
    return (max(v[-1] for v in stamps) - min(v[0] for v in stamps)) / 1e9 if stamps else 0.0


def _p(values: list[float], q: float) -> float:
    return percentile(sorted(values), q) if values else float("nan")


@dataclass(frozen=True)
class Outcome:
    """One `loadgen run` subprocess: the merged record's lines, start base, CPU and the servers' share."""

    summary: dict[str, Any]
    lines: list[dict[str, Any]]
    base_ns: int
    client_cpu_s: float
    server_busy: float
    truth: dict[str, list[int]]
    split: tuple[int, ...]
    wall_s: float = 0.0
    noise: str = ""  # what the host took from the client's cores (bench.host_noise)


def loadgen_cmd(url: str, workers: int | None, args: Sequence[str]) -> list[str]:
    """`loadgen run` against the servers: `--workers N`, or a plain run (one process) when None."""
    cmd = [sys.executable, "-c", LOADGEN, "run", "--target", "openai", "--base-url", url, "--model", "bench"]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    cmd += ["--input-len", "fixed:32", "--metrics-port", "0", "--linger", "0"]
    return [*cmd, "--max-error-rate", "1", "--quiet", "--json", *args]


def client_cores(workers: int | None, usable: Sequence[int]) -> set[int]:
    """The cores the `loadgen run` process tree may use: one per worker plus one for the coordinator
    (a plain run: one), the first of `usable`; fewer when `usable` is shorter (cores shared)."""
    want = 1 if workers is None else workers + 1
    return set(usable[: max(1, min(want, len(usable)))])


def run_point(servers: Servers, workers: int | None, args: Sequence[str], cores: set[int]) -> Outcome:
    """Run `loadgen run [--workers N] ARGS` pinned to `cores` and read its (merged) record."""
    cmd = loadgen_cmd(servers.url, workers, args)
    with tempfile.TemporaryDirectory() as out:
        before, cpu0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), servers.cpu(), time.monotonic()
        ticks0 = host_noise.cpu_times()
        done = subprocess.run(
            [*cmd, "--results-dir", out],
            capture_output=True,
            text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, cores),
            check=False,
        )
        wall, cpu1 = time.monotonic() - t0, servers.cpu()  # wall: the fallback when nothing was served
        steal = host_noise.steal_share(ticks0, host_noise.cpu_times(), cores)
        # before the dump: the reference server is a child too, reaped (and counted) when it ends there
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        truth = servers.dump()  # also after a failed run: the next point starts with empty servers
        found = sorted(Path(out).glob("*/requests.jsonl"))
        if not found:
            raise RuntimeError(f"loadgen run exited {done.returncode}: {done.stderr.strip()[-300:]}")
        lines = [json.loads(x) for x in found[0].read_text().splitlines()]
        manifest = json.loads((found[0].parent / "manifest.json").read_text())
        summary = json.loads((found[0].parent / "summary.json").read_text())
    start_at = (manifest.get("shards") or {}).get("start_at")  # a plain run's `*_ns` are perf_counter's
    base_ns = perf_base(parse_start_at(start_at)) if start_at else 0
    client = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    busy = max(b - a for a, b in zip(cpu0, cpu1, strict=True)) / (serving_span_s(truth) or wall)
    noise = host_noise.noise_note(steal)
    return Outcome(summary, lines, base_ns, client, busy, truth, tuple(servers.split), wall, noise)


def rate_grid(
    grid: Grid,
    cpus: Sequence[int],
    usable: Sequence[int],
    seconds: float,
    make: ServerFactory = ServerGroup,
    tries: int = TRIES,
) -> list[Point]:
    """Table 1: workers x rate (32 tokens, TTFT 20 ms, 5 ms/token); returns the points for the ceilings.
    A point not sustained is run again, up to TRIES runs in all, and counts as sustained when one run
    is: a client that cannot keep up builds a backlog in every run, while a stall of the host (a
    neighbour, the hypervisor) only ever adds lag, so the best run is the client's own figure. Every
    run is printed (the later ones marked `retry N`), and a row stops at the first rate failed TRIES
    times. The grid runs rate by rate, each rate on every row still going (plain, 2, 4, 8 workers at
    800, then at 1,200, ...): a noisy stretch of the host then hits the rows at one rate alike instead of
    one row's whole grid, so the ratios between rows are measured on the same minutes."""
    print(
        "workers   rate  achieved  lag_p50_ms  lag_p99_ms  ttft_err_p99_ms  client_cpu_ms/req  server_cpu%  "
        "req/server  ok"
    )
    points: list[Point] = []
    told: set[int] = set()
    with make(cpus, 0.020, 0.005) as servers:
        for rate, workers in [(r, w) for r in grid.rates for w in grid.workers]:
            failed = next((p.asked for p in points if p.workers == workers and not sustained(p)), None)
            if failed is not None:  # a saturated client runs long past its seconds: skip what cannot pass
                if workers not in told:
                    told.add(workers)
                    why = f"{failed:g} req/s was not sustained"
                    print(f"{mode_name(workers):>7}  {rate:>5}  skipped from here on: {why}")
                continue
            point = rate_point(servers, workers, rate, usable, seconds)
            for retry in range(1, tries):
                if sustained(point):
                    break
                point = rate_point(servers, workers, rate, usable, seconds, retry)
            points.append(point)
    return points


def rate_point(
    servers: Servers, workers: int, rate: int, usable: Sequence[int], seconds: float, retry: int = 0
) -> Point:
    """One rate point, its row printed (a failed run is a row with no rate achieved)."""
    n = int(rate * seconds)
    args = ["--rate", str(rate), "--arrival", "constant", "--num-prompts", str(n), "--output-len", "fixed:32"]
    mark = f"  retry {retry}" if retry else ""
    core = min(usable) if usable else None
    if retry:  # a retry waits (a little) for the host to be quiet: a stall of the host is not the client's
        floor, waited = host_noise.wait_for_quiet(
            core, float(os.environ.get("SCALING_QUIET_WAIT", QUIET_WAIT_S))
        )
        mark += f" after {waited:.0f} s waiting for a quiet host" if waited >= 1 else ""
    else:
        floor = host_noise.timer_overshoot_ms(core)
    mark = f"  timer p99 +{floor:.2f} ms, work {host_noise.work_ms(core):.1f} ms{mark}"
    try:
        got = run_point(servers, workers or None, args, client_cores(workers or None, usable))
    except RuntimeError as exc:  # one failed point is a row, not the end of the grid
        print(f"{mode_name(workers):>7}  {rate:>5}  failed: {exc}{mark}")
        return Point(workers, float(rate), 0.0, math.inf, 0.0)
    s, errs = got.summary, ttft_errors_ms(got.lines, got.base_ns, got.truth)
    lag_ms = (s["schedule_lag_s"]["p99"] or float("nan")) * 1e3
    p50_ms = (s["schedule_lag_s"]["p50"] or float("nan")) * 1e3
    ttft = _p(errs, 99)
    point = Point(workers, float(rate), s["achieved_rate"] or 0.0, lag_ms, got.server_busy, ttft)
    print(
        f"{mode_name(workers):>7}  {rate:>5}  {point.achieved:8.1f}  {p50_ms:10.3f}  {lag_ms:10.3f}  "
        f"{ttft:15.3f}  {got.client_cpu_s * 1e3 / n:17.3f}  {100 * got.server_busy:11.0f}  "
        f"{min(got.split)}-{max(got.split):<5}  {s['requests']['ok']}/{n}  {late_spread(got.lines).line()}"
        f"{got.noise}{mark}"
    )
    return point


def stream_grid(
    grid: Grid, cpus: Sequence[int], usable: Sequence[int], make: ServerFactory = ServerGroup
) -> None:
    """Table 2: workers x concurrent streams (256 tokens at 2 ms): client-ingested vs server tokens/s."""
    print("workers  streams  server_tok/s  client_tok/s  share%  server_cpu%")
    with make(cpus, 0.002, 0.002) as servers:
        for workers, k in [(w, k) for w in grid.workers for k in grid.streams]:
            args = ["--rate", "inf", "--max-concurrency", str(k), "--num-prompts", str(k)]
            try:
                args += ["--output-len", "fixed:256", "--request-timeout", "300s"]
                got = run_point(servers, workers or None, args, client_cores(workers or None, usable))
            except RuntimeError as exc:
                print(f"{mode_name(workers):>7}  {k:>7}  failed: {exc}")
                continue
            server, client = ingest_rates(got.lines, got.truth)
            print(
                f"{mode_name(workers):>7}  {k:>7}  {server:12.0f}  {client:12.0f}  "
                f"{100 * client / server:6.1f}  {100 * got.server_busy:11.0f}"
            )


def smt_line(cores: int, root: str = "/sys/devices/system/cpu") -> str:
    """Which CPUs share a physical core (SMT siblings): two workers on siblings are not two cores."""
    found = [sysfs_siblings(cpu, root) for cpu in range(cores)]
    if None in found:
        return "CPU topology unknown (no /sys topology)"
    groups = {g for g in found if g is not None}
    shared = sorted(g for g in groups if "," in g or "-" in g)
    return f"SMT siblings {' '.join(shared)}" if shared else "no SMT: every CPU is its own core"


def main() -> None:
    """Print the scaling tables and ceilings (a many-core host; SCALING_GRID=small for a tiny grid)."""
    cores = os.cpu_count() or 1
    try:
        rates = parse_rates(os.environ.get("SCALING_RATES"))
    except ValueError as exc:
        raise SystemExit(f"scaling: {exc}") from None
    grid = plan_grid(cores, os.environ.get("SCALING_GRID") == "small", rates)
    if grid is None:
        print(
            f"scaling: needs a host with >= {MIN_CORES} cores (this one has {cores}); it would run "
            f"--workers 1/2/4/8 x {'/'.join(map(str, rates))} req/s and 1k/4k/8k streams "
            "(SCALING_GRID=small: a tiny grid)"
        )
        return
    try:
        grid = parse_streams(
            os.environ.get("SCALING_STREAMS"), parse_workers(os.environ.get("SCALING_WORKERS"), grid)
        )
    except ValueError as exc:
        raise SystemExit(f"scaling: {exc}") from None
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    seconds = float(os.environ.get("BENCH_SECONDS", "5"))
    cpus = [c % cores for c in range(cores - grid.servers, cores)]  # small grid on 1 core: shared
    print(f"scaling: {grid.label}; {seconds:g} s per rate point; servers share port SO_REUSEPORT")
    print(f"scaling: {smt_line(cores)}")
    usable = [c for c in range(cores) if c not in cpus] or list(range(cores))  # small grid: shared
    from bench import scaling_blocks as sb  # imports this module: loaded here, not at the top

    tools = sb.tools_or_reason()
    try:
        kinds, line = sb.server_kinds(os.environ.get("SCALING_SERVER"), tools)
        blocks, tries = (
            int(os.environ.get("SCALING_BLOCKS", "1")),
            int(os.environ.get("SCALING_TRIES", TRIES)),
        )
    except ValueError as exc:
        raise SystemExit(f"scaling: {exc}") from None
    print(f"scaling: {line}; {blocks} block(s), up to {tries} run(s) a point")

    def grid_of(kind: str) -> Callable[[], list[Point]]:
        make = sb.factory(kind, tools) or ServerGroup

        def run() -> list[Point]:
            points = rate_grid(grid, cpus, usable, seconds, make, tries)
            for text in ceiling_lines(points):
                print(text)
            return points

        return run

    got = sb.run_kinds(kinds, blocks, {k: grid_of(k) for k in kinds})
    print()
    for kind, points in got.items():
        for text in sb.summary_lines(kind, points, float(max(grid.rates))):
            print(text)
    for kind in kinds if grid.streams else ():
        print(f"\n--- streams, {kind} server ---")
        stream_grid(grid, cpus, usable, sb.factory(kind, tools, log_tokens=True) or ServerGroup)


if __name__ == "__main__":
    main()
