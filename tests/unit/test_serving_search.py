"""--find-max-rate: the sizing formula, the verdict, the bracket-and-bisect sequence on a fake
server, the budget as a hard bound on a fake clock, Ctrl-C's cut point, the options and the plot."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy import stats

from flowrate.config.serve import ServeConfig
from flowrate.config.values import BadValue, to_seconds
from flowrate.errors import ConfigError
from flowrate.results.serving_search import search_from
from flowrate.serving import capacity
from flowrate.serving.search import (
    BUDGET,
    INTERRUPTED,
    RESOLUTION,
    Measured,
    SearchSettings,
    find_max_rate,
    next_rate,
    requests_needed,
    upper_rank,
    verdict,
)


@pytest.mark.parametrize(
    ("q", "c", "n"),
    [(0.99, 0.95, 299), (0.99, 0.975, 368), (0.99, 0.90, 230), (0.95, 0.95, 59), (0.90, 0.90, 22)],
)
def test_a_point_sends_the_fewest_requests_whose_percentile_has_an_upper_bound(
    q: float, c: float, n: int
) -> None:
    # n = ceil(ln(1 - c) / ln(q)): the smallest n with 1 - q^n >= c
    assert requests_needed(q, c) == n == math.ceil(math.log(1 - c) / math.log(q))
    assert 1 - q**n >= c > 1 - q ** (n - 1)
    assert upper_rank(n, q, c) == n and upper_rank(n - 1, q, c) is None  # the bound is the maximum


def test_the_upper_bound_is_the_lowest_order_statistic_with_the_confidence() -> None:
    k = upper_rank(1000, 0.99, 0.95)
    assert k == 996  # P(Binomial(1000, 0.99) <= k - 1) >= 0.95, and not for k - 1
    assert stats.binom.cdf(k - 1, 1000, 0.99) >= 0.95 > stats.binom.cdf(k - 2, 1000, 0.99)


def test_a_point_passes_only_when_the_bound_is_within_the_limit() -> None:
    slo = {"ttft_ms": 100.0}
    values = [float(v) for v in range(1, 22)]  # 21 requests; p90 at 90% needs 22
    state, figures = verdict({"ttft_ms": [*values, 50.0]}, slo, 0.9, 0.9)
    assert state == "pass" and figures["ttft_ms"] == {
        "n": 22,
        "quantile": 20.0,
        "upper": 50.0,
    }  # X_(ceil(19.8))
    assert verdict({"ttft_ms": [*values, 150.0]}, slo, 0.9, 0.9)[0] == "undecided"  # bound above
    assert verdict({"ttft_ms": values}, slo, 0.9, 0.9) == (
        "undecided",
        {"ttft_ms": {"n": 21, "quantile": 19.0, "upper": None}},  # X_(ceil(0.9 * 21)); no bound
    )
    state, figures = verdict({"ttft_ms": [*values, math.inf, math.inf, math.inf]}, slo, 0.9, 0.9)
    assert state == "fail" and figures["ttft_ms"]["quantile"] is None  # failed requests: infinite
    assert verdict({}, slo, 0.9, 0.9)[0] == "fail"


def test_next_rate_doubles_halves_then_bisects_to_the_resolution() -> None:
    assert next_rate(4.0, None, 0.05) == 8.0
    assert next_rate(None, 4.0, 0.05) == 2.0
    assert next_rate(4.0, 8.0, 0.05) == 6.0
    assert next_rate(9.6, 10.0, 0.05) is None  # 0.4 <= 0.05 x 10


class FakeServer:
    """A server whose percentile latency is 10 ms x rate, exactly, and a clock that each point
    advances by its sends (n / rate) and its drain."""

    def __init__(self, drain_s: float = 1.0, cut_at: int | None = None) -> None:
        self.now, self.drain_s, self.cut_at = 0.0, drain_s, cut_at
        self.tried: list[float] = []
        self.left: list[float] = []

    def clock(self) -> float:
        return self.now

    def measure(self, rate: float, left_s: float) -> Measured:
        self.tried.append(rate)
        self.left.append(left_s)
        self.now += 22 / rate + self.drain_s
        if self.cut_at == len(self.tried):
            return Measured({}, 0.0, INTERRUPTED, {"completed": 5})
        return Measured({"ttft_ms": [10 * rate] * 22}, self.drain_s, None, {"completed": 22})


def _settings(**extra: Any) -> SearchSettings:
    base: dict[str, Any] = dict(
        start_rate=1.0, slo={"ttft_ms": 100.0}, percentile=0.9, confidence=0.9, resolution=0.05
    )
    return SearchSettings(**{**base, "budget_s": 1000.0, **extra})


def test_the_search_brackets_by_doubling_then_bisects_to_the_resolution() -> None:
    server = FakeServer()
    search = find_max_rate(server.measure, _settings(), server.clock)
    # pass 1, 2, 4, 8; fail 16; bisect [8, 16]: 12 fail, 10 pass (10 ms x 10 = the limit), 11 fail,
    # then [10, 11] is within 5% of 11
    assert server.tried == [1.0, 2.0, 4.0, 8.0, 16.0, 12.0, 10.0, 11.0, 10.5]
    assert [p["verdict"] for p in search.points] == ["pass"] * 4 + ["fail", "fail", "pass", "fail", "fail"]
    assert search.max_rate == 10.0 and search.stopped == RESOLUTION
    assert search.points[6]["latency_ms"]["ttft_ms"] == {"n": 22, "quantile": 100.0, "upper": 100.0}
    assert not any(p["partial"] for p in search.points)


def test_a_failing_start_is_halved() -> None:
    server = FakeServer()
    search = find_max_rate(server.measure, _settings(start_rate=40.0), server.clock)
    assert server.tried[:3] == [40.0, 20.0, 10.0] and server.tried[3] == 15.0
    assert search.max_rate is not None and 9.5 <= search.max_rate <= 10.0


def test_no_point_starts_that_the_budget_cannot_fit() -> None:
    # points cost 22 / rate + 1 s: 23 s at 1 req/s, 12 at 2, 6.5 at 4, 3.75 at 8, ...
    # estimated with the drain the last pass saw (1 s; the first with 0.1 s, the limit)
    server = FakeServer()
    search = find_max_rate(server.measure, _settings(budget_s=40.0), server.clock)
    assert server.tried == [1.0, 2.0]  # 35 s spent; 4 req/s would take 6.5 s, 5 s are left
    assert search.stopped == BUDGET and search.max_rate == 2.0
    assert server.left == [40.0, 17.0]  # each point is told where the budget ends
    assert search.spent_s == 35.0  # within the 40 s budget


def test_a_cut_point_stops_the_whole_search_and_is_kept_partial_without_a_verdict() -> None:
    server = FakeServer(cut_at=3)
    search = find_max_rate(server.measure, _settings(), server.clock)
    assert server.tried == [1.0, 2.0, 4.0] and search.stopped == INTERRUPTED
    assert search.points[-1] == {
        "rate": 4.0,
        "partial": True,
        "completed": 5,
        "verdict": None,
        "cut": INTERRUPTED,
    }
    assert search.max_rate == 2.0  # from the points measured whole


def _flags(**extra: Any) -> ServeConfig:
    return ServeConfig(**{"url": "http://127.0.0.1:9", "model": "m", "find_max_rate": True, **extra})


def test_the_plan_is_said_before_sending_and_a_budget_too_small_is_refused() -> None:
    settings = capacity.settings_from(_flags(budget=180.0), 10.0, {"ttft_ms": 500.0})
    assert settings is not None and settings.requests == 299 and settings.budget_s == 180.0
    lines = capacity.plan_lines(settings)
    assert "299 requests a point" in lines[1] and "ceil(ln(1 - 0.95) / ln(0.99))" in lines[1]
    assert "bisecting to 5% (about 4 points once bracketed)" in lines[2]
    assert "the first about 30 s" in lines[3] and "budget 3 min 00 s" in lines[3]
    with pytest.raises(ConfigError, match="cannot fit the first point: 299 requests at 1 req/s"):
        capacity.settings_from(_flags(budget=180.0), 1.0, {"ttft_ms": 500.0})
    with pytest.raises(ConfigError, match="finite rate"):
        capacity.settings_from(_flags(), math.inf, {"ttft_ms": 500.0})
    with pytest.raises(ConfigError, match="only with --find-max-rate") as refused:
        capacity.settings_from(_flags(find_max_rate=False, confidence=0.9), 1.0, None)
    assert refused.value.field == "--confidence"
    assert capacity.settings_from(_flags(find_max_rate=False), 1.0, None) is None


def test_durations_read_as_people_write_them() -> None:
    assert [to_seconds(v) for v in ("3m", "3 min", "90s", "90", "1.5h", " 2H ")] == [
        180.0,
        180.0,
        90.0,
        90.0,
        5400.0,
        7200.0,
    ]
    for bad in ("0", "0m", "nan", "inf", "-1m", "3 parsecs", "", "1e999"):
        with pytest.raises(BadValue, match="a duration above 0"):
            to_seconds(bad)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--budget", "0"), "--budget"),
        (("--budget", "nan"), "--budget"),
        (("--budget", "3 parsecs"), "--budget"),
        (("--confidence", "nan"), "--confidence"),
        (("--slo-percentile", "100"), "--slo-percentile"),
        (("--resolution", "0"), "--resolution"),
    ],
)
def test_bad_search_options_are_one_line_naming_the_flag(run_cli, args: tuple[str, ...], flag: str) -> None:  # type: ignore[no-untyped-def]
    base = ("serve-bench", "--url", "http://127.0.0.1:9", "--model", "m", "--rate", "5", "--no-store")
    result = run_cli(*base, "--find-max-rate", "--slo", "ttft_ms=500", *args)
    assert result.code == 2 and flag in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def _point(rate: float, quantile: float | None, achieved: float, partial: bool = False) -> dict[str, Any]:
    if partial:
        return {"rate": rate, "partial": True, "verdict": None, "cut": INTERRUPTED, "request_throughput": 0.5}
    figures = {
        "ttft_ms": {"n": 22, "quantile": quantile, "upper": None if quantile is None else quantile + 5}
    }
    return {
        "rate": rate,
        "partial": False,
        "verdict": "pass",
        "latency_ms": figures,
        "request_throughput": achieved,
    }


def test_the_curve_leaves_out_cut_points_and_reads_searches_stored_with_p99s() -> None:
    from flowrate.analysis.plots_serving import search_curve

    points = [_point(4, 40, 3.9), _point(2, 20, 2.1), _point(8, None, 6.0), _point(6, 1, 0, True)]
    search = search_from({"points": points})
    assert search_curve(search, "ttft_ms") == [(2.1, 20.0, 25.0), (3.9, 40.0, 45.0)]
    old = search_from(
        {"points": [{"rate": 2.0, "verdict": "pass", "p99": {"ttft_ms": 12.0}}], "max_rate": 2.0}
    )
    assert search_curve(old, "ttft_ms") == [(2.0, 12.0, None)]


def test_the_table_says_each_point_and_reads_searches_stored_with_p99s() -> None:
    from flowrate.cli.serve_bench_text import search_rows

    new = search_from(
        {
            "points": [_point(4, 40, 3.9), _point(8, 1, 0, True)],
            "max_rate": 4.0,
            "stopped": INTERRUPTED,
            "spent_s": 12.3,
        }
    )
    assert search_rows(new) == [
        ("4 req/s", "pass: ttft_ms 40.00 ms (bound 45.00); 3.9 req/s achieved"),
        ("8 req/s", "cut (interrupted): partial, not measured; 0 requests done"),
        ("max rate meeting the SLO", "4 req/s (stopped: interrupted, 12 s)"),
    ]
    old = search_from(
        {"points": [{"rate": 2.0, "verdict": "pass", "p99": {"ttft_ms": 12.0}}], "max_rate": None}
    )
    assert search_rows(old) == [
        ("2 req/s", "pass: p99 ttft_ms 12.00"),
        ("max rate meeting the SLO", "none found"),
    ]


def test_a_search_runs_table_ends_with_its_points_and_the_rate_found() -> None:
    """serve-bench and `flowrate show` print one table: the headline figures, then the search."""
    import dataclasses

    from flowrate.cli.serve_bench_text import rows
    from flowrate.results.serving import RequestTrace
    from flowrate.serving.result import serving_section

    failed = RequestTrace(0, 0.0, max_tokens=2, error="HTTP 500")
    section = serving_section([failed], None, {"model": "tiny"}, False)
    search = search_from({"points": [_point(4, 40, 3.9)], "max_rate": 4.0})
    table = rows(dataclasses.replace(section, search=search))
    assert table[0] == ("requests", "1 sent, 0 completed")
    assert table[-2:] == [
        ("4 req/s", "pass: ttft_ms 40.00 ms (bound 45.00); 3.9 req/s achieved"),
        ("max rate meeting the SLO", "4 req/s"),
    ]
    assert not any(label == "max rate meeting the SLO" for label, _ in rows(section))
