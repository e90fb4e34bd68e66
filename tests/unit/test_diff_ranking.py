"""`loadgen diff` across engines: facts in the stated order, neutral params compared once (from the
exporter where the run has none), raw arguments only as grouped context below every fact."""

from __future__ import annotations

import copy

import pytest

from infergauge.engines import get
from infergauge.engines.base import NEUTRAL_PARAMS
from infergauge.engines.params import from_neutral
from loadgen.analysis.diff import manifest_differences, unrecorded_warnings
from loadgen.analysis.diff_facts import resolve_params, run_facts
from loadgen.analysis.diff_priors import GROUP_ORDER

PARAMS = {"max_num_seqs": 64, "tensor_parallel_size": 1, "block_size": 16, "dtype": "bfloat16"}


def _manifest(engine: str, params: dict, **config) -> dict:
    """A run record of `engine` whose raw server args are that engine's spelling of `params`."""
    return {
        "config": {"endpoint": "completions", "max_concurrency": 32, **config},
        "workload": {"name": "random", "fingerprint": "f1"},
        "engine": {
            "engine": engine,
            "version": "1.0",
            "model": "m-8b",
            "base_url": "http://127.0.0.1:8000",
            "server_args": {**from_neutral(get(engine), params), "log_level": "info"},
            "params": dict(params),
        },
        "exporter": {
            "gpus": [{"name": "H200", "driver_version": "580"}],
            "topology": {"interconnect": "nvlink"},
        },
    }


def _summary(input_tokens: int, output_tokens: int, ok: int = 10) -> dict:
    return {
        "requests": {"ok": ok},
        "total_input_tokens": input_tokens * ok,
        "total_output_tokens": output_tokens * ok,
    }


def _mentions(diffs, word):
    keys = [d.key for d in diffs] + [x.key for d in diffs for x in d.details]
    return [k for k in keys if word in k]


def test_the_flag_table_spells_max_num_seqs_differently():
    # the premise of the cross-engine tests: the two engines' raw args do not share the name
    assert get("vllm").flags["max_num_seqs"].dest != get("sglang").flags["max_num_seqs"].dest


def test_another_engines_spelling_of_an_equal_param_is_no_difference():
    a, b = _manifest("vllm", PARAMS), _manifest("sglang", PARAMS)
    assert set(a["engine"]["server_args"]) != set(b["engine"]["server_args"])  # 4 keys each side
    diffs = manifest_differences(a, b)
    assert [d.key for d in diffs] == ["engine.engine"]
    assert (diffs[0].a, diffs[0].b) == ("vllm 1.0", "sglang 1.0")  # the version rides with the engine


def test_rows_follow_the_stated_priors():
    a = _manifest("vllm", PARAMS)
    b = _manifest("sglang", {**PARAMS, "max_num_seqs": 8}, endpoint="chat", max_concurrency=16)
    b["engine"]["model"] = "m-14b"
    b["engine"]["server_args"]["schedule_policy"] = "lpm"
    b["workload"]["fingerprint"] = "f2"
    b["exporter"]["gpus"][0]["driver_version"] = "575"
    diffs = manifest_differences(a, b, _summary(64, 64), _summary(150, 64))
    groups = [d.group for d in diffs]
    assert groups == sorted(groups, key=GROUP_ORDER.__getitem__)
    assert [d.key for d in diffs[:4]] == [
        "engine.engine",
        "engine.model",
        "config.endpoint",
        "summary.input_tokens_per_request",
    ]
    assert (diffs[3].a, diffs[3].b) == (64, 150)
    assert _mentions(diffs, "max_num_seqs") == ["engine.params.max_num_seqs"]  # once, as a param
    # a raw argument outranks no fact, however heavy its group
    context = [d for d in diffs if d.group == "context"]
    gpu = next(i for i, d in enumerate(diffs) if d.group == "gpu")
    assert context
    assert all(diffs.index(c) > gpu for c in context)
    assert [x.key for x in context[0].details] == ["engine.server_args.schedule_policy"]


@pytest.mark.parametrize(("b_tokens", "row"), [(64.4, False), (70, True)])
def test_measured_tokens_count_beyond_noise(b_tokens, row):
    a = _manifest("vllm", PARAMS)
    summary_b = {"requests": {"ok": 10}, "total_input_tokens": b_tokens * 10, "total_output_tokens": 640}
    diffs = manifest_differences(a, copy.deepcopy(a), _summary(64, 64), summary_b)
    assert bool(_mentions(diffs, "input_tokens_per_request")) is row


def test_params_come_from_the_exporter_engine_on_the_runs_port_when_the_run_has_none():
    a = _manifest("vllm", PARAMS)
    a["engine"]["params"] = {}
    a["engine"]["server_args"] = {}
    a["exporter"]["engines"] = [
        {"engine": "vllm", "url": "http://127.0.0.1:8001", "params": {"max_num_seqs": 256}},
        {"engine": "vllm", "url": "http://127.0.0.1:8000", "params": {**PARAMS, "max_num_seqs": 128}},
    ]
    params, sources = resolve_params(a)
    assert params["max_num_seqs"] == 128
    # the engine is named by its key and identity, never by its list position
    assert sources["max_num_seqs"] == "exporter.engines[served].params.max_num_seqs (vllm@127.0.0.1:8000)"
    diffs = manifest_differences(a, _manifest("vllm", PARAMS))
    assert [(d.key, d.a, d.b) for d in diffs if d.group == "params"] == [
        ("engine.params.max_num_seqs", 128, 64)
    ]
    assert diffs[0].details[0].a == "exporter.engines[served].params.max_num_seqs (vllm@127.0.0.1:8000)"


def test_a_param_only_one_run_recorded_is_context_and_a_warning_not_a_difference():
    a, b = _manifest("vllm", PARAMS), _manifest("sglang", {**PARAMS, "block_size": 1})
    del a["engine"]["params"]["max_num_seqs"]
    diffs = manifest_differences(a, b)
    assert [(d.key, d.a, d.b) for d in diffs if d.group == "params"] == [("engine.params.block_size", 16, 1)]
    unrecorded = next(d for d in diffs if d.key == "engine.params.unrecorded")
    assert unrecorded.group == "context"
    assert [(d.key, d.a, d.b) for d in unrecorded.details] == [("engine.params.max_num_seqs", None, 64)]
    # B's raw spelling of it (max_running_requests) is no row either: the unrecorded row holds it
    assert [d.key for d in diffs if d.group != "context"] == ["engine.engine", "engine.params.block_size"]
    (warning,) = unrecorded_warnings(a, b)
    assert warning.startswith("run A recorded no max_num_seqs:")
    assert unrecorded_warnings(b, b) == []


def test_facts_survive_an_odd_manifest():
    facts = run_facts({"engine": None, "exporter": {"engines": "x"}}, {"requests": {"ok": 0}})
    assert (facts.engine, facts.model, facts.input_tokens) == (None, None, None)
    assert set(facts.params) == set(NEUTRAL_PARAMS)


def test_same_engine_version_change_ranks_above_the_model():
    a, b = _manifest("sglang", PARAMS), _manifest("sglang", PARAMS)
    b["engine"]["version"] = "1.1"
    b["engine"]["model"] = "m-14b"
    diffs = manifest_differences(a, b)
    assert [(d.group, d.a, d.b) for d in diffs] == [("version", "1.0", "1.1"), ("model", "m-8b", "m-14b")]


def test_a_params_row_names_the_recorded_provenance():
    a, b = _manifest("vllm", PARAMS), _manifest("vllm", {**PARAMS, "max_num_seqs": 8})
    b["engine"]["param_sources"] = {"max_num_seqs": "exporter /proc cmdline"}
    (row,) = manifest_differences(a, b)
    assert (row.key, row.a, row.b) == ("engine.params.max_num_seqs", 64, 8)
    assert (row.details[0].a, row.details[0].b) == (
        "engine.params.max_num_seqs",
        "engine.params.max_num_seqs (exporter /proc cmdline)",
    )


def test_odd_sections_are_read_as_empty():
    facts = run_facts({"engine": {"params": ["x"], "base_url": 5}, "exporter": {"engines": "x"}}, {})
    assert set(facts.params.values()) == {None}


def test_gpu_facts_of_a_run_without_exporter_are_context_not_differences():
    a, b = _manifest("vllm", PARAMS), _manifest("vllm", PARAMS)
    del b["exporter"]
    diffs = manifest_differences(a, b)
    assert {d.group for d in diffs} == {"context"}
    raw = {x.key for d in diffs for x in d.details}
    assert raw >= {"exporter.gpus.0.name", "exporter.topology.interconnect"}
    b["exporter"] = copy.deepcopy(a["exporter"])
    b["exporter"]["gpus"][0]["name"] = "H100"
    assert [(d.group, d.key) for d in manifest_differences(a, b)] == [("gpu", "exporter.gpus.0.name")]


def test_ages_of_stale_exporter_facts_are_no_difference():
    # the exporter kept a fact from an earlier poll and says how old it is: timing noise, not a cause
    a, b = _manifest("sglang", PARAMS), _manifest("sglang", PARAMS)
    for run, age in ((a, 12.3), (b, 0.4)):
        run["exporter"]["engines"] = [
            {
                "engine": "sglang",
                "url": "http://127.0.0.1:8000",
                "params": dict(PARAMS),
                "stale": {"version": age},
            }
        ]
    assert _mentions(manifest_differences(a, b), "stale") == []
