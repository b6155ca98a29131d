"""A sweep of loads (serving.sweep) on a fake runner and a fake clock: the loads in order, the
budget, Ctrl-C, the SLO verdicts, the loads checked before anything is sent, and the table."""

from __future__ import annotations

import math
from typing import Any

import pytest

from flowrate.cli.serve_bench_text import curve_table
from flowrate.errors import ConfigError
from flowrate.results.serving import Serving, serving_from
from flowrate.results.serving_curve import Load, Percentiles
from flowrate.serving.search import BUDGET, INTERRUPTED, Measured
from flowrate.serving.sweep import (
    DONE,
    Point,
    Verdicts,
    curve_point,
    loads_from,
    run_sweep,
)


class FakeRunner:
    """Each point takes ``point_s`` on the fake clock; its TTFTs are ``ttft[load]`` ms."""

    def __init__(self, clock: list[float], ttft: dict[str, list[float]], point_s: float = 10.0) -> None:
        self.clock, self.ttft, self.point_s = clock, ttft, point_s
        self.deadline_s = 3600.0
        self.sent: list[tuple[float | None, int | None, float]] = []
        self.interrupt_at: int | None = None  # a Ctrl-C between points, before this one
        self.cut_at: int | None = None  # a Ctrl-C inside this point

    def measure_at(self, rate: float | None, concurrency: int | None, left_s: float) -> Measured:
        if self.interrupt_at == len(self.sent):
            raise KeyboardInterrupt
        self.sent.append((rate, concurrency, left_s))
        self.clock[0] += self.point_s
        label = Load(rate, concurrency).label
        if self.cut_at == len(self.sent) - 1:
            return Measured({}, 0.0, INTERRUPTED)
        return Measured({"ttft_ms": self.ttft[label]}, 0.1)


def _sweep(runner: FakeRunner, loads: list[Load], **kwargs: Any) -> Any:
    return run_sweep(
        runner, loads, started=0.0, say=lambda line: None, clock=lambda: runner.clock[0], **kwargs
    )  # type: ignore[arg-type]


RATES = [Load(rate=1.0), Load(rate=2.0), Load(rate=4.0)]
TTFT = {"1 req/s": [10.0] * 30, "2 req/s": [20.0] * 30, "4 req/s": [20.0] * 29 + [900.0]}


def test_each_load_is_sent_in_order_and_held_to_the_slo() -> None:
    runner = FakeRunner([0.0], TTFT)
    done = _sweep(runner, RATES, budget_s=None, verdicts=Verdicts({"ttft_ms": 100.0}, 0.9, 0.9))
    assert [(rate, c) for rate, c, _ in runner.sent] == [(1.0, None), (2.0, None), (4.0, None)]
    assert all(left == math.inf for _, _, left in runner.sent)  # no budget: --deadline bounds each
    assert done.stopped == DONE
    # p90 of 30: X_(27); its 90% upper bound X_(30): 900 ms at 4 req/s is above 100
    assert [p.verdict for p in done.points] == ["pass", "pass", "undecided"]
    assert done.points[0].latency_ms["ttft_ms"] == {"n": 30, "quantile": 10.0, "upper": 10.0}


def test_no_point_starts_once_the_budget_is_spent_and_the_last_is_cut_at_its_end() -> None:
    runner = FakeRunner([0.0], TTFT)
    done = _sweep(runner, RATES, budget_s=23.0)  # 3 s of it kept for the record: 20 s for points
    assert [left for _, _, left in runner.sent] == [20.0, 10.0]
    assert done.stopped == BUDGET and [p.load for p in done.points] == RATES[:2]
    assert all(p.verdict is None for p in done.points)  # no --slo: no verdict


def test_ctrl_c_stops_the_whole_sweep_keeping_the_points_measured() -> None:
    runner = FakeRunner([0.0], TTFT)
    runner.cut_at = 1  # inside the second point
    done = _sweep(runner, RATES, budget_s=None, verdicts=Verdicts({"ttft_ms": 100.0}))
    assert done.stopped == INTERRUPTED and len(runner.sent) == 2
    assert [p.cut for p in done.points] == [None, INTERRUPTED]
    assert [p.verdict for p in done.points] == ["undecided", None]  # 30 requests bound no p99
    between = FakeRunner([0.0], TTFT)
    between.interrupt_at = 2  # after the second point, before the third
    done = _sweep(between, RATES, budget_s=None)
    assert done.stopped == INTERRUPTED and [p.cut for p in done.points] == [None, None]


@pytest.mark.parametrize(
    ("rates", "concurrencies", "says"),
    [
        ((1.0, math.nan), None, "not nan"),
        ((1.0, math.inf), None, "finite numbers above 0, not inf"),
        ((1.0, 0.0), None, "finite numbers above 0, not 0"),
        ((1.0, 2.0, 1.0), None, "1 is given twice"),
        (None, (1, 4, 4), "4 is given twice"),
        (None, (4, 0), "integers from 1"),
    ],
)
def test_every_load_is_checked_before_the_first_request(
    rates: tuple[float, ...] | None, concurrencies: tuple[int, ...] | None, says: str
) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        loads_from(rates, concurrencies)
    assert caught.value.field == ("--rate" if rates else "--concurrency")


def test_one_load_is_no_sweep_and_a_list_keeps_its_order() -> None:
    assert (
        loads_from((2.0,), None) is None and loads_from(None, (4,)) is None and loads_from(None, None) is None
    )
    assert loads_from(None, (16, 1, 4)) == [Load(concurrency=16), Load(concurrency=1), Load(concurrency=4)]


def _section(rate: float, ttft_p50: float) -> Serving:
    def stats(p50: float) -> dict[str, float]:
        return {"median": p50, "p99": 2 * p50}

    ours = {
        "completed": 9,
        "request_throughput": rate * 0.9,
        "output_token_throughput": rate * 90,
        "ttft_ms": stats(ttft_p50),
        "tpot_ms": stats(5.0),
        "e2e_ms": None,
    }
    return serving_from({"requests": 10, "metrics": {"flowrate": ours}})


def test_the_curve_table_has_a_row_a_load() -> None:
    whole = Point(Load(rate=1.0), Measured({}, 0.0), "pass")
    slow = Point(Load(rate=4.0), Measured({}, 0.0), "fail")
    cut = Point(Load(rate=2.0), Measured({}, 0.0, INTERRUPTED))
    curve = [
        curve_point(p, _section(r, t))
        for p, r, t in ((whole, 1.0, 30.0), (cut, 2.0, 40.0), (slow, 4.0, 99.96))
    ]
    assert curve[0].latency_ms["ttft_ms"] == Percentiles(30.0, 60.0)
    assert curve[0].latency_ms["e2e_ms"] == Percentiles(None, None)
    assert not curve[0].partial and curve[1].partial
    header, rows = curve_table(curve, ["run1", "run2", "run3"])
    assert header[0] == "load" and header[-1] == "run"
    assert rows == [
        ["1 req/s", "0.900", "90.0", "30.0 / 60.0", "5.0 / 10.0", "— / —", "pass", "run1"],
        [
            "2 req/s",
            "1.800",
            "180.0",
            "40.0 / 80.0",
            "5.0 / 10.0",
            "— / —",
            "cut (interrupted): partial",
            "run2",
        ],
        ["4 req/s", "3.600", "360.0", "100.0 / 200", "5.0 / 10.0", "— / —", "fail", "run3"],
    ]


def test_a_load_test_that_sent_nothing_shows_its_rows_with_the_error_rate_empty() -> None:
    """Interrupted before the first request: no error rate to give, and the table still shows."""
    from flowrate.cli.serve_bench_text import rows

    shown = dict(rows(Serving()))
    assert shown["requests"] == "0 sent, 0 completed"
    assert shown["error rate"] == "—"
