"""Helpers of the baseline tests: a suite file on the simulated engine, and a clock the test drives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

START = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)


def sim_command(speed_factor: float = 1.0, version: str = "0.26.0") -> str:
    """A launched simulated vLLM playing engine `version`, each step `speed_factor` times as long."""
    return (
        "python -m simengine --personality vllm --port {port} --time-scale 0.1 --gpu h200 "
        f"--speed-factor {speed_factor:g} --version {version}"
    )


def write_suite(
    path: Path, results: Path, *, stepped: str, steady: str | None = None, num_prompts: int = 64
) -> Path:
    """A suite of series `stepped` (and `steady` when given), each on its own launched engine."""
    engines = {"stepped-engine": {"kind": "launch", "command": stepped, "health_timeout_s": 30}}
    series = [{"name": "stepped", "engine": "stepped-engine", "workload": "tiny", "concurrency": 8}]
    if steady is not None:
        engines["steady-engine"] = {"kind": "launch", "command": steady, "health_timeout_s": 30}
        series.append({"name": "steady", "engine": "steady-engine", "workload": "tiny", "concurrency": 8})
    suite = {
        "name": "e2e",
        "results_dir": str(results),
        "defaults": {"num_prompts": num_prompts, "seed": 7, "metrics_port": 0, "request_timeout": "60s"},
        "engines": engines,
        "workloads": {"tiny": {"input_len": 32, "output_len": 8}},  # long steps, few of them
        "metrics": ["tpot_p99", "e2e_p99", "request_throughput"],
        # the step is 15%; a loaded machine drifts ~5% between runs: a strict threshold for a 12-run history
        "check": {
            "min_before": 5,
            "min_regime": 5,
            "min_relative": 0.08,
            "alpha": 0.0005,
            "improvement_alpha": 0.0005,
            "loo_alpha": 1.0,
            "min_shift": 0.01,
            # one run a pass, as the passes these tests count (confirmation runs: test_baseline_noisy_e2e)
            "confirm_runs": 0,
        },
        "series": series,
    }
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


@dataclass
class SteppedClock:
    """A clock that jumps to each due time at once, calling `before_pass(n)` (1-based) as it does."""

    before_pass: Callable[[int], None] = lambda n: None
    now_at: datetime = START
    passes: int = 0
    waited_for: list[datetime] = field(default_factory=list)

    def now(self) -> datetime:
        """The driven time."""
        return self.now_at

    def sleep_until(self, when: datetime) -> None:
        """Jump to `when` (the pass then takes no driven time but one second)."""
        self.waited_for.append(when)
        self.passes += 1
        self.before_pass(self.passes)
        self.now_at = max(self.now_at, when) + timedelta(seconds=1)
