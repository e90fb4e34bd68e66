"""Cross-engine `loadgen diff` on two real runs against the simulated engine: the vLLM personality
(completions, an 8B model) and the SGLang personality (chat, a 14B model), both 64 running requests
in each engine's own spelling. The top rows are engine, model, endpoint, input tokens; no
max_num_seqs row, because both ran 64."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.diff import diff
from loadgen.config import RunConfig
from loadgen.run.runner import run_benchmark_sync
from simengine.embedded import EmbeddedEngine

RUNNING = "64"
ENGINES = (
    # target, the engine's own launch flags, endpoint
    ("vllm", ["--personality", "vllm", "--max-num-seqs", RUNNING, "--model", "sim-llama-8b"], "completions"),
    (
        "sglang",
        ["--personality", "sglang", "--max-running-requests", RUNNING, "--model", "sim-qwen-14b"],
        "chat",
    ),
)


def _run(results: Path, target: str, argv: list[str], endpoint: str) -> str:
    with EmbeddedEngine([*argv, "--time-scale", "4"]) as engine:
        config = RunConfig(
            target=target,
            base_url=engine.base_url,
            endpoint=endpoint,
            max_concurrency=8,
            num_prompts=16,
            profile="short",
            metrics_port=0,
            linger_s=0,
            results_dir=str(results),
        )
        return run_benchmark_sync(config, progress=False).run_id


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, str, str]:
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VLLM_SERVER_DEV_MODE", "1")  # so the simulated vLLM reports its params today
        a, b = (_run(results, *engine) for engine in ENGINES)
    return results, a, b


def _ranked(output: str) -> list[list[str]]:
    return [
        re.split(r"\s{2,}", line.strip()) for line in output.splitlines() if re.match(r"^\d+(\.\d+)?\s", line)
    ]


def test_cross_engine_top_rows_are_engine_model_endpoint_input_tokens(runs):
    results, a, b = runs
    result = CliRunner().invoke(diff, [a, b, "--results-dir", str(results)])
    assert result.exit_code == 0, result.output
    rows = _ranked(result.stdout)
    assert [r[2] for r in rows[:4]] == [
        "engine.engine",
        "engine.model",
        "config.endpoint",
        "summary.input_tokens_per_request",
    ]
    assert rows[0][3].startswith("vllm ")
    assert rows[0][4].startswith("sglang ")
    assert rows[1][3:5] == ["sim-llama-8b", "sim-qwen-14b"]
    assert rows[2][3:5] == ["completions", "chat"]
    assert float(rows[3][4]) > float(rows[3][3])  # chat wraps the prompt: more input tokens
    assert len(rows) <= 15, result.stdout


def test_cross_engine_has_no_max_num_seqs_row_even_with_all(runs):
    results, a, b = runs
    listed = CliRunner().invoke(diff, [a, b, "--results-dir", str(results), "--all"]).stdout
    assert "engine.server_args.schedule_policy" in listed  # --all lists the raw keys ...
    assert not re.findall(r"\.(max_num_seqs|max_running_requests)\s", listed)  # ... but not these
    # the raw SGLang server args are there, as context below every fact
    groups = [r[1] for r in _ranked(listed) if "." not in r[0]]
    assert "context" in groups
    assert groups.index("context") > groups.index("tokens")


def test_cross_engine_json_rows_match_the_table(runs):
    results, a, b = runs
    text = CliRunner().invoke(diff, [a, b, "--results-dir", str(results)]).stdout
    result = CliRunner().invoke(diff, [a, b, "--results-dir", str(results), "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    rows = body["differences"]
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert {"rank", "key", "a", "b", "group"} <= set(rows[0])
    assert [r["key"] for r in rows[:4]] == [r[2] for r in _ranked(text)[:4]]
    context = [r for r in rows if r["group"] == "context"]
    assert all(len(r["details"]) >= 1 for r in context)
    keys = [r["key"] for r in rows] + [d["key"] for r in context for d in r["details"]]
    assert not [k for k in keys if k.rsplit(".", 1)[-1] in ("max_num_seqs", "max_running_requests")]
    assert any("different workloads" in w for w in body["warnings"])  # token ids vs text prompts
