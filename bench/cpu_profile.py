"""`python -m bench cpuprofile`: where a plain `loadgen run`'s CPU goes, from CPU samples (issue #23).

loadgen runs as `bench vsgo` runs it (a plain run through the console script, on an interpreter of its
own, pinned to one core, against the reference server on another: `bench.vs_go`), under `perf record`
(cpu-clock samples with call chains, PERF_FREQ a second, default 4999). On Python 3.12+ the interpreter's
perf trampoline (`PYTHONPERFSUPPORT=1`) puts each Python function on the call chain as
`py::<qualname>:<file>`, so every sample is charged to one area of loadgen: the area of the innermost
frame on its chain that belongs to one (AREAS), else "other loadgen Python" where loadgen's Python is on
the chain, else the event loop and the kernel (no Python frame of loadgen's: epoll, wake-ups, uvloop); a
thread other than the main one (the C writer, the send-time waker) is its own area. Two runs: one of a
single request (what any run pays, start-up and record) and one at CPUPROF_RATE req/s (default 400) for
CPUPROF_SECONDS (default 8).

Prints, per run: its CPU without the profiler (wait4) and as sampled (the trampoline and sampling add
some), the share of samples by where the code lives (kernel, interpreter, event loop, loadgen's C
modules, orjson, libc), and per area the share, the CPU in ms and, for the rate run, in µs a request.
PERF: the perf command (default `perf` on PATH; skipped with a line where it cannot sample). The pure
parts (reading `perf script`, charging samples, the table) are tested in tests/unit/test_bench_cpu_profile.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import vs_go
from bench.refbench import REPO, RefServer, Tools

# (area, what a frame's symbol holds for the frame to be that area's): each area is named by the
# functions it starts at (Python ones as the trampoline names them, `py::<qualname>:<file>`); the first
# frame from the leaf of a call chain up that belongs to an area takes the sample, so an inner area (the
# prompt made inside the dispatch loop, the fingerprint digested inside the finisher) is charged to
# itself and not to its caller (code of its own in between, `finalize` under the finisher, included);
# for a frame that belongs to two, the earlier area here
AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("start-up imports", ("py::_find_and_load:",)),
    (
        "workload: prompts, fingerprint, prefix blocks",
        ("py::SyntheticWorkload.", "py::SentDigest.", "py::SentBlocks."),
    ),
    ("response reads: head, framing, C reader", ("py::_Conn.", "reader_call", "py::ChunkedBody.")),
    (
        "finisher: stream parse, accounting, journal line",
        (
            "py::Run.finisher:",
            "py::Run._parse",
            "py::Run._take:",
            "py::Run.on_done:",
            "py::Dispatcher._finished:",
        ),
    ),
    (
        "send: connection, request bytes, C writer post",
        ("py::RawClient.", "py::Dispatcher.send_at:", "py::PreciseWaker."),
    ),
    ("dispatch loop: records, payload", ("py::Run.dispatch:",)),
    ("monitor: journal flush, gauges", ("py::Run.monitor:",)),
    ("record: summary, files, store row", ("py::_record:", "py::_finish:", "py::_show:")),
    (
        "command line and run set-up: options, checks, manifest",
        ("/loadgen/cli/", "py::_prepare:", "py::_start_record:"),
    ),
)
# a chain with none of the areas' functions on it, but loadgen's Python code: charged here
OTHER_PYTHON = ("other loadgen Python", ("/loadgen/", "/infergauge/"))
TREE = str(REPO)
OTHER_THREADS = "other threads: C writer, send-time waker"
LOOP_ONLY = "event loop and kernel, no Python frame"
DSO_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kernel", ("[kernel.kallsyms]", "[vdso]")),
    ("interpreter", ("libpython", "python3", "[JIT]", "perf-")),
    ("event loop (uvloop)", ("uvloop", "loop.cpython")),
    ("loadgen's C modules", ("_kread", "_sse", "_json.cpython", "_sortq")),
    ("orjson", ("orjson",)),
    ("libc", ("libc.so", "libc-")),
)


@dataclass
class Sample:
    """One perf sample: its thread, weight (ns of CPU) and call chain, leaf first ((symbol, dso) each)."""

    tid: int
    period_ns: int
    frames: list[tuple[str, str]] = field(default_factory=list)


def read_samples(lines: Iterable[str]) -> Iterator[Sample]:
    """The samples of `perf script -F comm,tid,period,ip,sym,dso` output (a header line, then one
    indented line per frame, a blank line between samples)."""
    current: Sample | None = None
    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            if current is not None:
                yield current
            current = None
        elif line[0] in " \t":
            if current is not None:
                current.frames.append(_frame(line.strip()))
        else:
            fields = line.split()
            try:
                current = Sample(int(fields[-2]), int(fields[-1]))
            except (IndexError, ValueError):
                current = None  # a line perf writes that is not a sample header
    if current is not None:
        yield current


def _frame(text: str) -> tuple[str, str]:
    """(symbol, dso) of one call-chain line, `ADDR SYMBOL (DSO)`."""
    text = text.split(" ", 1)[-1]
    if text.endswith(")") and " (" in text:
        sym, dso = text[:-1].rsplit(" (", 1)
        return sym, dso
    return text, ""


def area_of(sample: Sample, main_tid: int) -> str:
    """The area a sample is charged to (module docstring)."""
    if sample.tid != main_tid:
        return OTHER_THREADS
    for areas in (AREAS, (OTHER_PYTHON,)):
        for sym, _ in sample.frames:
            for area, marks in areas:
                if any(mark in sym for mark in marks):
                    return area
    return LOOP_ONLY


def dso_of(sample: Sample) -> str:
    """Where the sampled instruction lives, by class (DSO_CLASSES), from the leaf frame's file name."""
    dso = sample.frames[0][1].rsplit("/", 1)[-1] if sample.frames else ""
    for name, marks in DSO_CLASSES:
        if any(mark in dso for mark in marks):
            return name
    return "other"


@dataclass
class Profile:
    """Sampled CPU (ns) by area and by DSO class, and the self samples by symbol."""

    by_area: Counter[str] = field(default_factory=Counter)
    by_dso: Counter[str] = field(default_factory=Counter)
    by_symbol: Counter[str] = field(default_factory=Counter)
    python_frames: bool = False

    @property
    def total_ns(self) -> int:
        return sum(self.by_area.values())


def charge(samples: Iterable[Sample], main_tid: int) -> Profile:
    """Every sample charged to its area, DSO class and leaf symbol."""
    out = Profile()
    for s in samples:
        out.by_area[area_of(s, main_tid)] += s.period_ns
        out.by_dso[dso_of(s)] += s.period_ns
        out.by_symbol[s.frames[0][0] if s.frames else "?"] += s.period_ns
        out.python_frames = out.python_frames or any(sym.startswith("py::") for sym, _ in s.frames)
    return out


def table(profile: Profile, whole_ms: float, requests: int, top: int = 12) -> list[str]:
    """The lines printed for one run: by DSO class, by area (ms, and µs a request where it had many),
    the hottest leaf symbols. An area's ms is its share of the samples times the run's CPU measured
    without the profiler (the trampoline and the sampling add their own)."""
    total = profile.total_ns or 1
    per_request = requests > 1
    dsos = ", ".join(f"{name} {100 * ns / total:.1f}%" for name, ns in profile.by_dso.most_common())
    lines = [
        f"  sampled {total / 1e6:.1f} ms of CPU (without the profiler: {whole_ms:.1f} ms)",
        f"  where the code lives: {dsos}",
    ]
    if profile.python_frames:
        lines.append(
            f"  {'area':52s} {'share':>6s} {'ms':>8s}" + (f" {'µs/request':>11s}" if per_request else "")
        )
        for area, ns in profile.by_area.most_common():
            ms = ns / total * whole_ms
            row = f"  {area:52s} {100 * ns / total:5.1f}% {ms:8.1f}"
            lines.append(row + (f" {ms * 1e3 / requests:11.1f}" if per_request else ""))
    else:  # every sample would be "no Python frame": the areas would say nothing
        lines.append(
            "  areas: none, no Python frames on the call chains (the perf trampoline needs Python 3.12+)"
        )
    hottest = "; ".join(f"{sym} {100 * ns / total:.1f}%" for sym, ns in profile.by_symbol.most_common(top))
    return [*lines, f"  hottest code (self): {hottest}"]


def _last_line(stderr: str) -> str:
    """What a failed perf said last (its error), cut to one short line."""
    return (stderr.strip().splitlines() or ["no output"])[-1][:160]


def perf_command(env: dict[str, str]) -> list[str] | str:
    """The perf command (PERF, default `perf`), or a one-line reason it cannot record call chains here
    (not installed, `perf_event_paranoid`, no permission): a `perf record -g` of `true` is tried."""
    perf = shlex.split(env.get("PERF", "perf"))
    with tempfile.TemporaryDirectory() as d:
        probe_cmd = [*perf, "record", "-q", "-g", "-F", "99", "-o", str(Path(d) / "probe.data"), "--", "true"]
        try:
            probe = subprocess.run(probe_cmd, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{shlex.join(perf)} cannot run: {exc}"
    if probe.returncode != 0:
        return f"{shlex.join(perf)} cannot sample here (exit {probe.returncode}): {_last_line(probe.stderr)}"
    return perf


def profile_run(
    perf: Sequence[str], tools: Tools, cores: tuple[int, int], rate: int, seconds: float, freq: int
) -> tuple[Profile, float, int]:
    """(profile, CPU ms of the same run without the profiler, requests) of one plain run."""
    point = ("rate", rate)
    plain = vs_go.run_client(TREE, tools, point, seconds, cores)
    with (
        RefServer(tools, [cores[1]], vs_go.TTFT_MS, vs_go.TPOT_RATE_MS) as server,
        tempfile.TemporaryDirectory() as d,
    ):
        env = dict(os.environ, PYTHONPERFSUPPORT="1")
        data = str(Path(d) / "perf.data")
        loadgen = vs_go.loadgen_command(TREE, env, server.url, d, point, seconds)
        cmd = [*perf, "record", "-q", "-F", str(freq), "-g", "-o", data, "--", *loadgen]
        done = subprocess.run(
            cmd,
            preexec_fn=vs_go.pin([cores[0]]),
            env=env,
            cwd=TREE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"perf record of the run exited {done.returncode}: {_last_line(done.stderr)}")
        server.stop()
        script = subprocess.Popen(
            [*perf, "script", "-i", data, "-F", "comm,tid,period,ip,sym,dso"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert script.stdout is not None
        samples = list(read_samples(script.stdout))
        script.wait()
    main_tid = main_thread(samples)
    return charge(samples, main_tid), plain.cpu_s * 1e3, max(1, len(plain.reqs))


def main_thread(samples: Sequence[Sample]) -> int:
    """The process's main thread: the lowest thread id sampled (the process's own id)."""
    return min((s.tid for s in samples), default=0)


def main() -> None:
    setup = vs_go.bench_setup("cpuprofile", "the reference server")
    if setup is None:
        return
    tools, usable = setup
    perf = perf_command(dict(os.environ))
    if isinstance(perf, str):
        print(f"cpuprofile: skipped, {perf}")
        return
    env = os.environ
    rate, seconds = int(env.get("CPUPROF_RATE", "400")), float(env.get("CPUPROF_SECONDS", "8"))
    freq = int(env.get("PERF_FREQ", "4999"))
    cores = vs_go.cores_for(usable, env.get("VSGO_CORES"))
    vs_go.compiled(TREE)
    with tempfile.TemporaryDirectory() as venv:
        vs_go.PYTHON[0], vs_go.PATHS[:] = vs_go.own_environment(venv)
        where = f"client on core {cores[0]}, server on core {cores[1]}"
        print(f"cpuprofile: {where}; Python {sys.version.split()[0]}, {freq} samples a second", flush=True)
        for label, s in (("a 1-request run", 1 / rate), (f"{rate} req/s for {seconds:g} s", seconds)):
            try:
                profile, whole_ms, requests = profile_run(perf, tools, cores, rate, s, freq)
            except RuntimeError as exc:  # perf or the run failed: say so, as the other benches do
                print(f"cpuprofile: {label}: not profiled, {exc}")
                return
            print(f"cpuprofile: {label} ({requests} requests)")
            for line in table(profile, whole_ms, requests):
                print(line, flush=True)
