"""Issue #24 item 3: the run manifest has one schema (loadgen.results.manifest_schema) with a
version, one reader that upgrades old records (the real ones captured on 2026-12-01 have no
version: v1) and a one-line error naming the file for anything else; the diff matches the
exporter's engines by identity, never by list position."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from loadgen.analysis.diff import manifest_differences
from loadgen.results.manifest_schema import MANIFEST_VERSION, ManifestError, read_manifest, upgrade
from loadgen.results.rundir import load_run

FIXTURES = Path(__file__).parents[1] / "fixtures"
OLD_RECORDS = sorted(
    [
        *(FIXTURES / "golden" / "real-runs-2026-12-01" / "runs").glob("*/manifest.json"),
        *(FIXTURES / "real-runs").glob("*/manifest.json"),
    ]
)


def test_the_real_old_records_are_there_and_have_no_version() -> None:
    assert len(OLD_RECORDS) >= 8
    for path in OLD_RECORDS:
        assert "manifest_version" not in json.loads(path.read_text())


@pytest.mark.parametrize("path", OLD_RECORDS, ids=lambda p: f"{p.parent.parent.parent.name}/{p.parent.name}")
def test_a_real_v1_record_is_upgraded_on_read(path: Path) -> None:
    raw = json.loads(path.read_text())
    m = read_manifest(path)
    assert m.version == MANIFEST_VERSION == 2
    assert m.raw["manifest_version"] == 2
    assert m.status == "complete"  # v1 wrote a record only when its run had ended
    assert m.engine.param_sources == {}  # v1 resolved no sources
    assert m.run_id == raw["run_id"]
    assert (m.engine.engine, m.engine.version, m.engine.model) == (
        raw["engine"]["engine"],
        raw["engine"]["version"],
        raw["engine"]["model"],
    )
    assert m.workload.fingerprint == raw["workload"]["fingerprint"]
    assert m.tool.git_sha == raw["tool"]["git_sha"]
    assert m.client.cpu_count == raw["client"]["cpu_count"]
    assert m.exporter.present
    assert [g["uuid"] for g in m.exporter.gpus] == [g["uuid"] for g in raw["exporter"]["gpus"]]
    served = m.served_by()
    assert served is not None  # the exporter's engine on the run's port
    assert served.port == m.engine.port
    assert served.identity == f"{raw['engine']['engine']}@127.0.0.1:{m.engine.port}"
    assert served.pid == raw["exporter"]["engines"][0]["pid"]


def test_an_upgraded_record_reads_the_same_again_and_the_file_is_untouched() -> None:
    path = OLD_RECORDS[0]
    before = path.read_bytes()
    once = read_manifest(path)
    assert read_manifest(dict(once.raw)) == once  # upgrading is idempotent
    assert read_manifest(once) is once
    assert path.read_bytes() == before  # reading never rewrites the record


def test_a_v1_record_keeps_what_it_said() -> None:
    raw = {"run_id": "r1", "status": "running", "engine": {"engine": "vllm", "param_sources": {"x": "flag"}}}
    up = upgrade(raw)
    assert up["status"] == "running"  # a recorded status is not overwritten
    assert up["engine"]["param_sources"] == {"x": "flag"}
    assert raw == {
        "run_id": "r1",
        "status": "running",
        "engine": {"engine": "vllm", "param_sources": {"x": "flag"}},
    }
    crashed = read_manifest({"run_id": "r2", "crashed": True})
    assert (crashed.status, crashed.crashed) == ("crashed", True)


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "manifest.json"
    path.write_text(body)
    return path


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            '{"run_id": "r", "manifest_version": 3}',
            "manifest_version 3 is newer than this loadgen reads (<= 2)",
        ),
        ('{"run_id": "r", "manifest_version": "two"}', "manifest_version 'two' is not a version"),
        ('{"run_id": "r", "manifest_version": 0}', "manifest_version 0 is not a version"),
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON object expected, got list"),
        ('{"engine": {}}', "no `run_id`"),
        ('{"run_id": "r", "engine": "vllm"}', "`engine` is a str, not an object"),
    ],
)
def test_garbage_or_a_future_version_is_one_line_naming_the_file(
    tmp_path: Path, body: str, said: str
) -> None:
    path = _write(tmp_path, body)
    with pytest.raises(ManifestError) as info:
        read_manifest(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert said in message
    assert "\n" not in message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"manifest\.json: cannot read"):
        read_manifest(tmp_path / "manifest.json")


def test_load_run_reads_through_the_schema(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"run_id": "r1", "engine": {"engine": "vllm"}}))
    (run / "summary.json").write_text("{}")
    record = load_run(tmp_path, "r1")
    assert record.manifest["manifest_version"] == 2
    assert record.typed.engine.engine == "vllm"
    (run / "manifest.json").write_text(json.dumps({"run_id": "r1", "manifest_version": 9}))
    with pytest.raises(ManifestError, match="manifest_version 9 is newer"):
        load_run(tmp_path, "r1")


def _two_engines() -> dict[str, Any]:
    served = {"engine": "vllm", "version": "0.26.0", "url": "http://127.0.0.1:8000", "pid": 10}
    served |= {"params": {"max_num_seqs": 64}, "args": {"max_num_seqs": "64"}}
    other = {"engine": "sglang", "version": "0.5.14", "url": "http://127.0.0.1:30000", "pid": 20}
    other |= {
        "params": {"max_num_seqs": 256},
        "args": {"max_running_requests": "256", "mem_fraction_static": "0.8"},
    }
    return {
        "run_id": "a",
        "engine": {"engine": "vllm", "version": "0.26.0", "base_url": "http://127.0.0.1:8000", "params": {}},
        "exporter": {"gpus": [{"name": "H200"}], "engines": [served, other]},
    }


def test_engines_in_swapped_order_show_no_difference() -> None:
    a = _two_engines()
    b = copy.deepcopy(a)
    b["run_id"] = "b"
    b["exporter"]["engines"].reverse()
    assert [e.identity for e in read_manifest(b).exporter.engines] == [
        "sglang@127.0.0.1:30000",
        "vllm@127.0.0.1:8000",
    ]
    assert manifest_differences(a, b) == []  # by list position, every key of both engines differed


def test_a_changed_flag_of_the_other_engine_is_named_by_its_identity() -> None:
    a = _two_engines()
    b = copy.deepcopy(a)
    b["exporter"]["engines"].reverse()
    b["exporter"]["engines"][0]["args"]["mem_fraction_static"] = "0.9"
    keys = [d.key for row in manifest_differences(a, b) for d in (row, *row.details)]
    assert "exporter.engines[sglang@127.0.0.1:30000].args.mem_fraction_static" in keys


def test_an_engine_only_one_exporter_watched_is_said_as_missing() -> None:
    a = _two_engines()
    b = copy.deepcopy(a)
    del b["exporter"]["engines"][1]
    rows = manifest_differences(a, b)
    details = [d for row in rows for d in row.details]
    missing = [d for d in details if d.key.startswith("exporter.engines[")]
    assert [(d.key, d.a, d.b) for d in missing] == [
        ("exporter.engines[sglang@127.0.0.1:30000]", "sglang 0.5.14 http://127.0.0.1:30000", "missing")
    ]
    engines_row = next(r for r in rows if r.key == "exporter.engines")
    assert (engines_row.a, engines_row.b) == (1, 0)  # A has it, B does not


def test_the_served_engine_matches_across_ports() -> None:
    """A launched engine gets a free port each pass: the engine that served the run is `served`."""
    a = _two_engines()
    b = copy.deepcopy(a)
    b["engine"]["base_url"] = "http://127.0.0.1:8123"
    b["exporter"]["engines"][0]["url"] = "http://127.0.0.1:8123"
    b["exporter"]["engines"][0]["args"]["max_num_seqs"] = "32"
    b["exporter"]["engines"][0]["params"]["max_num_seqs"] = 32
    rows = manifest_differences(a, b)
    assert [(r.key, r.a, r.b) for r in rows if r.group == "params"] == [
        ("engine.params.max_num_seqs", 64, 32)
    ]
    keys = [d.key for row in rows for d in (row, *row.details)]
    assert "exporter.engines[served].url" in keys
    assert not [k for k in keys if k.startswith("exporter.engines[vllm@")]


def test_diff_of_a_future_record_is_a_one_line_usage_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from loadgen.cli.main import cli

    for run_id, version in (("old", None), ("new", 9)):
        run = tmp_path / run_id
        run.mkdir()
        manifest: dict[str, Any] = {"run_id": run_id, "engine": {"engine": "vllm"}}
        if version is not None:
            manifest["manifest_version"] = version
        (run / "manifest.json").write_text(json.dumps(manifest))
        (run / "summary.json").write_text("{}")
    result = CliRunner().invoke(cli, ["diff", "old", "new", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [
        f"Error: {tmp_path / 'new' / 'manifest.json'}: manifest_version 9 is newer than this "
        "loadgen reads (<= 2): upgrade loadgen"
    ]


def test_store_import_counts_a_future_record_unreadable_naming_it(tmp_path: Path) -> None:
    from loadgen.store.db import open_store
    from loadgen.store.importer import import_runs
    from loadgen.store.url import parse_store

    results = tmp_path / "results"
    for run_id, version in (("old", None), ("new", 7)):
        run = results / run_id
        run.mkdir(parents=True)
        manifest: dict[str, Any] = {"run_id": run_id, "started_at": "2026-12-01T07:48:33.726Z"}
        if version is not None:
            manifest["manifest_version"] = version
        (run / "manifest.json").write_text(json.dumps(manifest))
        (run / "summary.json").write_text(json.dumps({"run_id": run_id}))
    url = parse_store(f"sqlite:///{tmp_path / 'store.db'}", results)
    assert url is not None
    with open_store(url) as store:
        report = import_runs(store, results)
        stored = store.conn.execute("SELECT manifest FROM runs").fetchall()
    assert report.counts["unreadable"] == 1
    assert report.unreadable == {
        "new": f"{results / 'new' / 'manifest.json'}: manifest_version 7 is newer "
        "than this loadgen reads (<= 2): upgrade loadgen"
    }
    assert [json.loads(row[0])["manifest_version"] for row in stored] == [2]  # the v1 record, upgraded


def test_the_served_engine_is_found_by_the_rule_the_exporter_is_attached_by() -> None:
    """Its URL's port, else its --port flag, else its engine's default port; never another host's."""
    flagged = {"engine": "sglang", "args": {"port": "30001"}}
    default = {"engine": "vllm", "pid": 7}
    elsewhere = {"engine": "vllm", "url": "http://10.0.0.9:8000"}
    listed = {"exporter": {"engines": [elsewhere, flagged, default]}}
    at = {
        url: read_manifest({**listed, "engine": {"base_url": url}}).served_by()
        for url in ("http://127.0.0.1:30001", "http://127.0.0.1:8000", "http://127.0.0.1:9999")
    }
    assert at["http://127.0.0.1:30001"] is not None
    assert at["http://127.0.0.1:30001"].engine == "sglang"
    served = at["http://127.0.0.1:8000"]
    assert served is not None
    assert served.pid == 7
    assert served.identity == "vllm@pid:7"
    assert at["http://127.0.0.1:9999"] is None  # three watched, none on that port


def test_a_stored_run_of_a_newer_loadgen_stops_the_baseline_check_with_one_line(tmp_path: Path) -> None:
    from loadgen.baseline.history import read_history
    from loadgen.cli.baseline import _check
    from loadgen.store.db import open_store
    from loadgen.store.rows import build_row
    from loadgen.store.url import parse_store

    url = parse_store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path)
    assert url is not None
    manifest = {
        "run_id": "r1",
        "started_at": "2026-12-01T07:48:33.726Z",
        "baseline": {"suite": "s", "series": "a"},
    }
    with open_store(url) as store:
        store.put(build_row(manifest, {"run_id": "r1"}))
        ((run,),) = read_history(store).values()
        assert run.manifest["manifest_version"] == 2  # read through the schema
        newer = json.dumps({**manifest, "manifest_version": 3})
        store.conn.execute("UPDATE runs SET manifest = ?", (newer,))
        store.conn.commit()
        with pytest.raises(ManifestError, match=r"^results store run r1: manifest_version 3 is newer"):
            read_history(store)
    with pytest.raises(SystemExit) as info:
        _check(url, "s", None)
    assert info.value.code == 3  # EXIT_PASS_FAILED: the check could not be made
