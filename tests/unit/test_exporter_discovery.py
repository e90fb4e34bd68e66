"""Process discovery on the real engines' process trees (golden ps.txt) and model facts."""

from __future__ import annotations

import json
from pathlib import Path

from exporter.discovery import (
    EngineProcess,
    ProcInfo,
    engine_ancestor,
    engine_key,
    find_engines,
    pair_urls,
    parse_ps,
    served_model,
    title_engine,
)
from exporter.engine_http import EngineHttpFacts
from exporter.engines import EngineInspector
from exporter.model_info import read_model_config
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM


def test_vllm_engine_core_child_is_traced_to_the_api_server() -> None:
    procs = parse_ps((GOLDEN_VLLM / "ps.txt").read_text())
    engines = find_engines(procs)
    assert [(e.engine, e.pid) for e in engines] == [("vllm", 613)]
    engine = engines[0]
    # nvidia-smi shows pid 736 "VLLM::EngineCore" holding the GPU memory; its flags live on 613.
    assert 736 in engine.children
    assert engine.args["gpu_memory_utilization"] == 0.5
    assert engine.base_url == "http://127.0.0.1:8000"
    by_pid = {p.pid: p for p in procs}
    assert engine_ancestor(736, by_pid, {e.pid: e for e in engines}) is engine
    assert title_engine(by_pid[736].cmdline) == "vllm"


def test_sglang_scheduler_child_is_traced_to_launch_server() -> None:
    engines = find_engines(parse_ps((GOLDEN_SGLANG / "ps.txt").read_text()))
    assert [(e.engine, e.pid) for e in engines] == [("sglang", 1273)]
    assert {1325, 1326} <= set(engines[0].children)
    assert engines[0].port == 30000
    assert engines[0].args["context_length"] == 2048


def test_forked_child_with_same_cmdline_is_not_a_second_engine() -> None:
    argv = ("python", "-m", "simengine", "--port", "8123")
    engines = find_engines([ProcInfo(100, 1, argv), ProcInfo(101, 100, argv), ProcInfo(5, 1, ("bash",))])
    assert [e.pid for e in engines] == [100]
    assert engines[0].children == [101]
    assert engines[0].base_url == "http://127.0.0.1:8123"


def test_model_config_from_hf_cache_snapshot(tmp_path: Path) -> None:
    snapshot = tmp_path / "hub" / "models--org--tiny" / "snapshots" / "0123456789abcdef"
    snapshot.mkdir(parents=True)
    (tmp_path / "hub" / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--tiny" / "refs" / "main").write_text("0123456789abcdef")
    (snapshot / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "torch_dtype": "bfloat16",
                "max_position_embeddings": 2048,
                "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128},
            }
        )
    )
    (snapshot / "model.safetensors").write_text("")
    facts = read_model_config("org/tiny", {"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert facts["architectures"] == ["LlamaForCausalLM"]
    assert facts["revision"] == "0123456789abcdef"
    assert facts["hf_repo"] == "org/tiny"
    assert facts["quantization"] == {"quant_method": "awq", "bits": 4, "group_size": 128}
    assert facts["weight_format"] == "safetensors"
    direct = read_model_config(str(snapshot))
    assert direct["torch_dtype"] == "bfloat16"
    assert direct["revision"] == "0123456789abcdef"


def test_model_config_absent_is_just_the_source() -> None:
    assert read_model_config("no/such-model", {"HF_HUB_CACHE": "/nonexistent"}) == {"source": "no/such-model"}


# Two hosts' (or two network namespaces') facts in one process table: the golden vLLM (pid 613,
# --port 8000, serving tiny-llama) and a simulated engine on the same port 8000 in another namespace.
SIM_ON_8000 = ProcInfo(
    9100, 1, ("python", "-m", "simengine", "--personality", "vllm", "--port", "8000", "--model", "sim-llama")
)


def two_engines_on_8000() -> list[EngineProcess]:
    return find_engines([*parse_ps((GOLDEN_VLLM / "ps.txt").read_text()), SIM_ON_8000])


def test_two_engines_on_one_port_stay_two_engines() -> None:
    found = two_engines_on_8000()
    assert sorted((e.engine, e.pid, e.port) for e in found) == [
        ("simengine", 9100, 8000),
        ("vllm", 613, 8000),
    ]
    pairs = pair_urls(found, [])
    assert [(url, engine_key(p)) for url, p in pairs if p] == [(None, (613, 8000)), (None, (9100, 8000))]


def test_a_url_on_a_shared_port_is_the_engine_serving_its_model() -> None:
    pairs = pair_urls(two_engines_on_8000(), [("http://simengine:8000", "sim-llama")])
    # the URL is the simulated engine; the vLLM on the same port stays its own engine
    assert [(url, p.pid if p else None) for url, p in pairs] == [("http://simengine:8000", 9100), (None, 613)]


def test_a_url_that_cannot_tell_shared_port_engines_apart_takes_neither() -> None:
    pairs = pair_urls(two_engines_on_8000(), [("http://10.0.0.7:8000", None), ("http://x:8000", "other")])
    assert [(url, p.pid if p else None) for url, p in pairs] == [
        ("http://10.0.0.7:8000", None),
        ("http://x:8000", None),
        (None, 613),
        (None, 9100),
    ]


def test_a_lone_process_on_the_port_is_the_url_unless_it_serves_another_model() -> None:
    (vllm,) = find_engines(parse_ps((GOLDEN_VLLM / "ps.txt").read_text()))
    assert served_model(vllm) == "tiny-llama"
    for model in ("tiny-llama", None):  # the same model, or an answer without one
        assert pair_urls([vllm], [("http://127.0.0.1:8000", model)]) == [("http://127.0.0.1:8000", vllm)]
    assert pair_urls([vllm], [("http://simengine:8000", "sim-llama")]) == [
        ("http://simengine:8000", None),
        (None, vllm),
    ]
    assert pair_urls([vllm], [("http://127.0.0.1:9000", "tiny-llama")])[0] == ("http://127.0.0.1:9000", None)


def test_the_inspector_reports_both_engines_on_one_port() -> None:
    procs = [*parse_ps((GOLDEN_VLLM / "ps.txt").read_text()), SIM_ON_8000]
    models = {"http://simengine:8000": "sim-llama"}
    inspector = EngineInspector(
        ["http://simengine:8000"],
        read_procs=lambda: procs,
        ports_of=lambda pid: [],
        read_env=lambda pid: {},
        ask_interpreter=lambda pid, engine: None,
        poll=lambda url, timeout, key: EngineHttpFacts(url=url, up=True, model=models.get(url)),
    )
    reports = inspector.reports(fresh=True)
    assert sorted((r.engine, r.pid, r.url) for r in reports) == [
        ("simengine", 9100, "http://simengine:8000"),
        ("vllm", 613, "http://127.0.0.1:8000"),
    ]
