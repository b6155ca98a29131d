"""--find-max-rate: the highest arrival rate whose p99s meet the SLO, by bisection.

How a point is decided: its p99 (flowrate's definition) of each SLO'd latency is compared with the
limit together with its 95% distribution-free interval (serving.stats.quantile_ci). The point
passes when every interval lies at or below its limit, fails when any p99 is above, and is
"undecided" when an interval straddles a limit or does not exist (fewer than 368 requests: the
smallest n for which a p99's upper order-statistic bound exists) — undecided counts as a failure,
so the rate found is one the data show to meet the SLO, never one that met it by luck.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MIN_REQUESTS_FOR_P99 = 368  # 1 - 0.99**n >= 0.975
FLOOR = 16  # halving from a failing start stops below start_rate / FLOOR: "none found"


def verdict(summary: dict[str, Any], slo: dict[str, float]) -> tuple[str, dict[str, float]]:
    p99s: dict[str, float] = {}
    state = "pass"
    for key, limit in slo.items():
        stats = summary.get(key)
        if not stats:
            return "fail", p99s
        p99s[key] = stats["p99"]
        ci = stats.get("p99_ci")
        if stats["p99"] > limit:
            return "fail", p99s
        if ci is None or ci[1] > limit:
            state = "undecided"
    return state, p99s


def find_max_rate(
    measure: Callable[[float], dict[str, Any]],
    slo: dict[str, float],
    start_rate: float,
    max_points: int = 10,
    tolerance: float = 0.05,
) -> tuple[float | None, list[dict[str, Any]]]:
    """Double from start_rate until a point fails, then bisect between the last pass and the
    first failure until they are within `tolerance` of each other (at most max_points runs; a
    start that fails is halved down to start_rate / FLOOR).
    measure(rate) runs one point and returns flowrate's summary for it."""
    points: list[dict[str, Any]] = []
    best: float | None = None
    low, high, rate = 0.0, None, start_rate
    while len(points) < max_points:
        state, p99s = verdict(measure(rate), slo)
        points.append({"rate": rate, "verdict": state, "p99": p99s})
        if state == "pass":
            best, low = rate, rate
        else:
            high = rate
        if high is None:
            rate *= 2
        elif high - low <= tolerance * high or (low == 0 and rate < start_rate / FLOOR):
            break
        else:
            rate = (low + high) / 2 if low > 0 else high / 2
    return best, points
