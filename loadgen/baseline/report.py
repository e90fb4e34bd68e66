"""How a check is shown: console lines, a JSON document and a Markdown report (pure text building)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loadgen.baseline.causes import NO_DIFFERENCE
from loadgen.baseline.check import Finding, gating, regressions
from loadgen.baseline.metrics import WATCHED

CAUSES_SHOWN = 3


def _cause(row: dict[str, Any]) -> str:
    return f"{row['key']}: {row['a']} -> {row['b']}"


def _size(f: Finding) -> str:
    unit = WATCHED[f.metric].unit
    if f.slope is not None:
        return f"{f.slope * 100:+.2f}% a run ({f.before_median:.6g} -> {f.after_median:.6g} {unit})".replace(
            " )", ")"
        )
    return f"{f.before_median:.6g} -> {f.after_median:.6g} {unit} ({f.relative * 100:+.1f}%)".replace(
        "  ", " "
    )


def console(findings: Sequence[Finding], fail_on: str) -> list[str]:
    """One block per change: what moved, by how much, where, and the likeliest causes."""
    if not findings:
        return ["no change points"]
    lines = []
    for f in findings:
        flag = "REGRESSION" if f in gating(findings, fail_on) else f.kind
        lines.append(
            f"{flag} [{f.status}{'' if f.open else ', superseded'}] {f.series} {WATCHED[f.metric].label}: "
            f"{_size(f)} p={f.p_value:.2g} between {f.last_before} and {f.first_after}"
        )
        lines += _cause_lines(f)
    return lines


def _cause_lines(f: Finding) -> list[str]:
    """The likeliest causes, `no recorded difference` when there is none, and the missing facts."""
    if f.slope is not None:
        return ["    a slow drift, not a step: never gated; its cause is what changed over these runs"]
    lines = [f"    {n}. {_cause(c)}" for n, c in enumerate(f.causes[:CAUSES_SHOWN], start=1)]
    if not f.causes:
        lines.append(f"    {NO_DIFFERENCE}")
    return lines + [f"    missing: {line}" for line in f.missing]


def document(findings: Sequence[Finding], fail_on: str) -> dict[str, Any]:
    """The JSON document: every change, the regressions (grouped by run) and the gate's verdict."""
    failing = gating(findings, fail_on)
    grouped = [
        {"suite": s, "series": k, "first_run_after": run, "metrics": [f.metric for f in group]}
        for (s, k, run), group in regressions(findings).items()
    ]
    return {
        "changes": [f.as_dict() for f in findings],
        "regressions": grouped,
        "failing": [f.as_dict() for f in failing],
        "fail_on": fail_on,
    }


def markdown(findings: Sequence[Finding], fail_on: str) -> str:
    """A Markdown report: a table of the changes, then each regression's ranked causes."""
    failing = gating(findings, fail_on)
    out = [
        "# Baseline check",
        "",
        f"{len(failing)} open regression(s) failing the gate (fail on {fail_on}).",
        "",
    ]
    if not findings:
        return "\n".join([*out, "No change points.", ""])
    out += [
        "| series | metric | kind | status | size | p-value | last run before | first run after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in findings:
        out.append(
            f"| {f.series} | {WATCHED[f.metric].label} | {f.kind} | {f.status} | {_size(f)} | "
            f"{f.p_value:.2g} | {f.last_before} | {f.first_after} |"
        )
    for f in findings:
        if f.kind == "regression":
            out += ["", f"## {f.series}: {WATCHED[f.metric].label} at {f.first_after}", ""]
            out += [f"{n}. `{c['key']}`: {c['a']} -> {c['b']}" for n, c in enumerate(f.causes, start=1)]
            out += [] if f.causes else [NO_DIFFERENCE]
            out += [f"- missing: {line}" for line in f.missing]
    return "\n".join([*out, ""])
