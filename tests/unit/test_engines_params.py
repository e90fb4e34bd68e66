"""Engine-neutral vocabulary: launch lines from the engines' docs, the seed and the golden captures."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest

from infergauge.engines import UnknownEngine, get
from infergauge.engines.base import AUTO, NEUTRAL_PARAMS
from infergauge.engines.params import from_neutral, neutral_sources, parse_cmdline, to_cmdline, to_neutral
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM

# The seed's section 4.2 launch lines (aligned on purpose).
SEED_VLLM = (
    "python -m vllm.entrypoints.openai.api_server --model m --tensor-parallel-size 2 --max-num-seqs 128 "
    "--gpu-memory-utilization 0.90 --block-size 16 --enable-chunked-prefill --max-model-len 4096 --port 8000"
)
SEED_SGLANG = (
    "python -m sglang.launch_server --model-path m --tp-size 2 --max-running-requests 128 "
    "--mem-fraction-static 0.90 --chunked-prefill-size 4096 --port 8000"
)


def golden_argv(folder: Path) -> list[str]:
    return shlex.split((folder / "command.txt").read_text())


def test_golden_vllm_launch_line() -> None:
    engine, args = parse_cmdline(golden_argv(GOLDEN_VLLM))
    assert engine is not None
    assert engine.name == "vllm"
    assert args["model"] == "/tmp/tiny-llama"
    assert args["enforce_eager"] is True  # bare boolean flag does not swallow the next flag
    params = to_neutral(engine, args, gpu_memory_bytes=143771 * 2**20, gpu_name="NVIDIA H200")
    assert params["max_model_len"] == 2048
    assert params["gpu_memory_utilization"] == 0.5
    # Not on the command line: vLLM's documented defaults; >= 70 GiB non-A100 GPU -> 1024 / 8192
    assert params["max_num_seqs"] == 1024
    assert params["max_num_batched_tokens"] == 8192
    assert params["block_size"] == 16
    assert params["prefix_caching"] is True
    assert params["seed"] == 0


def test_golden_vllm_defaults_match_what_the_engine_reported() -> None:
    # vllm:cache_config_info in the golden metrics shows the resolved block size and prefix caching.
    metrics = (GOLDEN_VLLM / "metrics_0_idle.txt").read_text()
    params = to_neutral(*parse_cmdline(golden_argv(GOLDEN_VLLM)))
    assert f'block_size="{params["block_size"]}"' in metrics
    assert f'enable_prefix_caching="{params["prefix_caching"]}"' in metrics


def test_golden_sglang_launch_line_and_server_info_agree() -> None:
    engine, args = parse_cmdline(golden_argv(GOLDEN_SGLANG))
    assert engine is not None
    assert engine.name == "sglang"
    assert args["model"] == "/tmp/tiny-llama"
    params = to_neutral(engine, args)
    assert params["gpu_memory_utilization"] == 0.5  # --mem-fraction-static
    assert params["max_model_len"] == 2048  # --context-length
    assert params["max_num_seqs"] == AUTO  # SGLang sizes max_running_requests from memory
    info = (GOLDEN_SGLANG / "get_get_server_info.txt").read_text()
    assert '"page_size":1' in info
    assert params["block_size"] == 1
    assert '"disable_radix_cache":false' in info
    assert params["prefix_caching"] is True


def test_seed_lines_align_to_the_same_neutral_params() -> None:
    vllm = to_neutral(*parse_cmdline(SEED_VLLM.split()))
    sglang = to_neutral(*parse_cmdline(SEED_SGLANG.split()))
    for key in ("tensor_parallel_size", "max_num_seqs", "gpu_memory_utilization", "chunked_prefill"):
        assert vllm[key] == sglang[key], key
    assert sglang["max_num_batched_tokens"] == 4096  # SGLang's chunk size is the per-step token budget


@pytest.mark.parametrize(
    ("line", "engine"),
    [
        ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64", "vllm"),
        ("/usr/bin/python3 /usr/local/bin/vllm serve m --max_num_seqs=64", "vllm"),
        ("python3 -m sglang.launch_server --model-path m --max-running-requests 64", "sglang"),
        ("python -m simengine --port 0 --max-num-seqs 64", "simengine"),
        ("loadgen sim --max-running-requests 64", "simengine"),
        ("python3 -m vllm.entrypoints.cli.main serve m --max-num-seqs 64", "vllm"),
        ("python -m vllm.entrypoints.api_server --model m --max-num-seqs 64", "vllm"),
    ],
)
def test_launch_forms_and_spellings(line: str, engine: str) -> None:
    found, args = parse_cmdline(line.split())
    assert found is not None
    assert found.name == engine
    assert to_neutral(found, args)["max_num_seqs"] == 64


def test_not_engines() -> None:
    assert parse_cmdline(["ruff", "check", "simengine"]) == (None, {})
    assert parse_cmdline(["python", "-m", "pytest", "tests"]) == (None, {})
    assert parse_cmdline(["VLLM::EngineCore"]) == (None, {})


def test_negations_and_sglang_inversions() -> None:
    _, args = parse_cmdline(
        ["vllm", "serve", "m", "--no-enable-prefix-caching", "--no-enable-chunked-prefill"]
    )
    params = to_neutral(get("vllm"), args)
    assert params["prefix_caching"] is False
    assert params["chunked_prefill"] is False
    _, args = parse_cmdline(
        ["python", "-m", "sglang.launch_server", "--disable-radix-cache", "--chunked-prefill-size", "-1"]
    )
    params = to_neutral(get("sglang"), args)
    assert params["prefix_caching"] is False
    assert params["chunked_prefill"] is False
    assert params["max_num_batched_tokens"] is None


def test_sources_say_which_values_were_defaults() -> None:
    _, args = parse_cmdline(SEED_SGLANG.split())
    sources = neutral_sources(get("sglang"), args)
    assert sources["max_num_seqs"] == "flag"
    assert sources["chunked_prefill"] == "flag"
    assert sources["dtype"] == "default"
    assert set(sources) == set(NEUTRAL_PARAMS)


def test_from_neutral_round_trips_through_the_other_engine() -> None:
    params = to_neutral(*parse_cmdline(SEED_VLLM.split()))
    sglang_args = from_neutral(get("sglang"), params)
    assert sglang_args["max_running_requests"] == 128
    assert sglang_args["mem_fraction_static"] == 0.9
    assert sglang_args["tp_size"] == 2
    argv = ["python", "-m", "sglang.launch_server", *to_cmdline(get("sglang"), params)]
    again = to_neutral(*parse_cmdline(argv))
    for key in (
        "tensor_parallel_size",
        "max_num_seqs",
        "gpu_memory_utilization",
        "max_model_len",
        "prefix_caching",
    ):
        assert again[key] == params[key], key
    assert "--no-enable-prefix-caching" in to_cmdline(get("vllm"), {"prefix_caching": False})


def test_unknown_names_are_rejected_with_the_valid_choices() -> None:
    expected = "unknown engine 'tgi'; choose from vllm, sglang, llamacpp, simengine"
    with pytest.raises(UnknownEngine, match=expected):
        get("tgi")
    with pytest.raises(ValueError, match="unknown parameter 'max_seqs'"):
        from_neutral(get("vllm"), {"max_seqs": 1})


def test_engine_differences_are_data_not_branches() -> None:
    # SGLang's inverted --disable-radix-cache and its -1 "off" chunk size come from its spec alone.
    for module in ("params.py", "resolve.py"):
        tree = ast.parse((Path(__file__).parents[2] / "infergauge" / "engines" / module).read_text())
        compared = {
            node.value
            for compare in ast.walk(tree)
            if isinstance(compare, ast.Compare)
            for node in ast.walk(compare)
            if isinstance(node, ast.Constant)
        }
        assert not compared & {"vllm", "sglang", "simengine"}, module
    sglang = get("sglang")
    assert sglang.flags["prefix_caching"].inverted
    assert to_neutral(sglang, {"disable_radix_cache": True})["prefix_caching"] is False
    assert from_neutral(sglang, {"chunked_prefill": False}) == {"chunked_prefill_size": -1}


def test_multi_value_flag_keeps_all_its_values() -> None:
    _, args = parse_cmdline(["vllm", "serve", "m", "--api-key", "k1", "k2", "--max-num-seqs", "4"])
    assert args["api_key"] == "k1 k2"
    assert args["max_num_seqs"] == 4
