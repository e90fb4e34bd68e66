"""`python -m grafana.dashgen --check` (issue #22 item 22): exits 1 on drift and writes nothing."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # grafana/dashgen lives beside the packages, not inside one
    sys.path.insert(0, str(REPO))

import grafana.dashgen.__main__ as dashgen_main  # noqa: E402
from grafana.dashgen import BUILDERS, drifted, write_all  # noqa: E402


def test_dashgen_check_passes_on_the_committed_dashboards(capsys: pytest.CaptureFixture[str]) -> None:
    assert dashgen_main.main(["--check"]) == 0
    assert "every dashboard matches" in capsys.readouterr().out


def test_dashgen_check_exits_1_on_drift_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_all(tmp_path, prometheus=None)
    assert drifted(tmp_path) == []
    edited = tmp_path / "run-live.json"
    edited.write_text(edited.read_text(encoding="utf-8").replace('"title"', '"tit1e"', 1), encoding="utf-8")
    (tmp_path / "gpu-host.json").unlink()
    before = edited.read_text(encoding="utf-8")
    monkeypatch.setattr(dashgen_main, "DASHBOARD_DIR", tmp_path)
    assert dashgen_main.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "run-live.json: differs" in out
    assert "gpu-host.json: differs" in out
    assert edited.read_text(encoding="utf-8") == before  # nothing rewritten
    assert not (tmp_path / "gpu-host.json").exists()
    assert "run-live.json" in BUILDERS


def test_dashgen_check_sees_a_hand_edited_engine_rule_file(tmp_path: Path) -> None:
    prometheus = tmp_path / "prometheus"
    shutil.copytree(REPO / "prometheus", prometheus)
    boards = tmp_path / "dashboards"
    write_all(boards, prometheus)
    assert drifted(boards, prometheus) == []
    rules = prometheus / "rules" / "engines.yml"
    rules.write_text(rules.read_text(encoding="utf-8").replace("> 0.95", "> 0.99"), encoding="utf-8")
    assert drifted(boards, prometheus) == [rules]
