"""One resolution of effective parameters, on the real engines' captures and the real runs of
2026-12-01 (a default vLLM without dev mode, a dev-mode vLLM, SGLang)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from infergauge.engines import detect_http, get
from infergauge.engines.params import parse_cmdline
from infergauge.engines.resolve import CMDLINE, DEFAULT, MODEL_CONFIG, MODELS, info_metric_args, resolve
from tests.conftest import FIXTURES, GOLDEN_SGLANG, GOLDEN_VLLM

REAL = FIXTURES / "golden" / "real-runs-2026-12-01"


def body(folder: Path, name: str) -> Any:
    return json.loads((folder / name).read_text().partition("\n\n")[2])


def exporter_engine(name: str) -> dict[str, Any]:
    return dict(json.loads((REAL / "exporter" / name).read_text())["engines"][0])


def test_default_vllm_params_come_from_the_command_line_and_model_config() -> None:
    # what the exporter read from /proc on the real host, and the model's config.json
    seen = exporter_engine("exporter-vllm8.manifest.json")
    got = resolve(get("vllm"), cmdline=seen["args"], model_config=seen["model_config"], origin="exporter ")
    assert got.params["max_num_seqs"] == 8
    assert got.param_sources["max_num_seqs"] == "exporter " + CMDLINE
    # vLLM `--dtype` absent ('auto'): the effective dtype is the model's
    assert (got.params["dtype"], got.param_sources["dtype"]) == ("bfloat16", "exporter " + MODEL_CONFIG)
    assert got.param_sources["block_size"] == "exporter " + CMDLINE
    assert (got.params["seed"], got.param_sources["seed"]) == (0, DEFAULT)


def test_dev_mode_vllm_server_info_fills_what_the_command_line_left_out() -> None:
    argv = shlex.split((GOLDEN_VLLM / "command.txt").read_text())
    spec, args = parse_cmdline(argv)
    assert spec is not None
    info = body(GOLDEN_VLLM, "get_server_info.txt")
    got = resolve(spec, cmdline=args, server_info=info, server_info_path="/server_info")
    assert got.params["max_model_len"] == 2048
    assert got.param_sources["max_model_len"] == CMDLINE  # the flag outranks the echo
    assert (got.params["dtype"], got.param_sources["dtype"]) == ("bfloat16", "engine HTTP /server_info")
    assert got.params["max_num_seqs"] == "auto"  # neither the line nor vLLM 0.26's /server_info says


def test_sglang_reported_seed_replaces_auto() -> None:
    info = body(GOLDEN_SGLANG, "get_get_server_info.txt")
    argv = shlex.split((GOLDEN_SGLANG / "command.txt").read_text())
    spec, args = parse_cmdline(argv)
    assert spec is not None
    got = resolve(spec, cmdline=args, server_info=info, server_info_path="/get_server_info")
    assert got.params["seed"] == info["random_seed"]
    assert got.param_sources["seed"] == "engine HTTP /get_server_info"
    assert got.params["max_num_batched_tokens"] == info["chunked_prefill_size"]
    assert got.params["gpu_memory_utilization"] == 0.5


def test_real_sglang_run_agrees_with_what_loadgen_recorded() -> None:
    seen = exporter_engine("exporter-sglang-idle.manifest.json")
    recorded = json.loads((REAL / "runs" / "sglang-lg-r20" / "manifest.json").read_text())["engine"]
    got = resolve(get("sglang"), cmdline=seen["args"], model_config=seen["model_config"], origin="exporter ")
    for key in ("max_num_seqs", "gpu_memory_utilization", "max_model_len", "max_num_batched_tokens"):
        assert got.params[key] == recorded["params"][key], key


def test_the_gpu_decides_vllm_auto_defaults() -> None:
    big = resolve(get("vllm"), cmdline={}, gpu_memory_bytes=141 * 2**30, gpu_name="NVIDIA H200")
    small = resolve(get("vllm"), cmdline={}, gpu_memory_bytes=40 * 2**30, gpu_name="NVIDIA A100")
    assert (big.params["max_num_seqs"], small.params["max_num_seqs"]) == (1024, 256)
    assert big.param_sources["max_num_seqs"] == DEFAULT


def test_detect_http_on_the_golden_bodies() -> None:
    vllm = {
        p: body(GOLDEN_VLLM, f)
        for p, f in (("/version", "get_version.txt"), ("/v1/models", "get_v1_models.txt"))
    }
    vllm["/server_info"] = body(GOLDEN_VLLM, "get_server_info.txt")
    assert detect_http(vllm) is get("vllm")
    sglang = {"/get_server_info": body(GOLDEN_SGLANG, "get_get_server_info.txt")}
    sglang["/v1/models"] = body(GOLDEN_SGLANG, "get_v1_models.txt")
    # SGLang's /server_info answered too (newer releases): still SGLang, by content
    assert detect_http({**sglang, "/server_info": sglang["/get_server_info"]}) is get("sglang")
    assert detect_http({"/v1/models": {"data": [{"id": "m", "owned_by": "someone"}]}}) is None


def test_sglang_reported_running_request_limit_replaces_null() -> None:
    # SGLang 0.5.14 reports `max_running_requests: null` (sized from the KV pool at start-up) and the
    # limit it chose in internal_states[0].effective_max_running_requests_per_dp
    info = body(GOLDEN_SGLANG, "get_get_server_info.txt")
    assert info["max_running_requests"] is None
    chosen = info["internal_states"][0]["effective_max_running_requests_per_dp"]
    got = resolve(get("sglang"), cmdline={}, server_info=info, server_info_path="/get_server_info")
    assert (got.params["max_num_seqs"], got.param_sources["max_num_seqs"]) == (
        chosen,
        "engine HTTP /get_server_info",
    )
    # a limit the user set on the launch line is what the engine runs with, and names its source
    flagged = resolve(
        get("sglang"),
        cmdline={"max_running_requests": 64},
        server_info=info,
        server_info_path="/get_server_info",
    )
    assert (flagged.params["max_num_seqs"], flagged.param_sources["max_num_seqs"]) == (64, CMDLINE)


def test_vllm_context_length_from_v1_models_without_dev_mode() -> None:
    # a default vLLM (no /server_info) launched without --max-model-len: /v1/models states it
    served = body(GOLDEN_VLLM, "get_v1_models.txt")["data"][0]["max_model_len"]
    got = resolve(get("vllm"), cmdline={"model": "/tmp/tiny-llama"}, max_model_len=served)
    assert (got.params["max_model_len"], got.param_sources["max_model_len"]) == (served, MODELS)


def test_vllm_cache_config_info_labels_are_typed_arguments() -> None:
    text = (GOLDEN_VLLM / "metrics_0_idle.txt").read_text()
    args = info_metric_args(get("vllm"), text)
    # vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",
    #                        gpu_memory_utilization="0.5",...}
    assert args == {
        "block_size": 16,
        "gpu_memory_utilization": 0.5,
        "enable_prefix_caching": True,
        "kv_cache_dtype": "auto",
    }
    assert info_metric_args(get("sglang"), text) == {}  # SGLang has no such info metric
    flagged = resolve(get("vllm"), cmdline={"block_size": 32}, reported=args)
    assert (flagged.params["block_size"], flagged.param_sources["block_size"]) == (32, CMDLINE)
    assert flagged.params["prefix_caching"] is True
