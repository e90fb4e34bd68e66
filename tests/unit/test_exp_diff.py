"""Manifest differences ranked by how likely they explain a gap; side-by-side metric deltas."""

from __future__ import annotations

import copy

import pytest

from loadgen.analysis.diff import manifest_differences, metric_rows, workload_warnings
from loadgen.analysis.flatten import flatten, parse_flag_list

MANIFEST = {
    "run_id": "a",
    "started_at": "t0",
    "partial": False,
    "tool": {"name": "infergauge", "version": "0.1.0", "git_sha": "abc"},
    "client": {"hostname": "box1", "cpu_model": "EPYC", "cpu_count": 16},
    "config": {"rate": "inf", "max_concurrency": 32, "sim_args": ["--max-num-seqs", "64"]},
    "workload": {"name": "random", "fingerprint": "f1", "seed": 42},
    "engine": {
        "engine": "vllm",
        "version": "0.26.0",
        "base_url": "http://127.0.0.1:8000",
        "server_args": {"max_num_seqs": 64},
        "params": {"max_num_seqs": 64, "block_size": 16},
    },
    "exporter": {"gpus": [{"name": "H200", "driver_version": "580"}], "topology": {"interconnect": "nvlink"}},
    "cache": {"flushed": True, "method": "restart", "detail": ""},
    "experiment": {"id": "e1", "phase": "baseline"},
}


def _variant(**changes):
    manifest = copy.deepcopy(MANIFEST)
    for dotted, value in changes.items():
        node = manifest
        *parents, leaf = dotted.split("__")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return manifest


def test_flag_lists_become_keys():
    assert parse_flag_list(["--max-num-seqs", "8", "--enable-x", "--a=b"]) == {
        "max_num_seqs": "8",
        "enable_x": True,
        "a": "b",
    }
    assert flatten({"config": {"sim_args": ["--x", "1"]}}) == {"config.sim_args.x": "1"}


def _mentions(diffs, word):
    """Every row or context detail whose key contains `word`."""
    keys = [d.key for d in diffs] + [x.key for d in diffs for x in d.details]
    return [k for k in keys if word in k]


def test_max_num_seqs_is_named_first_once_and_volatile_keys_ignored():
    b = _variant(
        run_id="b",
        started_at="t1",
        engine__params__max_num_seqs=8,
        engine__server_args__max_num_seqs=8,
        config__sim_args=["--max-num-seqs", "8"],
        client__hostname="box2",
        experiment__phase="sensitivity",
        engine__base_url="http://127.0.0.1:8001",
    )
    diffs = manifest_differences(MANIFEST, b)
    assert diffs[0].key == "engine.params.max_num_seqs"
    assert (diffs[0].a, diffs[0].b) == (64, 8)
    # the raw spellings (server args, simulator flags) are the same fact: not rows, not context
    assert _mentions(diffs, "max_num_seqs") == ["engine.params.max_num_seqs"]
    keys = [d.key for d in diffs]
    assert keys == ["engine.params.max_num_seqs", "client", "engine"]
    client = diffs[1]
    assert [(d.key, d.a, d.b) for d in client.details] == [("client.hostname", "box1", "box2")]
    assert not _mentions(diffs, "run_id") + _mentions(diffs, "started_at") + _mentions(diffs, "experiment")


def test_gpu_and_interconnect_outrank_client_host():
    b = _variant(exporter__topology={"interconnect": "pcie"}, client__hostname="other", tool__git_sha="def")
    diffs = manifest_differences(MANIFEST, b)
    assert [(d.key, d.group) for d in diffs] == [
        ("exporter.topology.interconnect", "gpu"),
        ("client", "context"),
        ("tool", "context"),
    ]
    assert [d.key for d in diffs[2].details] == ["tool.git_sha"]


def test_exporter_checks_line_up_by_id():
    a = _variant(exporter__checks=[{"id": "persistence", "severity": "info", "message": "on"}])
    b = _variant(
        exporter__checks=[
            {"id": "throttle", "severity": "warning", "message": "HW slowdown"},
            {"id": "persistence", "severity": "info", "message": "on"},
        ]
    )
    diffs = manifest_differences(a, b)
    assert {d.group for d in diffs} == {"checks"}
    keys = {d.key: d.score for d in diffs}
    assert set(keys) == {"exporter.checks.throttle.severity", "exporter.checks.throttle.message"}
    assert keys["exporter.checks.throttle.message"] == pytest.approx(0.65)


def test_small_numeric_change_ranks_below_big_one():
    b = _variant(engine__params__block_size=32, engine__params__max_num_seqs=60)
    diffs = {d.key: d.score for d in manifest_differences(MANIFEST, b)}
    # 64 -> 60 is a small change of a strong cause; 16 -> 32 a full change of a weak one
    # score = prior 1.0 x (0.5 + |ln(60/64)|) = 0.5645
    assert diffs["engine.params.max_num_seqs"] == pytest.approx(0.5645, abs=1e-4)
    assert diffs["engine.params.block_size"] == pytest.approx(0.5)


def test_workload_and_cache_warnings():
    b = _variant(workload__fingerprint="f2", cache={"flushed": False, "method": "flush", "detail": "404"})
    warnings = workload_warnings(MANIFEST, b)
    assert any("different workloads" in w and "f1" in w and "f2" in w for w in warnings)
    assert any("could not be cleared" in w for w in warnings)
    assert workload_warnings(MANIFEST, MANIFEST) == []


def test_metric_rows_deltas():
    a = {"request_throughput": 18.5, "e2e_s": {"p99": 0.32}}
    b = {"request_throughput": 11.2, "e2e_s": {"p99": 0.80}}
    rows = {r.label: r for r in metric_rows(a, b)}
    assert rows["request throughput"].delta == pytest.approx(-7.3)
    assert rows["request throughput"].delta_pct == pytest.approx(-39.459, abs=1e-3)
    assert rows["E2E p99"].delta_pct == pytest.approx(150.0)
    assert rows["goodput"].delta is None
