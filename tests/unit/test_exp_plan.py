"""Plan validation: every problem names its line; good plans expand into the expected runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.experiments.expand import build_config, expand
from loadgen.experiments.plan import load_plan, parse_plan
from loadgen.experiments.yamlnodes import PlanError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

GOOD = """\
name: t
engines:
  sim:
    kind: launch
    command: python -m simengine --personality vllm --port {port}
    params: {max_num_seqs: 8}
  ext:
    kind: external
    target: sglang
    base_url: http://127.0.0.1:30000
defaults:
  num_prompts: 10
phases:
  - name: baseline
    kind: baseline
    workloads: [short, long]
    concurrency: [1, 4]
    repetitions: 2
  - name: sens
    kind: sensitivity
    engines: [sim]
    vary: {max_num_seqs: [4, 8, 16]}
    rate: [2, inf]
"""


def test_good_plan_expands_to_the_matrix():
    plan = parse_plan(GOOD)
    runs = expand(plan)
    baseline = [r for r in runs if r.phase == "baseline"]
    assert len(baseline) == 2 * 2 * 2 * 2  # engines x workloads x loads x repetitions
    sens = [r for r in runs if r.phase == "sens"]
    # variants: base (8), 4, 16 (8 is the base already) x 2 rates
    assert sorted({r.variant for r in sens}) == ["base", "max_num_seqs=16", "max_num_seqs=4"]
    assert len(sens) == 6
    assert plan.engines["sim"].target == "vllm"
    assert plan.engines["sim"].family == "simengine"
    assert len({r.key for r in runs}) == len(runs)
    config = build_config(
        sens[0],
        target="vllm",
        base_url="http://127.0.0.1:9",
        results_dir="r",
        experiment_id="e",
        extra_manifest={"x": 1},
    )
    assert config.num_prompts == 10
    assert config.linger_s == 0
    assert config.experiment_id == "e"


@pytest.mark.parametrize(
    ("patch", "line", "message"),
    [
        (("  - name: sens\n", "  - name: sens\n    colour: red\n"), 20, "unknown key 'colour'"),
        (("    repetitions: 2\n", "    repetitions: two\n"), 18, "repetitions must be a positive integer"),
        (("    concurrency: [1, 4]\n", "    concurrency: [1, -4]\n"), 17, "got -4"),
        (("    kind: baseline\n", "    kind: warmup\n"), 15, "invalid phase 'baseline' kind 'warmup'"),
        (("    workloads: [short, long]\n", "    workloads: [short, huge]\n"), 16, "unknown workload 'huge'"),
        (("  num_prompts: 10\n", "  num_prompts: 10\n  rate: 5\n"), 13, "may not set 'rate'"),
        (("  num_prompts: 10\n", "  num_promptz: 10\n"), 12, "unknown key 'num_promptz'"),
        (("    params: {max_num_seqs: 8}\n", "    params: {max_seqs: 8}\n"), 6, "unknown key 'max_seqs'"),
        (("    kind: external\n", "    kind: remote\n"), 8, "kind 'remote'"),
        (("    engines: [sim]\n", "    engines: [ext]\n"), 22, "vary needs launched engines"),
        (
            ("    params: {max_num_seqs: 8}\n", "    params: {max_num_seqs: many}\n"),
            6,
            "invalid max_num_seqs 'many': must be an integer",
        ),
        (("[4, 8, 16]", "[4, 8.5]"), 22, "invalid max_num_seqs 8.5"),
    ],
)
def test_bad_plans_name_the_line(patch, line, message):
    text = GOOD.replace(*patch)
    assert text != GOOD
    with pytest.raises(PlanError) as info:
        parse_plan(text, "p.yaml")
    assert any(p.startswith(f"p.yaml:{line}:") and message in p for p in info.value.problems), info.value


def test_all_problems_reported_at_once_and_yaml_errors_have_lines():
    text = GOOD.replace("    repetitions: 2\n", "    repetitions: 0\n")
    text = text.replace("name: t\n", "name: t\nfoo: 1\n")
    with pytest.raises(PlanError) as info:
        parse_plan(text, "p.yaml")
    assert len(info.value.problems) == 2
    with pytest.raises(PlanError, match=r"p.yaml:2: invalid YAML"):
        parse_plan("name: t\n  engines: [\n", "p.yaml")


def test_missing_sections_and_run_config_errors():
    with pytest.raises(PlanError, match="needs 'engines'"):
        parse_plan("name: t\nphases: []\n", "p.yaml")
    bad_len = GOOD.replace("  num_prompts: 10\n", "  num_prompts: 10\n  input_len: 'zipf:3'\n")
    with pytest.raises(PlanError, match="zipf"):
        parse_plan(bad_len, "p.yaml")


# baseline-*.yaml are baseline suites, not plans: tests/unit/test_baseline_suite.py validates them
@pytest.mark.parametrize(
    "name", sorted(p.name for p in EXAMPLES.glob("*.yaml") if not p.name.startswith("baseline-"))
)
def test_shipped_examples_validate(name):
    plan = load_plan(EXAMPLES / name)
    assert expand(plan)


@pytest.mark.parametrize(
    ("patch", "line", "message"),
    [
        ("{max_num_seqs: -8}", 6, "invalid max_num_seqs -8: must be >= 1"),
        ("{tensor_parallel_size: 0}", 6, "invalid tensor_parallel_size 0: must be >= 1"),
        ("{gpu_memory_utilization: 1.5}", 6, "invalid gpu_memory_utilization 1.5: must be in (0, 1]"),
        ("{gpu_memory_utilization: 0}", 6, "invalid gpu_memory_utilization 0: must be in (0, 1]"),
        ("{gpu_memory_utilization: .nan}", 6, "invalid gpu_memory_utilization nan: must be in (0, 1]"),
        ("{max_model_len: 0}", 6, "invalid max_model_len 0: must be >= 1"),
        ("{block_size: -16}", 6, "invalid block_size -16: must be >= 1"),
        ("{max_num_batched_tokens: -1}", 6, "invalid max_num_batched_tokens -1: must be >= 1"),
        ("{seed: -1}", 6, "invalid seed -1: must be >= 0"),
    ],
)
def test_item15_out_of_range_params_name_the_line(patch, line, message):
    text = GOOD.replace("{max_num_seqs: 8}", patch)
    with pytest.raises(PlanError) as info:
        parse_plan(text, "p.yaml")
    assert f"p.yaml:{line}: {message}" in info.value.problems, info.value


def test_item15_out_of_range_vary_value_names_its_line():
    with pytest.raises(PlanError) as info:
        parse_plan(GOOD.replace("[4, 8, 16]", "[4, -8, 16]"), "p.yaml")
    assert info.value.problems == ["p.yaml:22: invalid max_num_seqs -8: must be >= 1"]


def test_item15_edges_of_the_ranges_are_accepted():
    edges = "{gpu_memory_utilization: 1.0, tensor_parallel_size: 1, seed: 0, max_model_len: 1}"
    plan = parse_plan(GOOD.replace("{max_num_seqs: 8}", edges), "p.yaml")
    assert plan.engines["sim"].params["gpu_memory_utilization"] == 1.0


def test_item15_experiment_run_rejects_the_plan_before_anything_runs(tmp_path):
    from click.testing import CliRunner

    from loadgen.cli.main import cli

    plan_file = tmp_path / "bad.yaml"
    plan_file.write_text(GOOD.replace("{max_num_seqs: 8}", "{max_num_seqs: -8}"))
    results = tmp_path / "results"
    result = CliRunner().invoke(cli, ["experiment", "run", str(plan_file), "--results-dir", str(results)])
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {plan_file}:6: invalid max_num_seqs -8: must be >= 1"
    assert not results.exists()
