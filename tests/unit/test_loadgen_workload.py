"""Seeded workloads: determinism (across processes too), exact lengths, distributions, formats."""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.config import ConfigError, RunConfig
from loadgen.workload.generator import TOKEN_ID_HIGH, TOKEN_ID_LOW, build_workload, fingerprint

REPO = Path(__file__).resolve().parents[2]


def _fp(config: RunConfig, n: int = 50) -> str:
    wl = build_workload(config)
    return fingerprint(wl.request(i) for i in range(n))


def test_random_prompts_have_exact_token_lengths() -> None:
    wl = build_workload(RunConfig(input_len="uniform:5-40", output_len="fixed:7"))
    for i in range(100):
        spec = wl.request(i)
        assert isinstance(spec.prompt, list)
        assert len(spec.prompt) == spec.input_len
        assert 5 <= spec.input_len <= 40
        assert spec.output_len == 7
        assert all(TOKEN_ID_LOW <= t <= TOKEN_ID_HIGH for t in spec.prompt)


def test_same_seed_same_sequence_different_seed_differs() -> None:
    assert _fp(RunConfig(seed=1)) == _fp(RunConfig(seed=1, rate=3.0, target="vllm"))
    assert _fp(RunConfig(seed=1)) != _fp(RunConfig(seed=2))


@pytest.mark.parametrize("workload", ["random", "random-text", "shared-prefix"])
def test_fingerprint_is_identical_in_another_process(workload: str) -> None:
    code = (
        "from loadgen.config import RunConfig;"
        "from loadgen.workload.generator import build_workload, fingerprint;"
        f"wl = build_workload(RunConfig(workload={workload!r}, input_len='lognormal:50,0.8', seed=5));"
        "print(fingerprint(wl.request(i) for i in range(50)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == _fp(RunConfig(workload=workload, input_len="lognormal:50,0.8", seed=5))


def test_request_i_does_not_depend_on_how_many_are_drawn() -> None:
    wl = build_workload(RunConfig(seed=3))
    later = wl.request(17)
    fresh = build_workload(RunConfig(seed=3))
    assert fresh.request(17) == later


@pytest.mark.parametrize(
    ("spec", "check"),
    [
        (
            "uniform:100-200",
            lambda xs: min(xs) >= 100 and max(xs) <= 200 and abs(statistics.mean(xs) - 150) < 5,
        ),
        (
            "normal:300,30",
            lambda xs: abs(statistics.mean(xs) - 300) < 5 and abs(statistics.stdev(xs) - 30) < 4,
        ),
        ("lognormal:200,0.6", lambda xs: abs(statistics.median(xs) - 200) < 15 and max(xs) > 3 * 200),
    ],
)
def test_length_distributions_have_their_shape(spec: str, check: object) -> None:
    wl = build_workload(RunConfig(input_len=spec, output_len="fixed:1"))
    lengths = [wl.request(i).input_len for i in range(2000)]
    assert check(lengths)  # type: ignore[operator]


def test_shared_prefix_groups_share_their_prefix() -> None:
    wl = build_workload(
        RunConfig(workload="shared-prefix", shared_prefix_len=32, shared_prefix_groups=3, input_len="fixed:8")
    )
    specs = [wl.request(i) for i in range(9)]
    prefixes = [tuple(s.prompt[:32]) for s in specs]  # type: ignore[index]
    assert len(set(prefixes)) == 3
    assert prefixes[0] == prefixes[3] == prefixes[6]
    assert all(s.input_len == 40 and len(s.prompt) == 40 for s in specs)


def test_text_workloads_for_chat() -> None:
    wl = build_workload(
        RunConfig(endpoint="chat", workload="shared-prefix", input_len="fixed:20", shared_prefix_len=10)
    )
    spec = wl.request(0)
    assert isinstance(spec.prompt, str)
    assert len(spec.prompt.split()) == 20
    assert spec.system is not None
    assert len(spec.system.split()) == 10
    assert not spec.input_len_exact


def test_jsonl_prompt_token_ids_and_sharegpt(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    lines = [
        {"prompt": "hello there", "output_len": 5},
        {"prompt": [11, 12, 13], "max_tokens": 2},
        {"prompt": "no length given"},
        {
            "conversations": [
                {"from": "human", "value": "why sky blue"},
                {"from": "gpt", "value": "a b c d e f"},
            ]
        },
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    wl = build_workload(RunConfig(dataset=str(path), output_len="fixed:9"))
    a, ids, b, c, d = (wl.request(i) for i in range(5))
    assert (ids.prompt, ids.input_len, ids.output_len, ids.input_len_exact) == ([11, 12, 13], 3, 2, True)
    assert (a.prompt, a.output_len) == ("hello there", 5)
    assert b.output_len == 9
    assert (c.prompt, c.output_len) == ("why sky blue", 8)  # 6 reply words * 4/3
    assert d.prompt == a.prompt  # cycled in file order


def test_jsonl_messages_on_chat(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "one two three"}]}) + "\n")
    spec = build_workload(RunConfig(dataset=str(path), endpoint="chat", output_len="fixed:9")).request(0)
    assert spec.messages == [{"role": "user", "content": "one two three"}]
    assert (spec.input_len, spec.output_len) == (3, 9)


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\n{broken\n')
    with pytest.raises(ConfigError, match="bad.jsonl:2: invalid JSON"):
        build_workload(RunConfig(dataset=str(path)))
    with pytest.raises(ConfigError, match="cannot read dataset"):
        build_workload(RunConfig(dataset=str(tmp_path / "missing.jsonl")))


def test_item8_definition_fingerprint_is_the_generator_options_and_seed(tmp_path: Path) -> None:
    """Issue 11 item 8: the definition's fingerprint ignores how many requests were sent."""
    base = RunConfig(workload="random", seed=3, input_len="fixed:32")

    def definition(config: RunConfig) -> str:
        return str(build_workload(config).describe()["definition_fingerprint"])

    assert _fp(base, 10) != _fp(base, 20)  # the sequence sent differs with the count ...
    assert definition(base) == definition(RunConfig(workload="random", seed=3, input_len="fixed:32"))
    for other in ({"seed": 4}, {"input_len": "fixed:33"}, {"workload": "random-text"}):
        assert definition(base) != definition(dataclasses.replace(base, **other)), other
    data = tmp_path / "a.jsonl"
    data.write_text('{"prompt": "hi"}\n')
    copy = tmp_path / "b.jsonl"
    copy.write_text(data.read_text())  # the same content elsewhere: the same definition
    on = {"workload": "jsonl", "seed": 3}
    assert definition(RunConfig(dataset=str(data), **on)) == definition(RunConfig(dataset=str(copy), **on))
