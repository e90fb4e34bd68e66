"""Launch-line parsing: vLLM and SGLang spellings, unknown flags kept, bad values rejected in one line."""

from __future__ import annotations

import shlex

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli as loadgen_cli
from simengine.cli import main as sim_main
from simengine.config import FLAG_PARSER, POSITIVE, RANGES, ConfigError, parse_args
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM


def _golden_args(path: object) -> list[str]:
    argv = shlex.split((path / "command.txt").read_text())  # type: ignore[operator]
    return argv[argv.index("-m") + 2 :]  # drop "python3 -m module"


def test_seed_vllm_launch_line_maps_to_neutral_fields() -> None:
    cfg = parse_args(
        shlex.split(
            "--tensor-parallel-size 2 --max-num-seqs 128 --gpu-memory-utilization 0.90 --block-size 16 "
            "--enable-chunked-prefill --max-model-len 4096 --port 8000"
        )
    )
    assert (cfg.tensor_parallel_size, cfg.max_num_seqs, cfg.gpu_memory_utilization) == (2, 128, 0.9)
    assert (cfg.block_size, cfg.enable_chunked_prefill, cfg.max_model_len, cfg.port) == (16, True, 4096, 8000)
    assert cfg.extra_args == {}


def test_seed_sglang_launch_line_maps_to_neutral_fields() -> None:
    cfg = parse_args(
        shlex.split(
            "--personality sglang --tp-size 2 --max-running-requests 128 --mem-fraction-static 0.90 "
            "--chunked-prefill-size 4096 --port 8000"
        )
    )
    assert (cfg.tensor_parallel_size, cfg.max_num_seqs, cfg.gpu_memory_utilization) == (2, 128, 0.9)
    assert (cfg.max_num_batched_tokens, cfg.port, cfg.block_size) == (4096, 8000, 1)  # SGLang page size 1


def test_golden_vllm_command_runs_unchanged_and_records_unknown_flags() -> None:
    cfg = parse_args(_golden_args(GOLDEN_VLLM))
    assert cfg.model == "/tmp/tiny-llama"
    assert cfg.served_model_name == "tiny-llama"
    assert (cfg.max_model_len, cfg.gpu_memory_utilization, cfg.port) == (2048, 0.5, 8000)
    assert cfg.extra_args == {"enforce-eager": True}


def test_golden_sglang_command_runs_unchanged_and_records_unknown_flags() -> None:
    cfg = parse_args(["--personality", "sglang", *_golden_args(GOLDEN_SGLANG)])
    assert cfg.model == "/tmp/tiny-llama"
    assert cfg.served_model_name == "tiny-llama"
    assert (cfg.max_model_len, cfg.gpu_memory_utilization, cfg.port) == (2048, 0.5, 30000)
    assert cfg.extra_args == {
        "disable-cuda-graph": True,
        "enable-metrics": True,
        "attention-backend": "triton",
        "sampling-backend": "pytorch",
    }


def test_vllm_serve_positional_model_and_default_ports() -> None:
    cfg = parse_args(["serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "64"])
    assert cfg.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert cfg.port == 8000
    assert parse_args(["--personality", "sglang"]).port == 30000


def test_prefix_caching_switches_both_spellings() -> None:
    assert parse_args([]).enable_prefix_caching is True
    assert parse_args(["--no-enable-prefix-caching"]).enable_prefix_caching is False
    assert parse_args(["--personality", "sglang", "--disable-radix-cache"]).enable_prefix_caching is False


def test_kv_cache_tokens_default_comes_from_gpu_memory() -> None:
    # H200 141 GiB * 0.9 - 16 GB weights - 4 GiB reserve, 128 KiB per token (Llama-8B, bf16)
    cfg = parse_args([])
    assert 800_000 < cfg.kv_cache_tokens < 900_000
    assert parse_args(["--gpu-memory-utilization", "0.5"]).kv_cache_tokens < cfg.kv_cache_tokens
    assert parse_args(["--kv-cache-tokens", "4096", "--max-model-len", "4096"]).kv_cache_tokens == 4096


def test_a_model_that_does_not_fit_fails_at_start_like_an_oom() -> None:
    with pytest.raises(ConfigError) as err:
        parse_args(["--gpu", "l40s", "--model-params", "70e9"])  # 140 GB of weights on a 48 GiB card
    assert "does not fit the KV cache (0 tokens" in str(err.value)
    assert (
        parse_args(
            ["--gpu", "l40s", "--model-params", "70e9", "--tp", "4", "--interconnect", "pcie"]
        ).kv_cache_tokens
        > 8192
    )
    assert parse_args(["--dtype", "half"]).dtype == "half"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--gpu", "v100"], "'v100'; choose from a100, h100, h200, l40s"),
        (["--personality", "trt"], "'trt'; choose from vllm, sglang"),
        (["--interconnect", "ib"], "'ib'; choose from nvlink, pcie"),
        (["--max-num-seqs", "0"], "--max-num-seqs 0"),
        (["--fault-error-rate", "1.5"], "--fault-error-rate 1.5"),
        (["--max-num-seqs", "many"], "'many'"),
        (["--time-scale", "0"], "--time-scale 0"),
    ],
)
def test_bad_values_raise_one_line_naming_the_value(argv: list[str], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_args(argv)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_exit_code_2_and_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(["--gpu", "v100"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "v100" in err


def test_api_key_is_redacted_in_effective_args() -> None:
    cfg = parse_args(["--api-key", "sk-secret-123"])
    assert cfg.api_key == ("sk-secret-123",)
    assert "sk-secret-123" not in repr(cfg)
    assert "sk-secret-123" not in str(cfg.effective_args())


def test_several_api_keys_as_vllm_takes_them_none_echoed(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = parse_args(["--api-key", "sk-one", "sk-two", "--max-num-seqs", "4"])
    assert (cfg.api_key, cfg.max_num_seqs) == (("sk-one", "sk-two"), 4)
    assert "sk-" not in str(cfg.effective_args()) + repr(cfg)
    assert sim_main(["--api-key", "sk-one", "sk-two", "--gpu", "v100"]) == 2  # an error elsewhere
    assert "sk-" not in capsys.readouterr().err  # was: "unexpected argument 'sk-two'"


def test_help_lists_both_spellings_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--max-num-seqs MAX_NUM_SEQS, --max-running-requests" in out
    assert "--tensor-parallel-size" in out
    assert "--tp-size" in out


def test_sglang_chunked_prefill_size_minus_one_disables_chunking() -> None:
    cfg = parse_args(["--personality", "sglang", "--chunked-prefill-size", "-1", "--context-length", "32768"])
    assert cfg.enable_chunked_prefill is False
    assert cfg.max_num_batched_tokens == 32768


def test_boolean_flags_take_an_optional_value_like_older_vllm() -> None:
    assert parse_args(["--enable-chunked-prefill=False"]).enable_chunked_prefill is False
    assert (
        parse_args(["--enable-prefix-caching", "true", "--max-num-seqs", "8"]).enable_prefix_caching is True
    )
    with pytest.raises(ConfigError, match="'maybe'"):
        parse_args(["--enable-chunked-prefill=maybe"])


@pytest.mark.parametrize(
    ("argv", "env", "dev_mode"),
    [
        ([], {}, False),  # real vLLM's default: no dev-only endpoints
        ([], {"VLLM_SERVER_DEV_MODE": "1"}, True),
        ([], {"VLLM_SERVER_DEV_MODE": "0"}, False),
        (["--dev-mode"], {}, True),
        (["--no-dev-mode"], {"VLLM_SERVER_DEV_MODE": "1"}, False),  # the flag wins over the environment
    ],
)
def test_dev_mode_comes_from_the_environment_or_the_flag(
    argv: list[str], env: dict[str, str], dev_mode: bool
) -> None:
    assert parse_args(argv, env).dev_mode is dev_mode


def test_bad_dev_mode_environment_value_is_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "yes")  # real vLLM fails on it too (bool(int(...)))
    assert sim_main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "simengine: error: invalid VLLM_SERVER_DEV_MODE 'yes'; must be an integer (1 = dev mode)"


RATES = ["--fault-error-rate", "--fault-stall-rate", "--fault-disconnect-rate", "--fault-malformed-rate"]
DURATIONS = ["--fault-stall-ms", "--step-overhead-ms"]
BAD_VALUES = (
    [(flag, value) for flag in RATES for value in ("nan", "-0.1", "1.5", "inf")]
    + [(flag, value) for flag in DURATIONS for value in ("-1", "nan", "inf")]
    + [(flag, value) for flag in POSITIVE for value in ("0", "-1", "nan", "inf")]
)


@pytest.mark.parametrize(("flag", "value"), BAD_VALUES)
def test_bad_rates_durations_and_factors_exit_2_naming_flag_and_value(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sim_main([flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"simengine: error: invalid {flag} {float(value)!r}; must be a finite number ")
    assert "\n" not in err


def test_every_float_flag_has_a_range() -> None:
    floats = {a.dest for a in FLAG_PARSER._actions if a.type is float}
    assert floats  # the parser really was read
    assert floats <= {name for name, _, _ in RANGES.values()} | set(POSITIVE.values())


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--fault-malformed-rate", "nan"), ("--fault-stall-ms", "-5"), ("--speed-factor", "0")],
)
def test_loadgen_run_rejects_a_bad_sim_flag_before_anything_runs(flag: str, value: str, tmp_path) -> None:
    results = tmp_path / "results"
    result = CliRunner().invoke(
        loadgen_cli, ["run", "--target", "sim", f"--sim-{flag[2:]}", value, "--results-dir", str(results)]
    )
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: invalid --sim-{flag[2:]} {float(value)!r}; must be a finite number "
        + (
            "> 0.0"
            if flag == "--speed-factor"
            else ">= 0.0"
            if flag.endswith("-ms")
            else "between 0.0 and 1.0"
        )
    )
    assert not results.exists()  # nothing half-written
