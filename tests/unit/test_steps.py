"""The step detector (flowrate.analysis.steps) on exact series and on simulated ones.

Simulated series: 60 commits, one process each, lognormal noise of σ = 1%, and (half of the
trials) a 3% drop at a random commit. Seeds are fixed; the bounds are the acceptance criteria.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from flowrate.analysis.history import Point, Series, regressions, with_steps
from flowrate.analysis.steps import detect_steps

COMMITS, SIGMA, DROP, TRIALS = 60, 0.01, 0.03, 400


def series(rng: np.random.Generator, at: int | None) -> list[float]:
    noise = np.exp(rng.normal(0.0, SIGMA, COMMITS))
    level = np.where(np.arange(COMMITS) >= at, 1 - DROP, 1.0) if at is not None else 1.0
    return list(1000.0 * level * noise)


def test_a_three_percent_step_is_found_and_false_steps_are_rare() -> None:
    rng = np.random.default_rng(1616)
    found = false = 0
    for _ in range(TRIALS):
        at = int(rng.integers(5, COMMITS - 4))
        fit = detect_steps(series(rng, at))
        hit = [s for s in fit.steps if abs(s.index - at) <= 1 and s.relative < 0]
        found += bool(hit)
        false += len(fit.steps) - len(hit[:1])
    for _ in range(TRIALS):  # no step at all
        false += len(detect_steps(series(rng, None)).steps)
    assert found / TRIALS >= 0.95, f"found {found / TRIALS:.1%} of 3% steps (within one commit)"
    per_100 = false / (2 * TRIALS * COMMITS) * 100
    assert per_100 <= 1.0, f"{per_100:.2f} false steps per 100 commits"


def test_exact_steps_their_sizes_and_intervals() -> None:
    values = [100.0, 101.0, 99.0, 100.0, 100.5, 99.5, 90.0, 91.0, 89.0, 90.0, 90.5, 89.5]
    fit = detect_steps(values)
    assert fit.bounds == [(0, 6), (6, 12)]
    (step,) = fit.steps
    before = math.exp(np.mean(np.log(values[:6])))
    after = math.exp(np.mean(np.log(values[6:])))
    assert (step.index, step.before, step.after) == (6, pytest.approx(before), pytest.approx(after))
    assert step.relative == pytest.approx(after / before - 1)
    # the interval: the segments' means of logs ± 1.96 σ √(1/6 + 1/6)
    half = 1.959964 * fit.sigma * math.sqrt(2 / 6)
    d = math.log(after / before)
    assert (step.ci_low, step.ci_high) == pytest.approx((math.expm1(d - half), math.expm1(d + half)))
    assert step.ci_low < step.relative < step.ci_high < 0


def test_counts_weigh_points_and_a_flat_series_has_no_steps() -> None:
    assert detect_steps([100.0] * 10).steps == []
    # a noiseless series: every change is a step
    assert [s.index for s in detect_steps([100.0] * 5 + [97.0] * 5).steps] == [5]
    # one outlying point that is the mean of 1 process is not a step; made of 50 it weighs more
    values = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 103.0, 100.1, 99.9]
    assert detect_steps(values).steps == []
    heavy = detect_steps(values, [1] * 7 + [50] + [1] * 2)
    assert [s.index for s in heavy.steps] == [7, 8]


def test_bad_series() -> None:
    with pytest.raises(ValueError, match="2 points or more"):
        detect_steps([100.0])
    with pytest.raises(ValueError, match="finite and positive"):
        detect_steps([100.0, 0.0])
    with pytest.raises(ValueError, match="1 process or more"):
        detect_steps([100.0, 101.0], [1, 0])


def _series(levels: list[float]) -> Series:
    points = [
        Point(f"c{i}", f"c{i}", f"2026-11-20T{i:02d}:00:00", 1, v, [f"r{i}"]) for i, v in enumerate(levels)
    ]
    return with_steps(Series({"problem": "p"}, {}, {}, "commit", points))


def test_only_an_unrecovered_drop_is_a_regression() -> None:
    wobble = [1.0, 1.002, 0.998, 1.001, 0.999, 1.0]
    dropped = _series([1000 * w for w in wobble] + [900 * w for w in wobble])
    assert dropped.fit is not None and [s.index for s in dropped.fit.steps] == [6]
    assert regressions(dropped, 0.05) == [0] and regressions(dropped, 0.15) == []
    recovered = _series([1000 * w for w in wobble] + [900 * w for w in wobble] + [1000 * w for w in wobble])
    assert recovered.fit is not None and [s.index for s in recovered.fit.steps] == [6, 12]
    assert regressions(recovered, 0.05) == []
