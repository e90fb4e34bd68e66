"""Issue 22 item 6: secrets given to the embedded engine through `--sim-*` (`--sim-api-key sk-X
--sim-hf-token hf_Y`, and the `=` form) reach no file of the run folder, not the results store and
not the console: the one redaction policy (infergauge.redact) hides every argv in a record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infergauge.redact import REDACTED, redact
from tests.loadgen_servers import loadgen_process

pytestmark = pytest.mark.timeout(120)
KEY, TOKEN = "sk-reliabSECRETkey42", "hf_reliabSECRETtoken42"


@pytest.mark.parametrize(
    "flags",
    [
        ["--sim-api-key", KEY, "--sim-hf-token", TOKEN],
        [f"--sim-api-key={KEY}", f"--sim-hf-token={TOKEN}"],
    ],
    ids=["space", "equals"],
)
def test_sim_secrets_never_reach_the_run_folder_store_or_console(flags: list[str], tmp_path: Path) -> None:
    results = tmp_path / "results"
    cmd = [
        *(sys.executable, "-m", "loadgen.cli.main", "run", "--target", "sim", *flags, "--api-key", KEY),
        *("--num-prompts", "4", "--rate", "20", "--profile", "short", "--results-dir", str(results)),
        *("--metrics-port", "0", "--linger", "0"),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    assert result.returncode == 0, result.stderr
    imported = loadgen_process("store", "import", str(results))
    assert imported.returncode == 0, imported.stderr
    files = [p for p in results.rglob("*") if p.is_file()]
    assert any(p.name == "manifest.json" for p in files)
    assert any(p.suffix == ".db" for p in files)  # the SQLite store is searched too
    for secret in (KEY, TOKEN):
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path}"
        for text in (result.stdout, result.stderr, imported.stdout, imported.stderr):
            assert secret not in text
    manifest = next(p for p in files if p.name == "manifest.json").read_text()
    assert REDACTED in manifest


def test_any_argv_in_a_record_is_redacted_where_it_sits() -> None:
    record = {
        "config": {"sim_args": ["--api-key", KEY, "--max-num-seqs", "8"]},
        "argv": [f"--hf-token={TOKEN}"],
    }
    assert redact(record) == {
        "config": {"sim_args": ["--api-key", REDACTED, "--max-num-seqs", "8"]},
        "argv": [f"--hf-token={REDACTED}"],
    }
    assert redact({"served_model_name": ["sim-llama-8b"]}) == {"served_model_name": ["sim-llama-8b"]}
