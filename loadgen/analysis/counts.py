"""Change points of a count metric (errors out of requests), checked after each run like
`changepoint`: a persistent rise of the share, significant by an exact count test, not a t-test on
per-run rates (which drops the zero-error runs as missing and cannot see a rise from zero).

The test, for each candidate `i` among the last `max_after` runs of the current regime (at least
`min_before` runs before it, at most `max_before` compared): the errors and requests of the runs since
`i` against those of the regime before it, Fisher's exact test, one-sided (`scipy.stats.fisher_exact`,
alternative "greater": the share after is higher), p < `alpha`. Runs are not independent draws of one
binomial (a run with a burst of timeouts is common), so the same test without the run with the most
errors after `i` must still give p < `loo_alpha`, and the share after must exceed the share before by
at least `MIN_DELTA` (absolute) and by `min_relative` (relative). At least `min_after` runs after `i`
must each read more than `MIN_DELTA / 2` beyond the share before (strong counts in two runs do not
carry a run of the old share into the new level).
Runs also vary more than binomial draws would (the error share itself moves between runs): the counts
are scaled by the regime's dispersion before the test (quasi-binomial: Pearson's chi-square of its
runs about the pooled share over its degrees of freedom, at least 1), so an overdispersed series needs
a larger rise. Of the candidates passing all, the change is placed at the one with the highest share
after it; a confirmed change starts a new regime. Only rises are alarmed on: a fall is a new regime
when it passes the same test the other way (at `improvement_alpha`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from loadgen.analysis.changepoint import Change, DetectorSettings

MIN_DELTA = 0.002  # an error share that rises by less than 0.2 points is not reported


@dataclass(frozen=True)
class Counts:
    """Per run: events (errors) out of trials (requests); runs without trials are left out."""

    events: Sequence[int]
    trials: Sequence[int]


def dispersion(events: Sequence[int], trials: Sequence[int]) -> float:
    """Pearson's chi-square of the runs about their pooled share over its degrees of freedom (>= 1):
    how many times the binomial variance the runs spread by."""
    total_e, total_n = sum(events), sum(trials)
    if len(events) < 2 or total_e == 0 or total_e == total_n:
        return 1.0
    share = total_e / total_n
    chi2 = sum((e - n * share) ** 2 / (n * share * (1 - share)) for e, n in zip(events, trials, strict=True))
    return max(chi2 / (len(events) - 1), 1.0)


def _p(e_after: int, n_after: int, e_before: int, n_before: int, up: bool, phi: float = 1.0) -> float:
    """One-sided Fisher's exact p of the after share against the before share, counts divided by phi."""
    e_a, n_a, e_b, n_b = (round(x / phi) for x in (e_after, n_after, e_before, n_before))
    table = [[e_a, n_a - e_a], [e_b, n_b - e_b]]
    return float(stats.fisher_exact(table, alternative="greater" if up else "less").pvalue)


@dataclass(frozen=True)
class _Candidate:
    index: int
    p: float
    before: float
    after: float


def _test(
    events: list[int], trials: list[int], start: int, split: int, end: int, up: bool, s: DetectorSettings
) -> _Candidate | None:
    lo = max(start, split - s.max_before)
    e_b, n_b = sum(events[lo:split]), sum(trials[lo:split])
    after_e, after_n = events[split:end], trials[split:end]
    e_a, n_a = sum(after_e), sum(after_n)
    before, after = e_b / n_b, e_a / n_a
    delta = after - before if up else before - after
    if delta < MIN_DELTA or delta < s.min_relative * max(before, after):
        return None
    shares = [e / n - before if up else before - e / n for e, n in zip(after_e, after_n, strict=True)]
    moved = sum(share > MIN_DELTA / 2 for share in shares)
    if moved < s.min_after:  # min_after runs at the new share, not strong counts carrying an old run
        return None
    phi = dispersion(events[lo:split], trials[lo:split])
    p = _p(e_a, n_a, e_b, n_b, up, phi)
    if p >= (s.alpha if up else s.improvement_alpha):
        return None
    worst = max(range(len(after_e)), key=lambda k: after_e[k] if up else -after_e[k])
    e_r, n_r = e_a - after_e[worst], n_a - after_n[worst]
    if n_r <= 0 or _p(e_r, n_r, e_b, n_b, up, phi) >= s.loo_alpha:
        return None
    return _Candidate(split, p, before, after)


def _best(
    events: list[int], trials: list[int], start: int, end: int, up: bool, s: DetectorSettings
) -> _Candidate | None:
    splits = range(max(start + s.min_before, end - s.max_after), end - s.min_after + 1)
    found = [c for i in splits if (c := _test(events, trials, start, i, end, up, s)) is not None]
    # the first run of the new level: the passing split with the highest share after it (an earlier
    # split that takes in runs of the old level dilutes it, though more runs may give it a smaller p)
    return max(found, key=lambda c: (c.after if up else -c.after, -c.p)) if found else None


def count_raised(counts: Counts, settings: DetectorSettings | None = None) -> list[Change]:
    """Every change of the share events/trials as a check after each run raised it (oldest first);
    `before_median` / `after_median` are the pooled shares. Indexes are those of `counts`."""
    s = settings or DetectorSettings()
    kept = [i for i, n in enumerate(counts.trials) if n and n > 0]
    events = [int(counts.events[i]) for i in kept]
    trials = [int(counts.trials[i]) for i in kept]
    start, out = 0, []
    for end in range(s.min_before + s.min_after, len(kept) + 1):
        for up in (True, False):
            found = _best(events, trials, start, end, up, s)
            if found is None:
                continue
            if up:
                out.append(
                    Change(
                        kept[found.index],
                        kept[end - 1],
                        found.before,
                        found.after,
                        found.p,
                        True,
                        "confirmed",
                    )
                )
            start = found.index
            break
    return out


def count_changes(counts: Counts, settings: DetectorSettings | None = None) -> list[Change]:
    """The confirmed rises as they stand (a count change is never revised: the same as raised)."""
    return count_raised(counts, settings)
