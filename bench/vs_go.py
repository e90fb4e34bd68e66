"""`python -m bench vsgo` (in `make bench`): loadgen beside the lean Go client on the reference server.

Both clients run as whole processes (a plain `loadgen run`, interpreter start-up and record writing
included: a user pays both) against a fresh reference server (bench.refbench) per run, the server on
one core and the client on another (`VSGO_CORES=client,server`, default the last two usable cores; this
bench's own process keeps to the others where there are any). Points, each run by every client in an
order that alternates from block to block (VSGO_BLOCKS blocks, default 3; the host's drift hits both):
open loop at 400 and 800 req/s (constant arrivals, 32 tokens, TTFT 20 ms, TPOT 5 ms, VSGO_SECONDS s,
default 8) and 64 / 256 / 1,024 back-to-back streams of 256 tokens at TPOT 2 ms for VSGO_SECONDS.
Figures: CPU per request for the whole process (wait4's rusage) and over the load window (/proc samples
every 20 ms, first send to last token), TTFT error p99 (client TTFT minus the server's own, joined per
request), send lag p99 (each client's own stamp: loadgen's after its write, the Go client's before its
HTTP client starts the request) and arrival lag p99 (the server's arrival stamp minus the due time: one
clock for both, the lateness the engine sees), ITL error at 64 streams (the client's ITL p99 minus the
true 2 ms; also |client gap − true gap| p99 from the server's per-token log), tokens/s at 256 streams as
% of ideal (streams × 256 / (TTFT + 255 × TPOT), counted between 1 s after the first send and the last
send), max RSS at 1,024 streams (VSGO_POINTS="rate:400,streams:64" runs only those points). Then the
ratio table (median of the per-block ratios) and, with VSGO_SWEEP (req/s list, default
600,800,1000,1200,1600,2000; "none" skips it), where a plain run's lag p99 crosses 2 ms.
VSGO_BEFORE=PATH adds a third client, `loadgen@before`, the loadgen source tree at PATH (a before/after
comparison on one host). With no Go and no built binaries, prints why and skips.

loadgen runs on an interpreter of its own environment, as a user who installs it on its own (pipx, a
venv of its own; docs/client-cost.md) runs it: a venv of this Python made for the bench, which sees this
environment's packages as plain path entries, so none of their start-up hooks (`.pth` files: on the
H200 host a torch venv's numba-cuda hook, ~65 ms a process) runs. VSGO_PYTHON=host runs it on this
Python itself; the bench prints both interpreters' start-up either way.
"""

from __future__ import annotations

import json
import os
import site
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import client_figures as cf
from bench.refbench import REPO, RefServer, Tools, cpu_s, locate, pin
from loadgen.results.manifest_schema import read_manifest

# what the `loadgen` console script runs (loadgen.cli.console; a tree from before it: cli.main's main)
LOADGEN = (
    "import sys; sys.argv[0] = 'loadgen'\n"
    "try:\n    from loadgen.cli.console import console as main\n"
    "except ImportError:\n    from loadgen.cli.main import main\n"
    "main()"
)
GO = "go"
RATE_POINTS = (400, 800)
STREAM_POINTS = (64, 256, 1024)
TOKENS_RATE, TOKENS_STREAM = 32, 256
TTFT_MS, TPOT_RATE_MS, TPOT_STREAM_MS = 20.0, 5.0, 2.0
ARRIVAL_STAMPS: dict[str, set[str]] = {}  # loadgen tree -> its runs' manifest client.arrival_stamps


@dataclass(frozen=True)
class Outcome:
    """One client process: its requests, CPU (whole process, load window), max RSS, the server log."""

    reqs: list[cf.Req]
    cpu_s: float
    window_cpu_s: float
    max_rss_mb: float
    server_ttft_ms: dict[str, float]
    true_gaps_ms: dict[str, list[float]]
    arrivals_ns: dict[str, int] = field(default_factory=dict)  # the server's arrival stamp of each request
    own_cpu_ms: float | None = None  # loadgen's own client_cpu.load_ms_per_request (its summary)


class CpuSampler:
    """(perf_counter ns, cumulative CPU s) of a process every `every_s`, in a thread, until it exits."""

    def __init__(self, pid: int, every_s: float = 0.02) -> None:
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[int, float]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.samples.append((time.perf_counter_ns(), cpu_s(self.pid)))
            except (OSError, IndexError, ValueError):
                return
            time.sleep(self.every_s)


def run_process(
    cmd: Sequence[str], cores: Sequence[int], env: dict[str, str], cwd: str | None = None
) -> tuple[float, float, list[tuple[int, float]]]:
    """Run `cmd` pinned to `cores`; (whole-process CPU s, max RSS MB, CPU samples)."""
    proc = subprocess.Popen(
        list(cmd),
        preexec_fn=pin(cores),
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    started = time.perf_counter_ns()  # no CPU spent before the exec: the samples' floor
    sampler = CpuSampler(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    ended, whole = time.perf_counter_ns(), usage.ru_utime + usage.ru_stime
    proc.returncode = os.waitstatus_to_exitcode(status)
    sampler.thread.join(1)
    samples = [(started, 0.0), *sampler.samples, (ended, whole)]
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(cmd[0]).name} exited {proc.returncode}: {err.strip()[-300:]}")
    return whole, usage.ru_maxrss / 1024, samples


def loadgen_args(url: str, out: str, point: tuple[str, int], seconds: float) -> list[str]:
    """`loadgen run` arguments for a point ("rate", R) or ("streams", K)."""
    args = ["run", "--target", "openai", "--base-url", url, "--model", "bench-model"]
    args += ["--input-len", "fixed:32", "--metrics-port", "0", "--linger", "0", "--max-error-rate", "1"]
    args += ["--quiet", "--json", "--results-dir", out]
    kind, n = point
    if kind == "rate":
        args += ["--rate", str(n), "--arrival", "constant", "--num-prompts", str(int(n * seconds))]
        return [*args, "--output-len", f"fixed:{TOKENS_RATE}"]
    args += ["--rate", "inf", "--max-concurrency", str(n), "--duration", f"{seconds:g}s"]
    return [*args, "--output-len", f"fixed:{TOKENS_STREAM}", "--request-timeout", "300s"]


def go_args(url: str, out: str, point: tuple[str, int], seconds: float) -> list[str]:
    """refclient arguments for the same point (the same request count for a rate point)."""
    kind, n = point
    args = ["-url", url + "/v1/completions", "-out", out, "-prompt-words", "32"]
    if kind == "rate":
        count = int(n * seconds)
        args += ["-mode", "constant", "-rate", str(n), "-n", str(count), "-duration", f"{seconds + 5:g}s"]
        return [*args, "-max-tokens", str(TOKENS_RATE)]
    args += ["-mode", "concurrency", "-concurrency", str(n), "-duration", f"{seconds:g}s"]
    return [*args, "-max-tokens", str(TOKENS_STREAM)]


def own_environment(where: str) -> tuple[str, list[str]]:
    """(interpreter, path entries): a venv of this Python under `where`, without pip or this
    environment's site-packages, and the folders its packages come from (this environment's site
    folders and PYTHONPATH, in sys.path's order) to give it as PYTHONPATH: the same packages, imported
    without running any `.pth` start-up hook of this environment."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where], check=True)
    sites = {*site.getsitepackages(), site.getusersitepackages()}
    given = {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    entries = [p for p in sys.path if p and (p in sites or p in given) and Path(p).is_dir()]
    return str(Path(where) / "bin" / "python"), entries


# the interpreter loadgen runs on and the path entries it is given (main() sets them; VSGO_PYTHON)
PYTHON: list[str] = [sys.executable]
PATHS: list[str] = []


def loadgen_command(
    tree: str, env: dict[str, str], url: str, out: str, point: tuple[str, int], seconds: float
) -> list[str]:
    """The plain `loadgen run` of the loadgen at `tree` for a point, on loadgen's interpreter (PYTHON),
    with `env`'s PYTHONPATH set to that tree and the packages' folders (PATHS); run it from `tree`."""
    paths = [tree, *(PATHS or [env.get("PYTHONPATH", "")])]
    env["PYTHONPATH"] = os.pathsep.join(paths).rstrip(os.pathsep)
    return [PYTHON[0], "-c", LOADGEN, *loadgen_args(url, out, point, seconds)]


def run_client(
    client: str, tools: Tools, point: tuple[str, int], seconds: float, cores: tuple[int, int]
) -> Outcome:
    """One client at one point against a fresh server; `client` is GO or a loadgen source path."""
    tpot = TPOT_RATE_MS if point[0] == "rate" else TPOT_STREAM_MS
    log_tokens = point == ("streams", 64)
    with (
        RefServer(tools, [cores[1]], TTFT_MS, tpot, log_tokens) as server,
        tempfile.TemporaryDirectory() as d,
    ):
        env, own_cpu = dict(os.environ), None
        if client == GO:
            out = str(Path(d) / "go.jsonl")
            cmd = [str(tools.client), *go_args(server.url, out, point, seconds)]
        else:
            cmd = loadgen_command(client, env, server.url, d, point, seconds)
        # `python -c` puts its working folder first on sys.path: run a loadgen from its own tree
        whole, rss, samples = run_process(cmd, [cores[0]], env, None if client == GO else client)
        log = server.stop()
        if client == GO:
            reqs = [cf.from_refclient(json.loads(x)) for x in Path(out).read_text().splitlines() if x]
        else:
            found = sorted(Path(d).glob("*/requests.jsonl"))
            lines = found[0].read_text().splitlines() if found else []
            reqs = [cf.from_loadgen(json.loads(x)) for x in lines if x]
            for manifest in Path(d).glob("*/manifest.json"):
                stamps = read_manifest(manifest).client.arrival_stamps
                ARRIVAL_STAMPS.setdefault(client, set()).add(str(stamps or "read (not recorded)"))
            for summary in Path(d).glob("*/summary.json"):
                own_cpu = (json.loads(summary.read_text()).get("client_cpu") or {}).get("load_ms_per_request")
    lo, hi = cf.load_window(reqs)
    window = cf.window_cpu_s(samples, lo, hi)
    return Outcome(reqs, whole, window, rss, log.ttft_ms(), log.gaps_ms(), log.arrivals_ns(), own_cpu)


def figures(point: tuple[str, int], got: Outcome) -> dict[str, float]:
    """The figures one run gives, by name (the names of the ratio table)."""
    kind, n = point
    reqs, out = got.reqs, {}
    if kind == "rate":
        count = max(1, len(reqs))
        out[f"CPU ms/request at {n} req/s, whole process"] = got.cpu_s * 1e3 / count
        out[f"CPU ms/request at {n} req/s, load window"] = got.window_cpu_s * 1e3 / count
        out[f"TTFT error p99 at {n} req/s, ms"] = cf.p(cf.ttft_errors_ms(reqs, got.server_ttft_ms), 99)
        out[f"send lag p99 at {n} req/s, ms"] = cf.p((r.lag_ms for r in reqs if r.lag_ms is not None), 99)
        out[f"arrival lag p99 at {n} req/s, ms"] = cf.p(cf.arrival_lags_ms(reqs, got.arrivals_ns), 99)
        if got.own_cpu_ms is not None:  # loadgen's summary (a tree from before client_cpu has none)
            out[f"own client_cpu ms/request at {n} req/s"] = got.own_cpu_ms
    elif n == 64:
        out["ITL error p99 at 64 streams (ITL p99 - 2 ms)"] = cf.itl_excess_ms(reqs, TPOT_STREAM_MS)
        out["|gap error| p99 at 64 streams, ms"] = cf.p(cf.gap_errors_ms(reqs, got.true_gaps_ms), 99)
    elif n == 256:
        ideal = cf.ideal_tokens_s(n, TOKENS_STREAM, TTFT_MS, TPOT_STREAM_MS)
        out["tokens/s at 256 streams, % of ideal"] = 100 * cf.steady_tokens_s(reqs) / ideal
        out["TTFT error p99 at 256 streams, ms"] = cf.p(cf.ttft_errors_ms(reqs, got.server_ttft_ms), 99)
    else:
        out[f"max RSS at {n} streams, MB"] = got.max_rss_mb
    out["_ok"] = sum(r.ok for r in reqs) / max(1, len(reqs))
    return out


HIGHER_BETTER = ("tokens/s at 256 streams, % of ideal",)


def cores_for(usable: Sequence[int], text: str | None) -> tuple[int, int]:
    """(client core, server core) from VSGO_CORES ("2,3"), default the last two usable cores."""
    if text:
        try:
            client, server = (int(x) for x in text.split(","))
        except ValueError:
            raise ValueError(f"VSGO_CORES={text!r}: give client,server core numbers, e.g. 2,3") from None
        if client == server or not {client, server} <= set(usable):
            raise ValueError(f"VSGO_CORES={text!r}: two different cores from {sorted(usable)}")
        return client, server
    return usable[-2], usable[-1]


def bench_setup(name: str, what: str) -> tuple[Tools, list[int]] | None:
    """The reference tools and the usable cores for bench `name`, or None after a line saying why it
    is skipped (`what`: the side that needs the tools, e.g. "the Go side")."""
    tools = locate()
    if isinstance(tools, str):
        print(f"{name}: skipped, {what} is not available: {tools}")
        return None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        print(f"{name}: needs two usable cores (client and server on their own); skipped")
        return None
    return tools, usable


def compiled(tree: str) -> None:
    """Byte-compile a loadgen tree's packages before it is measured, as an install does: a tree
    without `__pycache__` run under PYTHONDONTWRITEBYTECODE=1 (this project's VMs set it) compiles
    every module it imports in every run, ~0.15 s of start-up a user of an installed package never
    pays. Where the tree has the dataclass code cache (`loadgen.cli.codecache`), it is written too:
    under PYTHONDONTWRITEBYTECODE no run writes it, where a user's second run would have it."""
    packages = [str(Path(tree) / p) for p in ("loadgen", "infergauge") if (Path(tree) / p).is_dir()]
    compile_all = [sys.executable, "-m", "compileall", "-q", *packages]
    subprocess.run(compile_all, check=False, stdout=subprocess.DEVNULL)
    if (Path(tree) / "loadgen" / "cli" / "codecache.py").is_file():
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")])}
        codecache = [sys.executable, "-m", "loadgen.cli.codecache"]
        subprocess.run(codecache, check=False, stdout=subprocess.DEVNULL, cwd=tree, env=env)


def interpreter_start(core: int, runs: int = 7, python: str = sys.executable) -> tuple[float, float]:
    """CPU ms (median of `runs`, pinned to `core`) of `python -c pass` and `python -S -c pass`: what
    an interpreter costs before any loadgen code runs, and how much of it is site's hooks (.pth
    files of the environment: a torch venv's numba-cuda hook took ~67 ms on the H200 host)."""

    def median_ms(args: list[str]) -> float:
        spent = []
        for _ in range(runs):
            child = subprocess.Popen(args, preexec_fn=pin([core]))  # noqa: S603 - our own interpreter
            _, _, usage = os.wait4(child.pid, 0)
            spent.append((usage.ru_utime + usage.ru_stime) * 1e3)
        return statistics.median(spent)

    return median_ms([python, "-c", "pass"]), median_ms([python, "-S", "-c", "pass"])


def clients(env: dict[str, str]) -> dict[str, str]:
    """Client name -> GO or a loadgen source path (this repo, plus VSGO_BEFORE)."""
    out = {"loadgen": str(REPO)}
    if env.get("VSGO_BEFORE"):
        out["loadgen@before"] = env["VSGO_BEFORE"]
    return {**out, "go": GO}


DEFAULT_POINTS = tuple([("rate", r) for r in RATE_POINTS] + [("streams", k) for k in STREAM_POINTS])


def parse_points(text: str | None) -> tuple[tuple[str, int], ...]:
    """VSGO_POINTS ("rate:400,streams:64"): the points to run, default every one; ValueError naming the
    bad item (a rate or stream count the ratio table has no figure for is refused too)."""
    if not text:
        return DEFAULT_POINTS
    out = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        kind, _, n = item.partition(":")
        point = (kind, int(n)) if n.isdigit() else None
        if point is None or point not in DEFAULT_POINTS:
            names = ",".join(f"{k}:{v}" for k, v in DEFAULT_POINTS)
            raise ValueError(f"VSGO_POINTS item {item!r}: choose from {names}")
        out.append(point)
    return tuple(out)


def run_blocks(
    tools: Tools,
    names: dict[str, str],
    blocks: int,
    seconds: float,
    cores: tuple[int, int],
    points: Sequence[tuple[str, int]] = DEFAULT_POINTS,
) -> dict[str, list[dict[str, float]]]:
    """Every point by every client, `blocks` times (order alternating): client -> per-block figures."""
    got: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for block in range(blocks):
        order = list(names) if block % 2 == 0 else list(reversed(names))
        figs: dict[str, dict[str, float]] = {name: {} for name in names}
        for point in points:
            for name in order:
                try:
                    fig = figures(point, run_client(names[name], tools, point, seconds, cores))
                except RuntimeError as exc:
                    print(f"  block {block + 1} {point[0]} {point[1]} {name}: failed: {exc}", flush=True)
                    continue
                shown = "  ".join(f"{k.split(' at ')[0]} {v:.3f}" for k, v in fig.items() if k[0] != "_")
                ok = 100 * fig.pop("_ok")
                print(
                    f"  block {block + 1} {point[0]:>7} {point[1]:>4} {name:<14} {shown}  ok {ok:.1f}%",
                    flush=True,
                )
                figs[name].update(fig)
        for name in names:
            got[name].append(figs[name])
    return got


def table(got: dict[str, list[dict[str, float]]], ours: str = "loadgen") -> list[cf.Row]:
    """The ratio rows: `ours` against the Go client, median of per-block ratios."""
    names = [k for k in got[ours][0] if k in got["go"][0]] if got[ours] and got["go"] else []
    rows = []
    for name in names:
        a = [b.get(name, float("nan")) for b in got[ours]]
        g = [b.get(name, float("nan")) for b in got["go"]]
        rows.append(cf.ratio_row(name, a, g, name in HIGHER_BETTER))
    return rows


def sweep(tools: Tools, rates: Sequence[int], seconds: float, cores: tuple[int, int]) -> None:
    """A plain run's lag p99 at rising rates: where it crosses 2 ms."""
    points = []
    for rate in rates:
        try:
            got = run_client(str(REPO), tools, ("rate", rate), seconds, cores)
        except RuntimeError as exc:
            print(f"  sweep {rate} req/s: failed: {exc}")
            break
        fig = figures(("rate", rate), got)
        lag = fig[f"send lag p99 at {rate} req/s, ms"]
        ttft = fig[f"TTFT error p99 at {rate} req/s, ms"]
        print(
            f"  sweep {rate:>5} req/s  lag p99 {lag:.3f} ms  TTFT error p99 {ttft:.3f} ms  "
            f"ok {100 * fig['_ok']:.1f}%"
        )
        points.append((float(rate), lag))
        if lag >= 2.0:
            break
    print(cf.lag_crossing(points))


def main() -> None:
    """Print the loadgen-vs-Go figures and ratio table (see module docstring)."""
    setup = bench_setup("vsgo", "the Go side")
    if setup is None:
        return
    tools, usable = setup
    env = dict(os.environ)
    try:
        cores = cores_for(usable, env.get("VSGO_CORES"))
        blocks = int(env.get("VSGO_BLOCKS", "3"))
        seconds = float(env.get("VSGO_SECONDS", "8"))
        text = env.get("VSGO_SWEEP", "600,800,1000,1200,1600,2000")
        rates = [] if text == "none" else [int(x) for x in text.split(",")]
        points = parse_points(env.get("VSGO_POINTS"))
        which = env.get("VSGO_PYTHON", "own")
        if which not in ("own", "host"):
            raise ValueError(f"VSGO_PYTHON={which!r}: choose own (a venv of its own) or host (this Python)")
    except ValueError as exc:
        raise SystemExit(f"vsgo: {exc}") from None
    rest = [c for c in usable if c not in cores]
    if rest:
        os.sched_setaffinity(0, rest)
    names = clients(env)
    for tree in (t for t in names.values() if t != GO):
        compiled(tree)
    print(
        f"vsgo: client on core {cores[0]}, server on core {cores[1]}, bench on {rest or 'shared'}; "
        f"{blocks} interleaved blocks, {seconds:g} s a point; clients {', '.join(names)}; {tools.server}"
    )
    with tempfile.TemporaryDirectory() as venv:
        if which == "own":
            try:
                PYTHON[0], PATHS[:] = own_environment(venv)
            except (OSError, subprocess.CalledProcessError) as exc:
                print(f"vsgo: no venv of its own here ({exc}): loadgen runs on this Python")
                which = "host"
        for label, python in (("this Python", sys.executable), ("loadgen's own venv", PYTHON[0])):
            if label != "this Python" and python == sys.executable:
                continue
            full, bare = interpreter_start(cores[0], python=python)
            per = ", ".join(
                f"{full / (n * seconds):.3f} ms/request at {n} req/s" for k, n in points if k == "rate"
            )
            print(
                f"vsgo: {label} starts in {full:.1f} ms of CPU before any loadgen code ({bare:.1f} ms "
                f"without site's hooks, -S){'; ' + per if per else ''}"
            )
        on = "its own venv" if which == "own" else "this Python"
        print(f"vsgo: loadgen runs on {on} (VSGO_PYTHON={which})")
        got = run_blocks(tools, names, blocks, seconds, cores, points)
        report(got, names, blocks, tools, rates, seconds, cores)


def report(
    got: dict[str, list[dict[str, float]]],
    names: dict[str, str],
    blocks: int,
    tools: Tools,
    rates: Sequence[int],
    seconds: float,
    cores: tuple[int, int],
) -> None:
    """The ratio tables, the absolute targets and the lag sweep (on the interpreter the blocks ran on)."""
    for ours in (n for n in names if n != "go"):
        print(f"\n{ours}: arrival stamps {', '.join(sorted(ARRIVAL_STAMPS.get(names[ours], {'?'})))}")
        print(f"{ours} vs Go (median of {blocks} blocks; ratio = median of per-block {ours}/Go):")
        print(f"{'figure':<44} {ours[:10]:>10} {'go':>10} {'ratio':>7}")
        for row in table(got, ours):
            print(cf.format_row(row))
        per_block = {}
        for name in ("tokens/s at 256 streams, % of ideal", "ITL error p99 at 64 streams (ITL p99 - 2 ms)"):
            per = per_block[name] = [b[name] for b in got[ours] if name in b]
            if per:
                print(f"{ours}: {name} per block: {' / '.join(f'{v:.3f}' for v in per)}")
        for line in cf.absolute_targets(per_block):
            print(f"{ours}: {line}")
        for line in cf.own_cpu_lines(got[ours]):
            print(f"{ours}: {line}")
    if rates:
        print("\nplain-run lag sweep (loadgen, constant arrivals, 32 tokens):")
        sweep(tools, rates, min(seconds, 5.0), cores)


if __name__ == "__main__":
    main()
