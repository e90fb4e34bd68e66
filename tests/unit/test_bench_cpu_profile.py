"""bench.cpu_profile: reading `perf script`, charging each sample to an area and a DSO class, the
printed table, and the reason given where perf cannot sample (no perf needed)."""

from __future__ import annotations

import sys

from bench import cpu_profile as cp

# `perf script -F comm,tid,period,ip,sym,dso` as perf writes it: a header, the chain leaf first, a blank
SCRIPT = """\
python3  1000     200000
\t    7f0000000001 _PyEval_EvalFrameDefault (/usr/bin/python3.12)
\t    7f0000000002 py::SyntheticWorkload.request:/src/loadgen/workload/generator.py ([JIT] tid 1000)
\t    7f0000000003 py::Run.dispatch:/src/loadgen/run/measure.py ([JIT] tid 1000)
\t    7f0000000004 py::<module>:<string> ([JIT] tid 1000)

python3  1000     200000
\t    7f0000000010 r_object (/usr/bin/python3.12)
\t    7f0000000011 py::_find_and_load:<frozen importlib._bootstrap> ([JIT] tid 1000)
\t    7f0000000012 py::<module>:/src/loadgen/cli/run.py ([JIT] tid 1000)
\t    7f0000000013 py::_find_and_load:<frozen importlib._bootstrap> ([JIT] tid 1000)

python3  1000     400000
\tffffffff81000001 tcp_recvmsg_locked ([kernel.kallsyms])
\t    7f0000000020 recvmsg (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t    7f0000000021 reader_call (/src/loadgen/transport/_kread.cpython-312-x86_64-linux-gnu.so)
\t    7f0000000022 __pyx_f_6uvloop_4loop_6Handle__run (/v/python3.12/uvloop/loop.cpython-312.so)

python3  1000     100000
\t    7f0000000030 uv__io_poll (/v/python3.12/uvloop/loop.cpython-312.so)

python3  1001     100000
\tffffffff81000002 tcp_sendmsg ([kernel.kallsyms])
\t    7f0000000040 send (/usr/lib/x86_64-linux-gnu/libc.so.6)
"""


def _samples() -> list[cp.Sample]:
    return list(cp.read_samples(SCRIPT.splitlines(keepends=True)))


def test_perf_script_reads_into_samples_with_their_chains() -> None:
    samples = _samples()
    assert [(s.tid, s.period_ns, len(s.frames)) for s in samples] == [
        (1000, 200000, 4),
        (1000, 200000, 4),
        (1000, 400000, 4),
        (1000, 100000, 1),
        (1001, 100000, 2),
    ]
    assert samples[0].frames[1] == (
        "py::SyntheticWorkload.request:/src/loadgen/workload/generator.py",
        "[JIT] tid 1000",
    )
    assert cp.main_thread(samples) == 1000


def test_each_sample_goes_to_the_innermost_area_on_its_chain() -> None:
    samples = _samples()
    areas = [cp.area_of(s, 1000) for s in samples]
    assert areas == [
        "workload: prompts, fingerprint, prefix blocks",  # not the dispatch loop that called it
        "start-up imports",
        "response reads: head, framing, C reader",  # the C reader, by its symbol
        cp.LOOP_ONLY,
        cp.OTHER_THREADS,
    ]


def test_a_dso_path_does_not_make_an_area_only_the_symbol_does() -> None:
    # the C module lives under /loadgen/, which marks "other loadgen Python" in a Python frame's name
    s = cp.Sample(1000, 1, [("whole_chunks", "/src/loadgen/transport/_kread.cpython-312.so")])
    assert cp.area_of(s, 1000) == cp.LOOP_ONLY


def test_dso_classes_by_file_name_not_by_the_folder_it_is_in() -> None:
    by_dso = [cp.dso_of(s) for s in _samples()]
    # uvloop lives under .../python3.12/site-packages: its file name, not the folder, decides
    assert by_dso == ["interpreter", "interpreter", "kernel", "event loop (uvloop)", "kernel"]
    assert cp.dso_of(cp.Sample(1, 1, [("x", "/src/loadgen/_json.cpython-312-x86_64-linux-gnu.so")])) == (
        "loadgen's C modules"
    )
    assert cp.dso_of(cp.Sample(1, 1, [])) == "other"


def test_the_table_gives_each_area_its_share_of_the_unprofiled_cpu() -> None:
    profile = cp.charge(_samples(), 1000)
    assert profile.total_ns == 1_000_000
    assert profile.python_frames
    lines = cp.table(profile, whole_ms=50.0, requests=100)
    text = "\n".join(lines)
    assert "sampled 1.0 ms of CPU (without the profiler: 50.0 ms)" in text
    assert "kernel 50.0%" in text
    assert "interpreter 40.0%" in text
    # reads: 40% of the samples -> 40% of 50 ms = 20 ms, 200 µs a request over 100 requests
    row = next(line for line in lines if line.strip().startswith("response reads"))
    assert row.split()[-3:] == ["40.0%", "20.0", "200.0"]
    assert lines[-1].startswith("  hottest code (self): tcp_recvmsg_locked 40.0%")


def test_without_python_frames_the_areas_are_not_printed() -> None:
    plain = cp.Sample(7, 10, [("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.11.so.1.0")])
    profile = cp.charge([plain], 7)
    lines = cp.table(profile, whole_ms=1.0, requests=1)
    assert not profile.python_frames
    assert any("areas: none" in line for line in lines)
    assert not any(line.strip().startswith(cp.LOOP_ONLY) for line in lines)


def test_a_perf_that_cannot_sample_is_one_line_saying_why() -> None:
    missing = cp.perf_command({"PERF": "/nonexistent/perf"})
    assert isinstance(missing, str)
    assert missing.startswith("/nonexistent/perf cannot run")
    failing = cp.perf_command({"PERF": f"{sys.executable} -c 'raise SystemExit(3)'"})
    assert isinstance(failing, str)
    assert "cannot sample here (exit 3)" in failing


def test_an_area_starts_at_its_own_functions_and_takes_what_they_call() -> None:
    def chain(*symbols: str) -> cp.Sample:
        return cp.Sample(1, 1, [(sym, "x") for sym in symbols])

    parse = chain(
        "finish",  # the C stream parse
        "py::finalize:/src/loadgen/transport/finish.py",
        "py::Run._take:/src/loadgen/run/measure.py",
        "py::Run._parse:/src/loadgen/run/measure.py",
    )
    assert cp.area_of(parse, 1) == "finisher: stream parse, accounting, journal line"
    digest = chain(
        "py::SentDigest.step:/src/loadgen/workload/generator.py", *[s for s, _ in parse.frames[2:]]
    )
    assert cp.area_of(digest, 1) == "workload: prompts, fingerprint, prefix blocks"
    show = chain("py::store_run:/src/loadgen/store/writer.py", "py::_show:/src/loadgen/cli/run.py")
    assert cp.area_of(show, 1) == "record: summary, files, store row"  # not the command line's, its file's
    options = chain("py::parse_args:/src/loadgen/cli/run.py")
    assert cp.area_of(options, 1) == "command line and run set-up: options, checks, manifest"
