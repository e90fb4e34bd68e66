"""Pure parts of the results store: row building from real engine runs, store URLs, the schema SQL."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from loadgen.results.manifest_schema import upgrade
from loadgen.store import schema
from loadgen.store.rows import build_row, content_hash, number, run_status, series_key
from loadgen.store.url import StoreURLError, parse_store, public_text

REAL_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "real-runs"
RUNS = sorted(p.name for p in REAL_RUNS.iterdir() if (p / "summary.json").is_file())


def _record(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    run = REAL_RUNS / name
    return json.loads((run / "manifest.json").read_text()), json.loads((run / "summary.json").read_text())


@pytest.mark.parametrize("name", RUNS)
def test_a_real_runs_row_carries_its_figures_and_facts(name: str) -> None:
    manifest, summary = _record(name)
    row = build_row(manifest, summary)
    assert set(row) == {c for c, _ in schema.RUNS_COLUMNS}
    assert row["run_id"] == summary["run_id"]
    started = row["started_at"].isoformat(timespec="milliseconds")
    assert started == summary["started_at"].replace("Z", "+00:00")
    assert row["engine_version"] == manifest["engine"]["version"]
    assert row["gpu_model"] == manifest["exporter"]["gpus"][0]["name"]
    assert row["gpu_count"] == len(manifest["exporter"]["gpus"])
    assert row["output_throughput"] == summary["output_token_throughput"]
    assert row["tpot_p99_s"] == summary["tpot_s"]["p99"]
    assert row["itl_p99_s"] == summary["itl_s"]["p99"]
    assert row["requests_ok"] == summary["requests"]["ok"]
    assert row["workload_fingerprint"] == manifest["workload"]["fingerprint"]
    assert row["status"] == "ok"
    # the store keeps the record as the one schema reads it: these v1 captures upgraded to v2
    assert row["manifest"] == upgrade(manifest)
    assert row["manifest"]["manifest_version"] == 2


def test_the_public_base_url_has_no_userinfo() -> None:
    manifest, summary = _record(RUNS[0])
    manifest = {**manifest, "engine": {**manifest["engine"], "base_url": "http://u:s3cret@10.0.0.1:8000"}}
    assert build_row(manifest, summary)["base_url"] == "http://10.0.0.1:8000"


def test_non_finite_or_non_numeric_figures_are_null() -> None:
    # a Grafana panel cannot chart inf, and a flag is not a figure
    assert [number(v) for v in ("inf", float("nan"), True, "x", None, "0.25", 3)] == [
        None,
        None,
        None,
        None,
        None,
        0.25,
        3.0,
    ]


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({}, "ok"),
        ({"partial": True}, "partial"),
        ({"crashed": True, "partial": True}, "crashed"),
        ({"error_rate": 0.5}, "failed"),  # over the manifest's max_error_rate of 0.1
    ],
)
def test_status_follows_the_record(change: dict[str, Any], status: str) -> None:
    manifest, summary = _record(RUNS[0])
    assert run_status(manifest, {**summary, **change}) == status


def test_a_series_is_its_suite_entry_plus_gpu_model_and_count() -> None:
    manifest, summary = _record(RUNS[0])
    suite = {**manifest, "baseline": {"suite": "nightly", "series": "llama-r20"}}
    assert series_key(suite, summary) == "nightly/llama-r20@NVIDIA H200x1"
    two = copy.deepcopy(suite)
    two["exporter"]["gpus"] *= 2
    assert series_key(two, summary) == "nightly/llama-r20@NVIDIA H200x2"
    newer = copy.deepcopy(suite)
    newer["engine"]["version"] = "9.9.9"  # context, not identity
    assert series_key(newer, summary) == series_key(suite, summary)


def test_the_content_hash_changes_with_the_record_only() -> None:
    manifest, summary = _record(RUNS[0])
    assert content_hash(manifest, summary) == content_hash(copy.deepcopy(manifest), dict(summary))
    assert content_hash(manifest, {**summary, "partial": True}) != content_hash(manifest, summary)


def test_a_record_without_run_id_is_refused() -> None:
    with pytest.raises(ValueError, match="run_id"):
        build_row({}, {})


@pytest.mark.parametrize(
    ("value", "dialect", "target"),
    [
        (None, "sqlite", "res/infergauge.db"),
        ("sqlite:///rel/x.db", "sqlite", "rel/x.db"),
        ("sqlite:////abs/x.db", "sqlite", "/abs/x.db"),
        ("postgresql://u@db.example/bench", "postgresql", "postgresql://u@db.example/bench"),
        ("postgres://u@db.example/bench", "postgresql", "postgres://u@db.example/bench"),
    ],
)
def test_store_urls(value: str | None, dialect: str, target: str) -> None:
    url = parse_store(value, "res")
    assert url is not None
    assert (url.dialect, url.target) == (dialect, target)


def test_store_none_is_off() -> None:
    assert parse_store("none", "res") is None
    assert parse_store("NONE", "res") is None


@pytest.mark.parametrize("value", ["mysql://u:pw1@h/db", "results.db", "sqlite://", "postgresql://"])
def test_a_bad_store_is_one_error_naming_it_without_password(value: str) -> None:
    with pytest.raises(StoreURLError, match="use sqlite:///PATH") as err:
        parse_store(value, "res")
    assert "pw1" not in str(err.value)
    assert public_text(value) in str(err.value) or value in str(err.value)


def test_passwords_are_removed_from_printable_urls() -> None:
    url = parse_store("postgresql://bench:s3cr%40t@h:5433/db?sslmode=require&password=x2", "res")
    assert url is not None
    assert url.public == "postgresql://bench@h:5433/db?sslmode=require"
    assert url.scrub("auth failed for s3cr%40t") == "auth failed for ***"
    assert "s3cr" not in repr(url)


@pytest.mark.parametrize("name", sorted(schema.DIALECTS))
def test_every_column_gets_a_type_and_the_upsert_names_them_all(name: str) -> None:
    dialect = schema.DIALECTS[name]
    create = schema.MIGRATIONS[0](dialect)[0]
    assert all(f"{name} {dialect.types[kind]}" in create for name, kind in schema.RUNS_V1)
    sql = schema.upsert(dialect, [c for c, _ in schema.RUNS_COLUMNS])
    assert sql.count(dialect.placeholder("run_id")) == 1
    assert "run_id = excluded.run_id" not in sql  # the key is never rewritten


def test_non_finite_floats_are_stored_as_the_folder_writes_them() -> None:
    manifest, summary = _record(RUNS[0])
    in_memory = {**summary, "ttft_s": {**summary["ttft_s"], "max": float("inf")}}
    from_folder = {**summary, "ttft_s": {**summary["ttft_s"], "max": "inf"}}  # rundir.write_json's form
    row = build_row(manifest, in_memory)
    assert row["summary"]["ttft_s"]["max"] == "inf"  # JSONB takes no Infinity
    assert row["row_hash"] == build_row(manifest, from_folder)["row_hash"]


def test_a_shard_record_is_a_row_keyed_apart_from_its_merged_run() -> None:
    manifest, summary = _record(RUNS[0])
    whole = build_row(manifest, summary)
    assert (whole["run_id"], whole["shard"]) == (summary["run_id"], None)
    sharded = copy.deepcopy(manifest)
    sharded["shard"] = {"index": 2, "count": 3}
    row = build_row(sharded, summary)
    # the shards and their merged run share the run id: the shard's row has its own key
    assert (row["run_id"], row["shard"]) == (f"{summary['run_id']}/shard-2", "2/3")
