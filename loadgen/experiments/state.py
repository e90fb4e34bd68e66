"""An experiment's state on disk: which runs finished (so an interrupted experiment resumes).

`<results_dir>/experiments/<experiment_id>/` holds `state.json` (rewritten atomically after every
run), `plan.yaml` (the plan as it was started) and one log per launched engine.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loadgen.results.rundir import write_json

DONE = "done"


class ExperimentNotFound(LookupError):
    """No experiment with that id under the results directory."""


def new_experiment_id(now: datetime | None = None) -> str:
    """`exp-` + UTC timestamp + short random suffix, unique and sortable."""
    return f"exp-{(now or datetime.now(UTC)).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def experiment_dir(results_dir: str | Path, experiment_id: str) -> Path:
    """Where an experiment keeps its state."""
    return Path(results_dir) / "experiments" / experiment_id


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ExperimentState:
    """Status of an experiment and of each of its runs (by run key)."""

    experiment_id: str
    directory: Path
    name: str = ""
    purpose: str = ""
    status: str = "running"
    created_at: str = field(default_factory=_now)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def done(self, key: str) -> bool:
        """True when the run with this key finished in an earlier or this session."""
        return self.runs.get(key, {}).get("status") == DONE

    def record(self, key: str, **entry: Any) -> None:
        """Set a run's entry and save."""
        self.runs[key] = {**entry, "updated_at": _now()}
        self.save()

    def run_ids(self) -> list[str]:
        """Ids of the finished runs, in plan order."""
        return [e["run_id"] for e in self.runs.values() if e.get("status") == DONE and e.get("run_id")]

    def save(self) -> None:
        """Atomically rewrite state.json."""
        write_json(
            self.directory / "state.json",
            {
                "experiment_id": self.experiment_id,
                "name": self.name,
                "purpose": self.purpose,
                "status": self.status,
                "created_at": self.created_at,
                "updated_at": _now(),
                "runs": self.runs,
            },
        )


def load_state(results_dir: str | Path, experiment_id: str) -> ExperimentState:
    """Read an experiment's state; raises ExperimentNotFound naming the id and the directory."""
    if "/" in experiment_id or "\\" in experiment_id or Path(experiment_id).suffix in (".yaml", ".yml"):
        raise ExperimentNotFound(
            f"{experiment_id!r} is not an experiment id (a plan file?): give the id that "
            "`loadgen experiment run` printed (exp-...)"
        )
    directory = experiment_dir(results_dir, experiment_id)
    try:
        data = json.loads((directory / "state.json").read_text())
    except FileNotFoundError:
        raise ExperimentNotFound(f"no experiment {experiment_id!r} in {str(results_dir)!r}") from None
    except (OSError, ValueError) as exc:
        raise ExperimentNotFound(
            f"experiment {experiment_id!r}: cannot read {str(directory / 'state.json')!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise ExperimentNotFound(f"experiment {experiment_id!r}: state.json is not a JSON object")
    return ExperimentState(
        experiment_id,
        directory,
        data.get("name", ""),
        data.get("purpose", ""),
        data.get("status", "running"),
        data.get("created_at", _now()),
        data.get("runs", {}),
    )
