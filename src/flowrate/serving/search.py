"""--find-max-rate: the highest arrival rate whose latency percentile meets the SLO, within a budget.

Sizing a point (distribution-free: order statistics and the binomial law). Of n latencies, the
k-th smallest X_(k) lies below the q-quantile ξ_q only when k or more of them do, so, whatever the
latency distribution, P(X_(k) ≥ ξ_q) ≥ P(B ≤ k − 1) with B ~ Binomial(n, q). X_(k) is an upper
confidence bound at level c for the smallest k with P(B ≤ k − 1) ≥ c, and a bound exists at all
(k ≤ n) once P(B ≤ n − 1) = 1 − qⁿ ≥ c, so each point sends

    n = ⌈ln(1 − c) / ln(q)⌉ requests     (p99 at 95%: 299; p99 at 90%: 230; p95 at 95%: 59)

(W. J. Conover, Practical Nonparametric Statistics, 3rd ed., Wiley 1999, §3.2, the confidence
interval for a quantile; G. J. Hahn and W. Q. Meeker, Statistical Intervals, Wiley 1991, §5.3,
the sample size for a distribution-free bound).

Deciding a point: each SLO'd latency's q-quantile is X_(⌈qn⌉); a failed request counts as an
infinite latency (it did not meet the SLO). The point passes when every upper bound is within its
limit (the data show the percentile meets the SLO with confidence c), fails when a quantile is
above its limit, and is undecided otherwise (a bound above, or none); undecided counts as a
failure, so the rate found is one the data show to meet the SLO, never one that met it by luck.

The search: double from the start rate while points pass, halve while none has, then bisect
between the highest pass and the lowest failure until high − low ≤ resolution × high. A point at
r requests/s takes about n / r s of sending plus a drain (the slowest request of the last passing
point; before one, the largest SLO limit); a point starts only when that estimate fits what is
left of the budget, and is cut at the budget's end (a hard bound, given to ``measure``). A cut
point (Ctrl-C or the budget) ends the search: it is kept, marked partial, with no verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scipy import stats

INTERRUPTED = "interrupted"  # Ctrl-C: the whole search stops
BUDGET = "budget"  # the next point would not fit, or a point ran to the budget's end
RESOLUTION = "resolution"  # high − low ≤ resolution × high
MAX_POINTS = "max points"


def requests_needed(q: float, c: float) -> int:
    """The fewest requests whose q-quantile has a distribution-free upper bound at level c:
    the smallest n with 1 − qⁿ ≥ c, i.e. ⌈ln(1 − c) / ln(q)⌉ (checked exactly against rounding)."""
    n = max(1, math.ceil(math.log1p(-c) / math.log(q)))
    while 1 - q**n < c:
        n += 1
    while n > 1 and 1 - q ** (n - 1) >= c:
        n -= 1
    return n


def upper_rank(n: int, q: float, c: float) -> int | None:
    """The 1-based rank k of the upper bound: the smallest k with P(Binomial(n, q) ≤ k − 1) ≥ c;
    None when even X_(n) is not one (n too small)."""
    k = int(stats.binom.ppf(c, n, q)) + 1
    while k > 1 and stats.binom.cdf(k - 2, n, q) >= c:
        k -= 1
    while k <= n and stats.binom.cdf(k - 1, n, q) < c:
        k += 1
    return k if k <= n else None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # None: a failed request's (infinite) latency


def verdict(
    samples: dict[str, list[float]], slo: dict[str, float], q: float, c: float
) -> tuple[str, dict[str, dict[str, Any]]]:
    """ "pass", "fail" or "undecided" (module docstring), and per SLO key the requests it counts
    (n), its quantile and its upper bound in ms (None: infinite, a failed request's, or no bound)."""
    state, figures = "pass", dict[str, dict[str, Any]]()
    for key, limit in slo.items():
        values = sorted(samples.get(key, []))
        if not values:
            figures[key] = {"n": 0, "quantile": None, "upper": None}
            state = "fail"
            continue
        n = len(values)
        quantile = values[max(1, math.ceil(q * n - 1e-9)) - 1]  # X_(⌈qn⌉), ⌈⌉ safe from 0.99 * 100
        rank = upper_rank(n, q, c)
        upper = values[rank - 1] if rank is not None else math.inf
        figures[key] = {"n": n, "quantile": _finite(quantile), "upper": _finite(upper)}
        if quantile > limit:
            state = "fail"
        elif upper > limit and state == "pass":
            state = "undecided"
    return state, figures


@dataclass(frozen=True)
class Measured:
    """One point as measured: each SLO'd latency of each request (ms; inf for a failed one)."""

    samples: dict[str, list[float]]
    slowest_s: float  # the slowest completed request's end-to-end time: the next drain's estimate
    cut: str | None = None  # INTERRUPTED or BUDGET: partial, no verdict
    record: dict[str, Any] = field(default_factory=dict)  # what the stored point also holds


@dataclass(frozen=True)
class SearchSettings:
    start_rate: float  # requests/s
    slo: dict[str, float]  # ms
    percentile: float = 0.99  # q
    confidence: float = 0.95  # c
    resolution: float = 0.05  # stop when high − low ≤ resolution × high
    budget_s: float = 600.0
    max_points: int = 24

    @property
    def requests(self) -> int:
        return requests_needed(self.percentile, self.confidence)

    def point_s(self, rate: float, drain_s: float) -> float:
        """The estimated seconds of a point at ``rate``: its sends, then the last one's drain."""
        return self.requests / rate + drain_s

    def first_drain_s(self) -> float:
        return max(self.slo.values()) / 1000

    def bisections(self) -> int:
        """Points after the bracket [r, 2r] is found until it is within the resolution."""
        return max(0, math.ceil(math.log2(1 / (2 * self.resolution))))


def next_rate(low: float | None, high: float | None, resolution: float) -> float | None:
    """After the highest pass ``low`` and the lowest failure ``high``: the next rate, or None
    when the bracket is within the resolution."""
    if high is None:
        assert low is not None
        return 2 * low
    if low is None:
        return high / 2
    if high - low <= resolution * high:
        return None
    return (low + high) / 2


@dataclass
class Search:
    max_rate: float | None = None  # the highest rate that passed; None: none did
    points: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = MAX_POINTS
    spent_s: float = 0.0


def find_max_rate(
    measure: Callable[[float, float], Measured],
    settings: SearchSettings,
    clock: Callable[[], float],
    say: Callable[[str], None] = lambda line: None,
    search: Search | None = None,
) -> Search:
    """Run the search, filling ``search`` (so a caller that catches Ctrl-C between points keeps
    them). ``measure(rate, seconds_left)`` sends one point and must stop by seconds_left (the
    budget's end); ``clock`` is seconds (the budget counts from its first read)."""
    start = clock()
    search = Search() if search is None else search
    low: float | None = None
    high: float | None = None
    rate, drain = settings.start_rate, settings.first_drain_s()
    while len(search.points) < settings.max_points:
        left = settings.budget_s - (clock() - start)
        estimate = settings.point_s(rate, drain)
        if estimate > left:
            left_s = max(left, 0)
            say(f"  stopped: a point at {rate:.4g} req/s takes about {estimate:.0f} s, {left_s:.0f} s left")
            search.stopped = BUDGET
            break
        measured = measure(rate, left)
        point: dict[str, Any] = {"rate": rate, "partial": measured.cut is not None, **measured.record}
        search.points.append(point)
        if measured.cut is not None:
            point.update(verdict=None, cut=measured.cut)
            search.stopped = measured.cut
            break
        state, figures = verdict(measured.samples, settings.slo, settings.percentile, settings.confidence)
        point.update(verdict=state, latency_ms=figures)
        say(f"  {rate:.4g} req/s: {state} ({_figures(figures)})")
        if state == "pass":
            low = rate if low is None else max(low, rate)
            drain = max(drain, measured.slowest_s)
            search.max_rate = low
        else:
            high = rate if high is None else min(high, rate)
        following = next_rate(low, high, settings.resolution)
        if following is None:
            search.stopped = RESOLUTION
            break
        rate = following
    search.spent_s = clock() - start
    return search


def _figures(figures: dict[str, dict[str, Any]]) -> str:
    def ms(value: float | None) -> str:
        return "∞" if value is None else f"{value:.1f}"

    return ", ".join(f"{k} {ms(f['quantile'])} ms, bound {ms(f['upper'])}" for k, f in figures.items())
