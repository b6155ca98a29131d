"""flowrate.analysis.history.history: which series `flowrate history` shows, which it leaves out,
and which drops fail its gate, on hand-made runs with chosen commits and times."""

from __future__ import annotations

import pytest

import factories
from flowrate.analysis.history import history
from flowrate.errors import FlowrateError
from flowrate.results.schema import Result


def run(rate: float, run_id: str, commit: int, *, batch_size: int = 8) -> Result:
    return factories.make_result(
        interval_rates=[rate] * 3,
        run_id=run_id,
        batch_size=batch_size,
        created_at=f"2026-11-20T{commit:02d}:00:00+00:00",
        environment={"flowrate": {"version": "0.1.0", "commit": f"c{commit:02d}" + "0" * 37, "dirty": False}},
    )


# six commits at 1000 samples/s, then six at 900: a 10% drop not recovered from
DROPPED = [run(1000.0 if i < 6 else 900.0, f"r{i:02d}", i) for i in range(12)]
ONE_POINT = run(500.0, "other", 0, batch_size=16)


def test_series_of_one_point_are_left_out_and_steps_are_fitted_only_when_asked() -> None:
    plain = history([*DROPPED, ONE_POINT])
    assert [len(s.points) for s in plain.series] == [12]
    assert [s.points[0].label for s in plain.left_out] == ["c000000000"]
    assert plain.series[0].fit is None and plain.regressions == []
    (fitted,) = history(DROPPED, detect=True).series
    assert fitted.fit is not None and [s.index for s in fitted.fit.steps] == [6]


def test_a_drop_over_max_drop_is_a_regression_and_one_under_it_is_not() -> None:
    gated = history(DROPPED, max_drop=0.05)
    assert [(s.title, k) for s, k in gated.regressions] == [(gated.series[0].title, 0)]
    assert gated.series[0].fit is not None  # the gate fits the steps without detect
    assert history(DROPPED, max_drop=0.15).regressions == []


def test_runs_that_make_no_series_of_two_points_are_refused_naming_the_point() -> None:
    with pytest.raises(FlowrateError, match=r"make one \(c000000000\)"):
        history([ONE_POINT])
