"""Issue 10, done-when 4: an engine described in ~40 lines of data, registered at run time, is
recognised by exporter discovery (command line), by align's HTTP detection and by diff's neutral
parameters, with no other edit."""

from __future__ import annotations

import pytest

from exporter.discovery import ProcInfo, find_engines, title_engine
from exporter.engine_http import facts_from_bodies
from exporter.engines import EngineInspector
from infergauge import engines
from infergauge.engines.base import EngineSpec, Marker, ServerInfo, flag
from infergauge.engines.metrics import gauge, histogram
from loadgen.analysis.diff import manifest_differences
from loadgen.results.manifest import engine_section
from loadgen.targets.preset import metadata_from_bodies

# ---- the whole engine description (a made-up server "toyserve") ----
TOY = EngineSpec(
    name="toyserve",
    package="toyserve",
    default_port=7100,
    launch_prefixes=(("toyserve", "run"),),
    launch_modules=("toyserve.server",),
    child_titles=("toyserve::worker",),
    env_prefixes=("TOY_",),
    flags={
        "max_num_seqs": flag("max_batch", int, "-b"),
        "tensor_parallel_size": flag("shards", int),
        "prefix_caching": flag("no_prefix_reuse", bool, inverted=True),
        "max_model_len": flag("context", int),
    },
    defaults={"max_num_seqs": 32, "tensor_parallel_size": 1, "prefix_caching": True, "max_model_len": "auto"},
    bool_flags=frozenset({"--quiet"}),
    model_flags=("model",),
    markers=(Marker("/toy/info", "toy_version"), Marker("/v1/models", "data.0.owned_by", "toyserve")),
    metadata_paths=("/toy/info", "/v1/models"),
    server_info=ServerInfo(paths=("/toy/info",), version_key="toy_version"),
    flush_path="/toy/flush",
    metrics={"running": gauge("toy_running_requests", "requests"), "ttft": histogram("toy_ttft_seconds")},
)
# ---- end of the description ----


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(engines.ENGINES, TOY.name, TOY)


def bodies(max_batch: int) -> dict[str, object]:
    return {
        "/toy/info": {"toy_version": "1.2", "max_batch": max_batch, "context": 4096},
        "/v1/models": {"data": [{"id": "toy-model", "owned_by": "toyserve"}]},
    }


def test_discovery_finds_it_from_the_command_line() -> None:
    procs = [
        ProcInfo(10, 1, ("/usr/bin/toyserve", "run", "--model", "m", "--max-batch", "12", "--port", "7200")),
        ProcInfo(11, 10, ("toyserve::worker",)),
        ProcInfo(20, 1, ("python3", "-m", "toyserve.server", "-b", "4", "--quiet")),
    ]
    found = find_engines(procs)
    assert [(e.engine, e.pid, e.port) for e in found] == [("toyserve", 10, 7200), ("toyserve", 20, 7100)]
    assert found[0].args["max_batch"] == 12
    assert found[0].children == [11]
    assert title_engine(("toyserve::worker",)) == "toyserve"


def test_align_detection_recognises_its_metadata() -> None:
    assert engines.detect_http(bodies(8)) is TOY
    facts = facts_from_bodies("http://127.0.0.1:7100", bodies(8))
    assert (facts.engine, facts.version, facts.model) == ("toyserve", "1.2", "toy-model")


def _manifest(max_batch: int) -> dict[str, object]:
    """A run manifest's engine section: exporter read the command line, HTTP gave the rest."""
    argv = ("toyserve", "run", "--model", "m", "--max-batch", str(max_batch), "--port", "7100")
    inspector = EngineInspector(
        read_procs=lambda: [ProcInfo(10, 1, argv)],
        ports_of=lambda pid: [],
        read_env=lambda pid: {},
        ask_interpreter=lambda pid, engine: None,
        poll=lambda url, timeout, key: facts_from_bodies(url, bodies(99)),
    )
    exporter = {"engines": [r.as_dict() for r in inspector.reports()]}
    meta = metadata_from_bodies("toyserve", bodies(99))
    return {"engine": engine_section(meta, "http://127.0.0.1:7100", exporter)}


def test_diff_compares_its_neutral_parameters() -> None:
    a, b = _manifest(64), _manifest(8)
    engine = a["engine"]
    assert isinstance(engine, dict)
    assert engine["params"]["max_num_seqs"] == 64  # the command line outranks the HTTP answer
    assert engine["param_sources"]["max_num_seqs"] == "exporter /proc cmdline"
    assert engine["params"]["max_model_len"] == 4096  # from its server info
    top = manifest_differences(a, b)[0]
    assert (top.key, top.a, top.b) == ("engine.params.max_num_seqs", 64, 8)


def test_it_is_a_target_preset_with_no_other_edit() -> None:
    from click.testing import CliRunner

    from loadgen.cli.run import run
    from loadgen.config import RunConfig, target_names
    from loadgen.targets import get_target

    assert "toyserve" in target_names()
    assert RunConfig(target="toyserve").target == "toyserve"  # the config accepts it ...
    preset = get_target("toyserve")  # ... and the preset exists: port and hint from the spec
    assert preset.default_base_url == "http://127.0.0.1:7100"
    assert preset.engine == "toyserve"
    help_text = CliRunner().invoke(run, ["--help"]).output
    assert "toyserve" in help_text  # `--target` lists it


def test_its_metrics_reach_the_rules_the_alerts_the_scrape_jobs_and_a_dashboard() -> None:
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    if str(repo) not in sys.path:  # grafana/dashgen lives beside the packages, not inside one
        sys.path.insert(0, str(repo))
    from grafana.dashgen import engines as boards
    from grafana.dashgen import promgen
    from grafana.dashgen.queries import iter_queries

    rules = promgen.render_rules()
    # the neutral rules: its running gauge and its TTFT histogram, labelled with its name
    assert "sum by (job, instance, model_name) (toy_running_requests)" in rules
    assert "rate(toy_ttft_seconds_bucket[1m])" in rules
    assert "engine: toyserve" in rules
    alerts = {r["alert"]: r["expr"] for r in promgen.alert_rules()}
    assert "toyserve" in alerts["EngineDown"]  # its scrape job is watched
    assert "toyserve" in alerts["ForeignProcessOnBenchmarkGpu"]  # its process is no foreigner
    assert "- job_name: toyserve" in promgen.render_jobs(local=True)
    assert "127.0.0.1:7100" in promgen.render_jobs(local=True)
    assert "engine-toyserve.json" in boards.builders()
    board = boards.builders()["engine-toyserve.json"]()
    exprs = " ".join(q.expr for q in iter_queries(board))
    assert "toy_running_requests" in exprs
    assert "toy_ttft_seconds_bucket" in exprs
    assert board["title"] == "Engine: toyserve"
