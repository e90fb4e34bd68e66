"""Issue 22 item 5: a requests.jsonl whose last line is cut (the full-disk or kill -9 crash) is read
by one reader everywhere: `loadgen report`, `loadgen diff` and `store import` all drop the torn line
and go on (no JSONDecodeError traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.results.summary import iter_lines, read_lines

pytestmark = pytest.mark.timeout(120)


def _loadgen(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "loadgen.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


def _runs(results: Path) -> set[Path]:
    return (
        {p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")}
        if results.is_dir()
        else set()
    )


def _sim_run(results: Path) -> Path:
    before = _runs(results)
    result = _loadgen(
        *("run", "--target", "sim", "--num-prompts", "8", "--rate", "40", "--profile", "short"),
        *("--results-dir", str(results), "--metrics-port", "0", "--linger", "0", "--quiet"),
    )
    assert result.returncode == 0, result.stderr
    (run,) = _runs(results) - before
    return run


def _tear(run: Path) -> int:
    """Cut the last line of requests.jsonl in half; returns the whole lines left."""
    path = run / "requests.jsonl"
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    return len(lines) - 1


def test_report_of_a_torn_journal_drops_the_cut_line(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first, second = _sim_run(results), _sim_run(results)
    whole = _tear(first)
    assert len(list(iter_lines(first / "requests.jsonl"))) == whole
    assert len(read_lines((first / "requests.jsonl").read_text())) == whole
    report = _loadgen("report", first.name, second.name, "--results-dir", str(results))
    assert report.returncode == 0, report.stderr
    assert "Traceback" not in report.stderr
    assert "JSONDecodeError" not in report.stderr
    diff = _loadgen("diff", first.name, second.name, "--results-dir", str(results))
    assert diff.returncode in (0, 1), diff.stderr
    assert "Traceback" not in diff.stderr
    imported = _loadgen("store", "import", str(results))
    assert imported.returncode == 0, imported.stderr
    assert "0 unreadable" in imported.stdout, imported.stdout


def test_the_one_reader_skips_blank_and_torn_lines_only() -> None:
    good = [{"index": 0, "outcome": "ok"}, {"index": 1, "outcome": "timeout"}]
    text = "\n".join(json.dumps(x) for x in good) + "\n\n" + '{"index": 2, "outc'
    assert read_lines(text) == good
