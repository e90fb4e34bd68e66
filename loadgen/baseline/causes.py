"""What a baseline change is blamed on (pure): the recorded differences between the last run before it
and the first run after it that can be causes, each naming its key and both values.

From `loadgen.analysis.diff.manifest_differences` (the ranked facts of `loadgen diff`), for a series:
- per-pass identifiers are never causes: the pass, experiment and run ids, the suite's own tag
  (`baseline.*`: suite, series, pass, the check's settings), start/end/collection times and stamps
  differ between any two passes and explain nothing; so do a launched engine's ports (a URL, a
  command or a text that differs only in its port numbers);
- a context row that folds several raw keys (`config: 2 -> 2`, a count of keys) is opened into its
  keys, each with its two values;
- a key recorded by one run only (an exporter that did not answer, a fact the engine stopped
  showing) is a *missing* fact, said as missing and not ranked;
- when no difference is left, the change is outside what the runs recorded: `NO_DIFFERENCE`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from infergauge.engines.base import MISSING, dig
from loadgen.analysis.diff import manifest_differences
from loadgen.analysis.diff_rank import Difference

NO_DIFFERENCE = (
    "no recorded difference: the cause is outside the run record (engine behaviour, host, hardware)"
)
CAUSES_KEPT = 10  # ranked differences kept per change
# sections and keys that differ between any two passes of a series
PER_PASS_PREFIXES = ("baseline.", "experiment.", "config.extra_manifest.", "stale.")
PER_PASS_LEAVES = frozenset(
    {
        "pass",
        "pass_id",
        "run_id",
        "experiment_id",
        "id_seed",
        "started_at",
        "ended_at",
        "collected_at",
        "timestamp",
        "time",
        "stamp",
        "uptime_s",
        "pid",
        "port",
        "exporter_source",  # how the run found (or did not attach) an exporter, with its ports
        "pids",
        "gpu_pids",
        "duration_s",
        "results_dir",
        "metrics_port",
        "load",  # the host's load during the run: a noisy-run fact (loadgen.baseline.noisy), not a cause
    }
)
PER_PASS_PATTERN = re.compile(r"(_at|_time|_timestamp|_stamp|_seconds_ago)$")
# a launched engine listens on a free port each pass: URLs, commands and texts that differ only there
PORT = re.compile(r"(?<=:)\d{2,5}\b|(?<=--port )\d{2,5}\b|(?<=--port=)\d{2,5}\b")


def _text(value: Any) -> str | None:
    """A string as is, a command line (a list) joined by spaces, else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return None


def only_ports_differ(a: Any, b: Any) -> bool:
    """Whether two values are the same text (or command line) but for port numbers
    (`http://127.0.0.1:37535`, `--port 37535`)."""
    ta, tb = _text(a), _text(b)
    if ta is None or tb is None:
        return False
    return PORT.sub("{port}", ta) == PORT.sub("{port}", tb)


def per_pass(key: str) -> bool:
    """Whether a manifest key is an identifier or time of one pass or run (never a cause)."""
    parts = [p for p in key.split(".") if not p.isdigit()]
    leaf = parts[-1] if parts else key
    if key.startswith(PER_PASS_PREFIXES) or leaf in PER_PASS_LEAVES or PER_PASS_PATTERN.search(leaf):
        return True
    return any(p in PER_PASS_LEAVES for p in parts[:-1])


def _absent(value: Any) -> bool:
    return value is None or value is MISSING or value in ({}, [], "")


def _opened(rows: Iterable[Difference]) -> list[Difference]:
    """Every row with its context rows opened into the raw keys they fold (a count is no cause)."""
    out: list[Difference] = []
    for row in rows:
        if row.group == "context" and row.details:
            out += [Difference(d.key, d.a, d.b, d.score, "context") for d in row.details]
        else:
            out.append(row)
    return out


def recorded_causes(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    summary_before: Mapping[str, Any] | None = None,
    summary_after: Mapping[str, Any] | None = None,
) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """(the ranked causes as `loadgen diff --json` rows, the missing facts as lines)."""
    rows = _opened(manifest_differences(before, after, summary_before, summary_after))
    ranked: list[Difference] = []
    missing: dict[str, str] = {}
    for row in rows:
        if row.key.startswith(PER_PASS_PREFIXES) or (_absent(row.a) and _absent(row.b)):
            continue
        section = ".".join(re.split(r"[.[]", row.key)[:2])
        lacking = after if _absent(row.b) else before
        if _absent(row.a) != _absent(row.b) and _absent(dig(lacking, section)):
            # a section one run lacks, whatever its keys are (a key new in a section both runs
            # recorded, such as a launch flag added, is a difference like any other)
            side = "the run after" if lacking is after else "the run before"
            missing.setdefault(section, f"{section}: not recorded by {side}")
            continue
        if not per_pass(row.key) and not only_ports_differ(row.a, row.b):
            ranked.append(row)
    kept = ranked[:CAUSES_KEPT]
    return tuple(r.as_dict(n) for n, r in enumerate(kept, start=1)), tuple(missing.values())
