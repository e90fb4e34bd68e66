"""The CLI's pure helpers: --sim-X passthrough and flag conversion."""

from __future__ import annotations

import click
import pytest

from loadgen.cli.run import build_config, sim_passthrough


def test_sim_flags_pass_through_without_the_prefix() -> None:
    extra = ["--sim-max-num-seqs", "64", "--sim-enable-prefix-caching", "--sim-time-scale=10"]
    assert sim_passthrough(extra) == ("--max-num-seqs", "64", "--enable-prefix-caching", "--time-scale=10")


def test_other_unknown_options_are_usage_errors() -> None:
    with pytest.raises(click.UsageError, match="no such option '--frobnicate'"):
        sim_passthrough(["--frobnicate", "1"])


def test_flags_win_over_env_and_api_key_comes_from_openai_env() -> None:
    params = {
        "config": None,
        "rate": "12",
        "duration": "1m",
        "slo": "ttft=1s",
        "seed": None,
        "json_output": False,
        "quiet": True,
        "request_timeout": "30s",
    }
    env = {
        "LOADGEN_SEED": "7",
        "LOADGEN_RATE": "3",
        "OPENAI_API_KEY": "sk-test",
        "GRAFANA_URL": "http://g:3000",
    }
    config = build_config(params, ["--sim-max-num-seqs", "8"], env)
    assert (config.rate, config.seed, config.duration_s, config.request_timeout_s) == (12.0, 7, 60.0, 30.0)
    assert config.slo == {"ttft_s": 1.0}
    assert config.api_key == "sk-test"
    assert config.grafana_url == "http://g:3000"
    assert config.sim_args == ("--max-num-seqs", "8")
