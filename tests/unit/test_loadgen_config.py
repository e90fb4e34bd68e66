"""RunConfig resolution (YAML < env < flags), validation errors, length/SLO/rate parsing, redaction."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from loadgen.config import (
    ConfigError,
    RunConfig,
    env_overrides,
    load_yaml,
    parse_duration,
    parse_rate,
    parse_slo,
    resolve,
)
from loadgen.workload.distributions import SpecError, parse_length


@pytest.mark.parametrize(
    ("spec", "kind", "a", "b"),
    [
        ("fixed:12", "fixed", 12, 0),
        ("12", "fixed", 12, 0),
        ("uniform:3-9", "uniform", 3, 9),
        ("normal:100,10", "normal", 100, 10),
        ("lognormal:200,0.5", "lognormal", 200, 0.5),
    ],
)
def test_parse_length_forms(spec: str, kind: str, a: float, b: float) -> None:
    dist = parse_length(spec)
    assert (dist.kind, dist.a, dist.b) == (kind, a, b)


@pytest.mark.parametrize(
    "spec", ["zipf:3", "uniform:9-3", "normal:abc,1", "fixed:0", "fixed:1.5", "normal:5"]
)
def test_parse_length_rejects_bad_specs_naming_them(spec: str) -> None:
    with pytest.raises(SpecError, match="bad length"):
        parse_length(spec)


def test_unknown_length_kind_lists_choices() -> None:
    with pytest.raises(SpecError, match="fixed, uniform, normal, lognormal"):
        parse_length("zipf:3")


def test_parse_slo_units() -> None:
    assert parse_slo("ttft=200ms,tpot=50ms,e2e=2s") == {"ttft_s": 0.2, "tpot_s": 0.05, "e2e_s": 2.0}
    assert parse_slo({"ttft": "1.5"}) == {"ttft_s": 1.5}
    with pytest.raises(ConfigError, match="'latency'"):
        parse_slo("latency=1s")
    with pytest.raises(ConfigError, match="'fast'"):
        parse_slo("ttft=fast")


def test_parse_rate_and_duration() -> None:
    assert math.isinf(parse_rate("inf"))
    assert parse_rate("12.5") == 12.5
    for bad in ("0", "-1", "nan", "lots"):
        with pytest.raises(ConfigError, match="invalid rate"):
            parse_rate(bad)
    assert parse_duration("2m") == 120.0
    assert parse_duration("500us") == pytest.approx(0.0005)


def test_sources_resolve_yaml_then_env_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("rate: 5\nseed: 7\ninput-len: fixed:10\nslo: {ttft: 300ms}\nduration: 20s\n")
    env = env_overrides({"LOADGEN_SEED": "8", "LOADGEN_MAX_CONCURRENCY": "4", "OTHER": "x"})
    assert env_overrides({"LOADGEN_NATIVE": "0", "LOADGEN_SEED": "8"}) == {"seed": 8}  # a process switch
    config = resolve(load_yaml(path), env, {"seed": 9, "rate": None})
    assert config.rate == 5.0  # YAML, no flag given (None)
    assert config.seed == 9  # flag beats env beats YAML
    assert config.max_concurrency == 4  # env
    assert config.slo == {"ttft_s": 0.3}
    assert config.duration_s == 20.0
    assert config.lengths == ("fixed:10", "fixed:256")


def test_unknown_yaml_key_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("rtae: 5\n")
    with pytest.raises(ConfigError, match="unknown key 'rtae'"):
        load_yaml(path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": "tgi"}, "invalid target 'tgi'; choose from vllm, sglang, llamacpp, openai, sim"),
        ({"target": "openai"}, "needs --base-url"),
        ({"endpoint": "chat", "workload": "random"}, "use --workload random-text"),
        ({"workload": "jsonl"}, "needs --dataset"),
        ({"max_error_rate": 2.0}, "between 0 and 1"),
        ({"duration_s": 10.0}, "needs --max-concurrency"),
        ({"base_url": "localhost:8000"}, "must start with http"),
        ({"max_concurrency": 0}, "invalid max_concurrency 0"),
    ],
)
def test_validation_names_the_bad_value(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        RunConfig(**kwargs)  # type: ignore[arg-type]


def test_manifest_never_holds_secrets() -> None:
    config = RunConfig(api_key="sk-secret-123", grafana_token="glsa_456", rate=3.0)
    text = repr(config) + str(config.to_manifest())
    assert "sk-secret-123" not in text
    assert "glsa_456" not in text
    assert config.to_manifest()["api_key_set"] is True


def test_defaults_follow_the_seed() -> None:
    config = RunConfig()
    assert config.seed == 42
    assert config.total_requests == 1000
    assert config.resolved_workload == "random"
    assert RunConfig(endpoint="chat").resolved_workload == "random-text"
    assert RunConfig(profile="long").lengths == ("fixed:2048", "fixed:512")
    assert RunConfig(duration_s=5.0, rate=2.0).total_requests is None


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"duration_s": math.inf, "max_concurrency": 4}, "invalid duration_s inf: not a finite time"),
        ({"request_timeout_s": math.nan}, "invalid request_timeout_s nan: not a finite time"),
        ({"base_url": "http://127.0.0.1:99999"}, "port '99999' is not a number in 1-65535"),
        ({"base_url": "http://127.0.0.1:0"}, "port 0 is not a number in 1-65535"),
    ],
)
def test_item14_non_finite_times_and_bad_ports_are_named(source: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        RunConfig(**source)  # type: ignore[arg-type]


def test_item14_yaml_inf_duration_and_env_inf_have_their_own_message(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("duration: .inf\nmax_concurrency: 2\n")
    with pytest.raises(ConfigError, match="invalid duration_s inf: not a finite time"):
        resolve(load_yaml(path), {}, {})
    with pytest.raises(ConfigError, match="invalid duration_s 'inf': not a finite time"):
        env_overrides({"LOADGEN_DURATION": "inf"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seed: 1\nrtae: 5\n", ":2: unknown key 'rtae' in the config file; valid keys: "),
        ("seed: 1\n\nnum_prompts: many\n", ":3: invalid num_prompts 'many': expected a number"),
        ("rate: fast\n", ":1: invalid rate 'fast': expected a number of requests/s or 'inf'"),
    ],
)
def test_item14_bad_config_values_name_their_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_yaml(path)
    assert str(info.value).startswith(f"{path}{message}")
