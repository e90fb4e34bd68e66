"""The simulated engine's llama.cpp personality answers as the real llama-server does (its captures in
tests/fixtures/golden/llamacpp-b1-0c1e570): recognised as llama.cpp, /props and /slots read, the
same `llamacpp:*` families and types, and loadgen runs against it as `--target llamacpp`."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from infergauge import engines
from loadgen.targets.preset import metadata_from_bodies
from simengine.embedded import EmbeddedEngine
from tests.conftest import GOLDEN_LLAMACPP
from tests.loadgen_servers import loadgen_process
from tests.metrics_support import metric_types


def get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    with EmbeddedEngine(["--personality", "llamacpp", "--time-scale", "20", "--max-num-seqs", "3"]) as engine:
        yield str(engine.base_url).rstrip("/")


def test_it_is_recognised_as_llama_cpp_with_its_slots(sim: str) -> None:
    bodies = {"/props": get(f"{sim}/props"), "/v1/models": get(f"{sim}/v1/models")}
    assert engines.detect_http(bodies) is engines.get("llamacpp")
    meta = metadata_from_bodies("llamacpp", bodies)
    assert meta.version == "b8000-sim"
    assert meta.server_args["total_slots"] == 3
    slots = get(f"{sim}/slots")
    assert isinstance(slots, list)
    assert [s["id"] for s in slots] == [0, 1, 2]
    assert get(f"{sim}/health") == {"status": "ok"}


def test_its_metrics_are_the_real_servers_families_and_types(sim: str) -> None:
    with urllib.request.urlopen(f"{sim}/metrics", timeout=10) as resp:
        ours = metric_types(resp.read().decode())
    real = metric_types((GOLDEN_LLAMACPP / "metrics_1_after.txt").read_text(encoding="utf-8"))
    modelled = {name: kind for name, kind in real.items() if not name.startswith("llamacpp:spec_decode")}
    assert ours == modelled  # speculative decoding is not simulated


def test_loadgen_runs_it_as_target_llamacpp(sim: str, tmp_path: Path) -> None:
    argv = ["run", "--target", "llamacpp", "--base-url", sim, "--num-prompts", "10", "--rate", "50"]
    argv += ["--profile", "short", "--metrics-port", "0", "--results-dir", str(tmp_path), "--quiet"]
    argv += ["--linger", "0"]
    done = loadgen_process(*argv, timeout=120)
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["engine"]["engine"], manifest["engine"]["version"]) == ("llamacpp", "b8000-sim")
    assert manifest["engine"]["params"]["max_num_seqs"] == 3
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"]["ok"] == 10
    with urllib.request.urlopen(f"{sim}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    found = re.search(r"^llamacpp:tokens_predicted_total (\S+)$", text, re.M)
    assert found is not None
    assert float(found.group(1)) == summary["total_output_tokens"] == 640  # 10 requests of 64, no warm-up
