"""The rows of `loadgen diff`, built from two runs: facts compared once (engine, version, model,
endpoint, measured tokens, neutral parameters), manifest keys sorted into workload, cache, GPU and
check rows, and every remaining raw key folded into one context row per group."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infergauge.engines.base import NEUTRAL_PARAMS
from loadgen.analysis.diff_facts import IDENTITY_SPELLINGS, RunFacts, neutral_spellings
from loadgen.analysis.diff_priors import UNRECORDED_WEIGHT, context_group, magnitude, prior_weight, same
from loadgen.analysis.flatten import flatten
from loadgen.results.manifest_schema import Manifest

# Keys that differ between any two runs and explain nothing.
IGNORED_SUFFIXES = frozenset(
    {
        "run_id",
        "started_at",
        "ended_at",
        "partial",
        "experiment_id",
        "collected_at",
        "results_dir",
        "pid",
        "gpu_pids",
        "duration_s",
        "partial_reason",
        "param_sources",
        # cache.hit_tokens / queried_tokens and the reported / implied token counts are what the run
        # measured; its hit ratios are compared once, by loadgen.analysis.diff_cache
        "hit_tokens",
        "queried_tokens",
        "cached_tokens",
        "prompt_tokens",
        "requests_with_details",
    }
)
IGNORED_PREFIXES = ("experiment.",)
# Sections whose every key is timing noise: the exporter's ages of facts kept from an earlier poll,
# the client host's load when the record was written (a noisy-run fact, not a difference of setup).
IGNORED_SECTIONS = frozenset({"stale", "load"})
# Keys the ranked facts already compare (engine, version, model, endpoint, neutral params).
FACT_KEYS = re.compile(
    r"^(engine\.(engine|version|model|max_model_len|params|param_sources)"
    r"|config\.(model|endpoint|target)"
    r"|exporter\.engines\[[^\]]*\]\.(engine|version|model|params|param_sources))(\.|$)"
)
RAW_SECTIONS = re.compile(r"^(engine\.server_args|config\.sim_args|exporter\.engines\[[^\]]*\]\.args)\.")
MISSING = "missing"  # an engine the other run's exporter watched and this one's did not
# Load settings in the run config; a key that the workload section also records is compared there.
LOAD_KEYS = frozenset(
    {
        "rate",
        "max_concurrency",
        "num_prompts",
        "input_len",
        "output_len",
        "profile",
        "dataset",
        "arrival",
        "burstiness",
        "warmup",
        "ignore_eos",
        "shared_prefix_len",
        "shared_prefix_groups",
    }
)
# config key -> the workload section's key for the same setting (compared there when recorded)
CONFIG_ALIASES = {"num_prompts": "num_requests", "workload": "name"}
GPU_FACTS = frozenset(
    {
        "name",
        "driver_version",
        "cuda_version",
        "memory_total_bytes",
        "persistence_mode",
        "power_limit_w",
        "locked",
        "max_graphics_mhz",
        "max_sm_mhz",
        "max_memory_mhz",
    }
)
# the prefix-cache hit ratios (loadgen.analysis.diff_cache.COMPARED: diff_cache imports this module)
CACHE_COMPARED = frozenset(
    {
        "cache.reported.hit_ratio",
        "cache.hit_ratio",
        "cache.implied.hit_ratio",
        "cache.reported.cached_share_of_input",
    }
)
# what the run measured and implied about its prefix cache: its ratios are the cache row's details,
# the rest (token counts, block size, the bound's wording) explains nothing on its own
CACHE_SECTIONS = ("cache.reported.", "cache.implied.")
UNRECORDED = "engine.params.unrecorded"  # the context row of params only one run recorded
TOKENS_TOLERANCE = 0.01  # measured tokens per request within 1% are the same load


@dataclass(frozen=True)
class Difference:
    """One ranked difference: its kind (`group`), weight inside the kind (0..1) and, for a context
    row, the raw keys it stands for (`details`); a neutral parameter's details name its sources."""

    key: str
    a: Any
    b: Any
    score: float
    group: str = "context"
    details: tuple[Difference, ...] = ()

    def as_dict(self, rank: int) -> dict[str, Any]:
        """The JSON form of `loadgen diff --json`."""
        out: dict[str, Any] = {"rank": rank, "key": self.key, "a": self.a, "b": self.b, "group": self.group}
        out["weight"] = self.score
        if self.details:
            out["details"] = [{"key": d.key, "a": d.a, "b": d.b, "weight": d.score} for d in self.details]
        return out


def _identity(engine: str | None, version: str | None) -> str | None:
    return " ".join(str(p) for p in (engine, version) if p) or None


def _token_rows(fa: RunFacts, fb: RunFacts) -> list[Difference]:
    rows = []
    for name, a, b in (
        ("input_tokens_per_request", fa.input_tokens, fb.input_tokens),
        ("output_tokens_per_request", fa.output_tokens, fb.output_tokens),
    ):
        if a is None and b is None:
            continue
        if a is not None and b is not None and abs(a - b) <= TOKENS_TOLERANCE * max(abs(a), abs(b)):
            continue
        ra, rb = (None if v is None else round(v, 1) for v in (a, b))
        rows.append(Difference(f"summary.{name}", ra, rb, _score(name, a, b), "tokens"))
    return rows


def _score(key: str, a: Any, b: Any) -> float:
    return round(prior_weight(key) * magnitude(a, b), 4)


def fact_rows(fa: RunFacts, fb: RunFacts) -> list[Difference]:
    """Engine (with its version when the engines differ), version, model, endpoint, measured tokens."""
    rows = []
    if not same(fa.engine, fb.engine):
        ia, ib = _identity(fa.engine, fa.version), _identity(fb.engine, fb.version)
        rows.append(Difference("engine.engine", ia, ib, 1.0, "engine"))
    elif not same(fa.version, fb.version):
        rows.append(Difference("engine.version", fa.version, fb.version, 1.0, "version"))
    if not same(fa.model, fb.model):
        rows.append(Difference("engine.model", fa.model, fb.model, 1.0, "model"))
    if not same(fa.endpoint, fb.endpoint):
        rows.append(Difference("config.endpoint", fa.endpoint, fb.endpoint, 1.0, "endpoint"))
    return rows + _token_rows(fa, fb)


def param_rows(fa: RunFacts, fb: RunFacts) -> list[Difference]:
    """One row per neutral parameter both runs recorded and that differs (its details say where each
    value was read); those only one run recorded are one context row, not a difference."""
    rows, unrecorded = [], []
    for name in NEUTRAL_PARAMS:
        a, b = fa.params.get(name), fb.params.get(name)
        if same(a, b):
            continue
        if a is None or b is None:
            unrecorded.append(Difference(f"engine.params.{name}", a, b, _score(name, a, b), "context"))
            continue
        score = _score(name, a, b)
        sources = Difference(
            "source",
            fa.param_sources.get(name, "not recorded"),
            fb.param_sources.get(name, "not recorded"),
            0.0,
            "params",
        )
        rows.append(Difference(f"engine.params.{name}", a, b, score, "params", (sources,)))
    if unrecorded:
        a_set, b_set = (sum(_recorded(getattr(d, side)) for d in unrecorded) for side in "ab")
        rows.append(Difference(UNRECORDED, a_set, b_set, UNRECORDED_WEIGHT, "context", tuple(unrecorded)))
    return rows


def _leaf(key: str) -> str:
    parts = [p for p in key.split(".") if not p.isdigit()]
    return parts[-1] if parts else key


@dataclass(frozen=True)
class _Known:
    """What the fact rows already compare, for sorting the remaining manifest keys."""

    params: frozenset[str]  # neutral params at least one run recorded
    workload: frozenset[str]  # keys the workload section records
    spellings: dict[str, str]  # an engine's argument name -> neutral param
    exporters: bool  # both runs recorded an exporter (else its GPU facts cannot be compared)


def _kind(key: str, known: _Known) -> str | None:
    """Which kind of row a manifest key belongs to; None for keys that explain nothing or that a
    fact row already compares (a raw spelling of a known neutral parameter, the model, the version)."""
    leaf = _leaf(key)
    if leaf in IGNORED_SUFFIXES or key.startswith(IGNORED_PREFIXES) or FACT_KEYS.match(key):
        return None
    if key in CACHE_COMPARED or key.startswith(CACHE_SECTIONS):
        return None
    if IGNORED_SECTIONS.intersection(key.split(".")):
        return None
    if RAW_SECTIONS.match(key) and (known.spellings.get(leaf) in known.params or leaf in IDENTITY_SPELLINGS):
        return None
    if key.startswith("config.") and (leaf in LOAD_KEYS or leaf in CONFIG_ALIASES):
        return None if CONFIG_ALIASES.get(leaf, leaf) in known.workload else "workload"
    prefix = key.split(".", 2)
    kinds = {"workload": "workload", "cache": "cache"}
    if prefix[0] in kinds:
        return kinds[prefix[0]]
    if key.startswith("exporter.checks."):
        return "checks" if known.exporters else "context"
    if key == "exporter.topology.interconnect" or (key.startswith("exporter.gpus.") and leaf in GPU_FACTS):
        return "gpu" if known.exporters else "context"
    return "context"


def _flat(manifest: Manifest) -> dict[str, Any]:
    """Dotted keys of the record; the exporter's engines keyed by identity, never by list position
    (`exporter.engines[served].args.max_num_seqs`, `exporter.engines[sglang@127.0.0.1:30000].model`)."""
    raw = dict(manifest.raw)
    if manifest.exporter.present:
        raw["exporter"] = {k: v for k, v in manifest.exporter_raw().items() if k != "engines"}
    flat = flatten(raw)
    for identity, engine in manifest.watched_engines().items():
        flat.update(flatten(dict(engine.raw), f"exporter.engines[{identity}]"))
    gpus = manifest.exporter_raw().get("gpus")
    if isinstance(gpus, list):
        flat["exporter.gpus.count"] = len(gpus)
    return flat


def _missing_engines(flat: dict[str, Any], here: Manifest, there: Manifest) -> None:
    """An engine only `there`'s exporter watched is one `missing` key here, and one summary key
    there (not a row per key it has)."""
    theirs = there.watched_engines()
    for identity in theirs.keys() - here.watched_engines().keys():
        flat[f"exporter.engines[{identity}]"] = MISSING


def _present_engines(flat: dict[str, Any], here: Manifest, there: Manifest) -> None:
    gone = here.watched_engines().keys() - there.watched_engines().keys()
    for identity in gone:
        prefix = f"exporter.engines[{identity}]"
        for key in [k for k in flat if k.startswith(prefix + ".")]:
            del flat[key]
        engine = here.watched_engines()[identity]
        flat[prefix] = " ".join(p for p in (engine.engine, engine.version, engine.url) if p) or "watched"


def flat_pair(ma: Manifest, mb: Manifest) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both records' dotted keys; with an exporter on both sides, an engine only one watched is one
    row (`... vs missing`)."""
    flat_a, flat_b = _flat(ma), _flat(mb)
    if ma.exporter.present and mb.exporter.present:
        _present_engines(flat_a, ma, mb)
        _present_engines(flat_b, mb, ma)
        _missing_engines(flat_a, ma, mb)
        _missing_engines(flat_b, mb, ma)
    return flat_a, flat_b


def keyed_rows(manifest_a: Manifest, manifest_b: Manifest, fa: RunFacts, fb: RunFacts) -> list[Difference]:
    """Workload, cache, GPU and check rows, then one context row per group of raw keys."""
    flat_a, flat_b = flat_pair(manifest_a, manifest_b)
    known = _Known(
        params=frozenset(n for n in NEUTRAL_PARAMS if (fa.params.get(n), fb.params.get(n)) != (None, None)),
        workload=frozenset(_leaf(k) for k in (*flat_a, *flat_b) if k.startswith("workload.")),
        spellings=neutral_spellings(),
        exporters=manifest_a.exporter.present and manifest_b.exporter.present,
    )
    rows: list[Difference] = []
    context: list[Difference] = []
    for key in sorted(set(flat_a) | set(flat_b)):
        a, b = flat_a.get(key), flat_b.get(key)
        kind = _kind(key, known)
        if kind is None or same(a, b):
            continue
        diff = Difference(key, a, b, _score(key, a, b), kind)
        (context if kind == "context" else rows).append(diff)
    return rows + context_rows(context)


def _recorded(value: Any) -> bool:
    return value not in (None, {}, [], MISSING)


def context_rows(raw: Iterable[Difference]) -> list[Difference]:
    """One row per context group: `a` / `b` count the group's differing keys each run has set."""
    groups: dict[str, list[Difference]] = {}
    for diff in raw:
        groups.setdefault(context_group(diff.key)[0], []).append(diff)
    return [
        Difference(
            prefix,
            sum(_recorded(d.a) for d in members),
            sum(_recorded(d.b) for d in members),
            context_group(prefix)[1],
            "context",
            tuple(sorted(members, key=lambda d: (-d.score, d.key))),
        )
        for prefix, members in groups.items()
    ]
