"""llama.cpp's engine file against the real `llama-server`'s answers (tests/fixtures/golden/
llamacpp-b1-0c1e570, captured here from a server built from source; README there), and every
engine file's metric kinds against its engine's real `/metrics` exposition."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.discovery import find_engines, parse_ps
from exporter.engine_http import facts_from_bodies
from infergauge import engines
from loadgen.results.manifest import engine_section
from loadgen.targets.preset import metadata_from_bodies
from tests.conftest import GOLDEN_LLAMACPP, GOLDEN_SGLANG, GOLDEN_VLLM
from tests.metrics_support import metric_types


def body(name: str) -> object:
    text = (GOLDEN_LLAMACPP / name).read_text(encoding="utf-8", errors="replace")
    return json.loads(text[text.index("\n\n") + 2 :])  # read_text turned \r\n into \n


def bodies() -> dict[str, object]:
    return {"/props": body("get_props.txt"), "/v1/models": body("get_v1_models.txt")}


def test_discovery_finds_llama_server_and_its_flags() -> None:
    (found,) = find_engines(parse_ps((GOLDEN_LLAMACPP / "ps.txt").read_text()))
    assert (found.engine, found.port) == ("llamacpp", 18089)
    assert found.args["parallel"] == 2  # -np 2
    assert found.base_url == "http://127.0.0.1:18089"


def test_its_endpoints_are_recognised_and_read() -> None:
    assert engines.detect_http(bodies()) is engines.get("llamacpp")
    facts = facts_from_bodies("http://127.0.0.1:18089", bodies())
    assert (facts.engine, facts.version, facts.model) == ("llamacpp", "b1-0c1e570", "/models/tiny.gguf")
    meta = metadata_from_bodies("llamacpp", bodies())
    section = engine_section(meta, "http://127.0.0.1:18089")
    # /props' total_slots is the --parallel it runs with: 2, said by the engine itself
    assert section["params"]["max_num_seqs"] == 2
    assert "props" in section["param_sources"]["max_num_seqs"]


def test_streams_end_with_usage_and_cached_tokens() -> None:
    text = (GOLDEN_LLAMACPP / "sse_completions_cached.txt").read_text(encoding="utf-8", errors="replace")
    chunks = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 8  # the repeated prompt
    assert chunks[-1]["choices"][0]["text"] == ""  # the usage rides on the finish chunk, no token


def exposition(path: Path) -> dict[str, str]:
    """{metric family: its TYPE} of a captured /metrics text."""
    return metric_types(path.read_text(encoding="utf-8", errors="replace"))


CAPTURES = {
    "vllm": GOLDEN_VLLM / "metrics_1_load.txt",
    "sglang": GOLDEN_SGLANG / "metrics_1_load.txt",
    "llamacpp": GOLDEN_LLAMACPP / "metrics_1_after.txt",
}


@pytest.mark.parametrize("engine", sorted(CAPTURES))
def test_every_metric_role_is_in_the_real_exposition_with_its_kind(engine: str) -> None:
    types = exposition(CAPTURES[engine])
    wrong = {}
    for role, metric in engines.get(engine).metrics.items():
        family = metric.name.removesuffix("_total") if metric.kind == "counter" else metric.name
        declared = types.get(family) or types.get(metric.name)
        expected = "gauge" if metric.kind == "info" else metric.kind
        if declared != expected:
            wrong[role] = (metric.name, metric.kind, declared)
    assert wrong == {}
    assert set(CAPTURES) == {n for n, s in engines.ENGINES.items() if not s.plays}  # every engine has one
