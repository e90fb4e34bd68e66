"""The manifest's `config` section as sent: options that did not shape any request are null.

`RunConfig.to_manifest()` resolves every option, used or not; a reader of the manifest must not see
`input_len: fixed:512` for a dataset run or `ignore_eos: true` where the target never sends it.
Each rule is one small pure function over (config section, workload, target).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loadgen.targets import Target
from loadgen.workload.generator import JsonlWorkload

Rule = Callable[[dict[str, Any], Any, Target], dict[str, Any]]


def _dataset_lengths(section: dict[str, Any], workload: Any, target: Target) -> dict[str, Any]:
    """A dataset sets the prompts; `output_len` is used only for records without their own length."""
    if not isinstance(workload, JsonlWorkload):
        return {}
    unused: dict[str, Any] = {"input_len": None, "profile": None}
    if not workload.draws_output_len:
        unused["output_len"] = None
    return unused


def _shared_prefix(section: dict[str, Any], workload: Any, target: Target) -> dict[str, Any]:
    """`shared_prefix_len` / `_groups` shape requests only under `--workload shared-prefix`."""
    if section.get("workload") == "shared-prefix":
        return {}
    return {"shared_prefix_len": None, "shared_prefix_groups": None}


def _ignore_eos(section: dict[str, Any], workload: Any, target: Target) -> dict[str, Any]:
    """`ignore_eos` is sent only to targets that take it (not a generic OpenAI server)."""
    return {} if target.supports_ignore_eos else {"ignore_eos": False}


def _traffic_lengths(section: dict[str, Any], workload: Any, target: Target) -> dict[str, Any]:
    """A trace or a ShareGPT file sets the lengths (docs/workloads.md); synthetic sessions use them."""
    if getattr(workload, "sets_lengths", False):
        return {"input_len": None, "output_len": None, "profile": None}
    return {}


SENT_RULES: tuple[Rule, ...] = (_dataset_lengths, _shared_prefix, _ignore_eos, _traffic_lengths)


def as_sent(section: dict[str, Any], workload: Any, target: Target) -> dict[str, Any]:
    """The resolved config section with every option the requests did not carry set to null/false."""
    out = dict(section)
    for rule in SENT_RULES:
        out.update(rule(section, workload, target))
    return out
