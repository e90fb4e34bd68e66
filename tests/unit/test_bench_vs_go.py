"""bench.client_figures / bench.vs_go / bench.refbench: normalising both clients' lines, the figures,
the ratio table, the lag crossing, core choice, and finding the binaries (no Go needed)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from bench import client_figures as cf
from bench import refbench, vs_go


def _go(key: str, start: int, ttft: float, itl: list[float], sched: int = 0) -> dict[str, object]:
    return {"key": key, "start_mono_ns": start, "sched_mono_ns": sched, "ttft_ms": ttft,
            "itl_ms": itl, "out_tokens": len(itl) + 1, "ok": True}  # fmt: skip


def _lg(rid: str, sent: int, ttft_s: float, itl_s: list[float], lag_s: float = 0.0) -> dict[str, object]:
    return {"x_request_id": rid, "sent_ns": sent, "schedule_lag_s": lag_s, "ttft_s": ttft_s,
            "itl_s": itl_s, "output_tokens": len(itl_s) + 1, "outcome": "ok"}  # fmt: skip


def test_both_clients_normalise_to_the_same_request() -> None:
    go = cf.from_refclient(_go("7", 1_000_000_000, 20.5, [2.0, 2.1], sched=999_500_000))
    lg = cf.from_loadgen(_lg("7", 1_000_000_000, 0.0205, [0.002, 0.0021], lag_s=0.0005))
    for r in (go, lg):
        assert r.rid == "7"
        assert r.tokens == 3
        assert r.ok
        assert r.lag_ms == pytest.approx(0.5)
        assert r.token_times() == [1_020_500_000, 1_022_500_000, 1_024_600_000]


def test_concurrency_mode_has_no_lag_and_a_failed_go_request_no_ttft() -> None:
    line = _go("1", 5, 0.0, [])
    line.update(ok=False, ttft_ms=0, out_tokens=0)
    r = cf.from_refclient(line)
    assert r.lag_ms is None
    assert r.ttft_ms is None
    assert r.token_times() == []


def test_ttft_and_gap_errors_join_on_the_request_id() -> None:
    reqs = [cf.from_loadgen(_lg("a", 0, 0.021, [0.0025, 0.002])), cf.from_loadgen(_lg("b", 0, 0.030, []))]
    assert cf.ttft_errors_ms(reqs, {"a": 20.0}) == [pytest.approx(1.0)]  # b has no server line
    assert cf.gap_errors_ms(reqs, {"a": [2.0, 2.0]}) == [pytest.approx(0.5), pytest.approx(0.0)]
    assert cf.itl_excess_ms(reqs, 2.0) == pytest.approx(cf.p([2.5, 2.0], 99) - 2.0)


def test_window_cpu_interpolates_and_refuses_a_window_the_samples_miss() -> None:
    samples = [(0, 0.0), (100, 1.0), (200, 3.0)]
    assert cf.window_cpu_s(samples, 50, 150) == pytest.approx(2.0 - 0.5)
    assert math.isnan(cf.window_cpu_s(samples, 50, 250))
    assert math.isnan(cf.window_cpu_s(samples[:1], 0, 0))


def test_load_window_runs_from_first_send_to_last_token() -> None:
    reqs = [cf.from_loadgen(_lg("a", 100, 1e-6, [1e-6])), cf.from_loadgen(_lg("b", 50, 5e-6, []))]
    assert cf.load_window(reqs) == (50, 5050)
    assert cf.load_window([]) == (0, 0)


def test_steady_rate_counts_tokens_between_ramp_up_and_the_last_send() -> None:
    # 10 streams, one token every ms from t=0 for 3 s; the last request starts at t=3 s
    reqs = [cf.from_loadgen(_lg(str(i), 0, 0.001, [0.001] * 2999)) for i in range(10)]
    reqs.append(cf.from_loadgen(_lg("last", 3_000_000_000, None, [])))  # type: ignore[arg-type]
    assert cf.steady_tokens_s(reqs, skip_s=1.0) == pytest.approx(10_000, rel=0.01)
    assert math.isnan(cf.steady_tokens_s(reqs[:1], skip_s=10.0))
    assert cf.ideal_tokens_s(256, 256, 20.0, 2.0) == pytest.approx(256 * 256 / 0.530)


def test_ratio_row_takes_the_median_of_per_block_ratios_and_knows_its_direction() -> None:
    row = cf.ratio_row("cpu", [1.0, 2.0, 0.9], [1.0, 1.0, 1.0])
    assert (row.loadgen, row.go, row.ratio) == (1.0, 1.0, 1.0)
    assert row.met()
    assert not cf.ratio_row("cpu", [1.2], [1.0]).met()
    share = cf.ratio_row("share", [97.0], [98.0], higher_better=True)
    assert not share.met()
    assert "not met" in cf.format_row(share)
    assert "blocks" not in cf.format_row(share)  # one block: no spread to show


def test_a_row_shows_how_far_the_blocks_moved() -> None:
    row = cf.ratio_row("cpu", [1.1, 0.9, 1.3], [1.0, 0.9, 1.2])
    assert row.ratios == (pytest.approx(1.0), pytest.approx(1.1))
    assert row.go_spread == pytest.approx(1.2 / 0.9 - 1)
    assert cf.format_row(row).endswith("[blocks 1.00-1.10, Go's own spread 33%]")


def test_lag_crossing_names_the_first_rate_at_or_over_the_limit() -> None:
    line = cf.lag_crossing([(1600, 2.5), (800, 0.4), (1200, 1.1)])
    assert line.startswith("lag p99 crosses 2 ms at 1600 req/s")
    assert "1200 req/s held" in line
    assert "stays under" in cf.lag_crossing([(800, 0.4)])
    assert "no rate held" in cf.lag_crossing([(800, 3.0)])


def test_table_pairs_each_figure_with_go_per_block() -> None:
    got = {"loadgen": [{"x": 2.0}, {"x": 1.0}], "go": [{"x": 1.0}, {"x": 1.0}]}
    (row,) = vs_go.table(got)
    assert row.ratio == pytest.approx(1.5)


def test_cores_default_to_the_last_two_and_bad_ones_are_named() -> None:
    assert vs_go.cores_for([0, 1, 2, 3], None) == (2, 3)
    assert vs_go.cores_for([0, 1, 2, 3], "0,1") == (0, 1)
    for bad in ("1,1", "0,9", "x"):
        with pytest.raises(ValueError, match=f"VSGO_CORES='{bad}'"):
            vs_go.cores_for([0, 1, 2, 3], bad)


def test_point_arguments_ask_both_clients_for_the_same_load() -> None:
    lg = vs_go.loadgen_args("http://h", "/o", ("rate", 400), 8.0)
    go = vs_go.go_args("http://h", "/o", ("rate", 400), 8.0)
    assert lg[lg.index("--num-prompts") + 1] == "3200"
    assert go[go.index("-n") + 1] == "3200"
    lg = vs_go.loadgen_args("http://h", "/o", ("streams", 64), 8.0)
    go = vs_go.go_args("http://h", "/o", ("streams", 64), 8.0)
    assert lg[lg.index("--max-concurrency") + 1] == go[go.index("-concurrency") + 1] == "64"


def _exe(path: Path) -> None:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_locate_prefers_given_binaries_and_says_why_when_there_are_none(tmp_path: Path) -> None:
    for name in refbench.BINARIES:
        _exe(tmp_path / name)
    got = refbench.locate({"REFBENCH_BIN": str(tmp_path)})
    assert isinstance(got, refbench.Tools)
    assert got.server == tmp_path / "refserver"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no executable" in str(refbench.locate({"REFBENCH_BIN": str(empty)}))
    src = tmp_path / "src"
    (src / "server").mkdir(parents=True)
    (src / "server" / "main.go").write_text("package main\n")
    env = {"REFBENCH": str(src), "REFBENCH_BUILD": str(empty)}
    assert "Go is not installed" in str(refbench.locate(env, go=""))
    assert "no refbench source" in str(
        refbench.locate({"REFBENCH": str(empty), "REFBENCH_BUILD": str(empty)})
    )


def test_a_build_older_than_its_source_is_rebuilt(tmp_path: Path) -> None:
    cache, src = tmp_path / "cache", tmp_path / "src"
    cache.mkdir()
    (src / "server").mkdir(parents=True)
    for name in refbench.BINARIES:
        _exe(cache / name)
    go_file = src / "server" / "main.go"
    go_file.write_text("package main\n")
    os.utime(cache / "refserver", (1, 1))
    env = {"REFBENCH": str(src), "REFBENCH_BUILD": str(cache)}
    assert "Go is not installed" in str(refbench.locate(env, go=""))  # stale: would rebuild
    os.utime(go_file, (0, 0))
    assert isinstance(refbench.locate(env, go=""), refbench.Tools)


def test_server_log_gives_truth_ttft_and_gaps() -> None:
    text = (
        '{"hdr_id":"a","arrive_mono_ns":1000000,"first_mono_ns":21000000,"last_mono_ns":25000000,'
        '"ttft_us":20000,"tok_send_us":[20000,22000,24500]}\n\n'
        '{"hdr_id":"b","arrive_mono_ns":0,"first_mono_ns":0,"last_mono_ns":0,"ttft_us":0}\n'
    )
    log = refbench.read_log(text)
    assert log.truth() == {"a": [21_000_000, 23_000_000, 25_500_000]}
    assert log.ttft_ms() == {"a": 20.0}
    assert log.gaps_ms() == {"a": [2.0, 2.5]}
    assert log.arrivals_ns() == {"a": 1_000_000}  # b never arrived


def test_arrival_lag_is_the_server_s_stamp_minus_each_client_s_due_time() -> None:
    # the Go client stamps its start before its HTTP client writes, loadgen after its write: the same
    # request due at 999.5 ms and read by the server at 1000.2 ms is 0.7 ms late for both
    go = cf.from_refclient(_go("g", 999_900_000, 20.0, [], sched=999_500_000))
    lg = cf.from_loadgen(_lg("l", 1_000_100_000, 0.020, [], lag_s=0.0006))
    assert (go.due_ns, lg.due_ns) == (999_500_000, 999_500_000)
    arrivals = {"g": 1_000_200_000, "l": 1_000_200_000}
    assert cf.arrival_lags_ms([go, lg], arrivals) == [pytest.approx(0.7), pytest.approx(0.7)]
    unscheduled = cf.from_refclient(_go("u", 5, 1.0, []))  # concurrency mode: no due time
    assert unscheduled.due_ns is None
    assert cf.arrival_lags_ms([unscheduled, go], {"u": 9, "x": 1}) == []  # g never reached the server


def test_points_default_to_all_and_a_bad_one_is_named() -> None:
    assert vs_go.parse_points(None) == vs_go.DEFAULT_POINTS
    assert vs_go.parse_points("streams:64, rate:800") == (("streams", 64), ("rate", 800))
    for bad in ("streams:65", "rate", "burst:1"):
        with pytest.raises(ValueError, match=f"VSGO_POINTS item '{bad}'"):
            vs_go.parse_points(bad)


def test_make_bench_runs_vsgo() -> None:
    from bench.__main__ import BENCHMARKS, DEFAULT

    assert BENCHMARKS["vsgo"] == "bench.vs_go"
    assert "vsgo" in DEFAULT


def test_without_binaries_the_bench_says_why_and_skips(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("REFBENCH_BIN", str(tmp_path))
    vs_go.main()
    out = capsys.readouterr().out
    assert out.startswith("vsgo: skipped, the Go side is not available: REFBENCH_BIN=")


def test_the_interpreters_own_start_up_is_measured_with_and_without_site() -> None:
    core = sorted(os.sched_getaffinity(0))[0]
    full, bare = vs_go.interpreter_start(core, runs=3)
    assert 0 < bare < 10_000
    assert 0 < full < 10_000  # CPU ms of a real child each (a busy host scales both, not their sign)


def test_the_absolute_targets_are_judged_on_every_block_and_the_median() -> None:
    ingest, itl = "tokens/s at 256 streams, % of ideal", "ITL error p99 at 64 streams (ITL p99 - 2 ms)"
    lines = cf.absolute_targets({ingest: [98.8, 99.4, 98.1], itl: [0.03, 0.2, 0.04]})
    assert lines == [
        "target: >= 98% of ideal at 256 streams in every block: met (lowest 98.10%)",
        "target: ITL error p99 at 64 streams <= 0.1 ms: met (median 0.040 ms)",
    ]
    lines = cf.absolute_targets({ingest: [99.0, 97.9], itl: [0.2, 0.3]})
    assert lines == [
        "target: >= 98% of ideal at 256 streams in every block: not met (lowest 97.90%)",
        "target: ITL error p99 at 64 streams <= 0.1 ms: not met (median 0.250 ms)",
    ]
    assert cf.absolute_targets({ingest: []}) == []


def test_loadgen_s_own_environment_imports_this_one_s_packages_without_their_start_up_hooks(
    tmp_path: Path,
) -> None:
    import site
    import subprocess
    import sys

    python, paths = vs_go.own_environment(str(tmp_path / "venv"))
    assert Path(python).parent.parent == tmp_path / "venv"
    assert paths
    hooked = set()  # the modules this environment's .pth files import at every start
    for folder in site.getsitepackages():
        for pth in Path(folder).glob("*.pth"):
            for line in pth.read_text(errors="replace").splitlines():
                if line.startswith("import "):
                    hooked |= {m.strip().split(".")[0] for m in line[7:].split(";")[0].split(",")}
    probe = "import sys, click, orjson; print(sys.prefix); print(' '.join(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}

    def modules(*args: str) -> tuple[str, set[str]]:
        out = subprocess.run([*args, "-c", probe], env=env, capture_output=True, text=True, check=True)
        prefix, names = out.stdout.splitlines()
        return prefix, set(names.split())

    prefix, ours = modules(python)
    _, bare = modules(sys.executable, "-S")  # what the imports themselves need, no hook run
    _, host = modules(sys.executable)
    assert Path(prefix) == tmp_path / "venv"
    assert sys.prefix != prefix
    assert not (ours - bare - {"site"}) & hooked, (ours - bare) & hooked
    # where this environment has hooks that import something, the host interpreter does import it
    assert (host - bare - {"site"}) & hooked or not hooked - {"os", "sys", "site"}


def test_loadgen_s_own_cpu_figure_is_set_beside_the_bench_s_window() -> None:
    blocks = [
        {"own client_cpu ms/request at 400 req/s": 0.50, "CPU ms/request at 400 req/s, load window": 0.48},
        {"own client_cpu ms/request at 400 req/s": 0.54, "CPU ms/request at 400 req/s, load window": 0.52},
        {"CPU ms/request at 800 req/s, load window": 0.40},  # a tree from before client_cpu: no line
    ]
    (line,) = cf.own_cpu_lines(blocks)
    assert line.startswith("its own client_cpu at 400 req/s: 0.520 ms/request over its load")
    assert "load window 0.500 (own / bench 1.04; median of 2 blocks)" in line
    assert cf.own_cpu_lines([{"CPU ms/request at 400 req/s, load window": 0.4}]) == []
