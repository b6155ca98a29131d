"""How a serve-bench load ends (serving.load_test): the verdict that sets the exit code, from
sections built of hand-made traces whose outcomes are known."""

from __future__ import annotations

import dataclasses

from flowrate.results.serving import Chunk, RequestTrace, Serving
from flowrate.results.serving_search import RateSearch
from flowrate.serving.load_test import failure, load_failure
from flowrate.serving.result import serving_section


def _trace(index: int, error: str | None) -> RequestTrace:
    """A request sent at ``index`` s: answered with 2 tokens, or failed with ``error``."""
    trace = RequestTrace(index, float(index), sent_s=float(index), max_tokens=2, status=200, error=error)
    if error is None:
        trace.chunks = [Chunk(index + 0.1, "a", 1), Chunk(index + 0.2, "b", 1)]
        trace.output_tokens = 2
    trace.end_s = index + 0.2
    return trace


def _section(*errors: str | None) -> Serving:
    return serving_section([_trace(i, e) for i, e in enumerate(errors)], None, {"model": "tiny"}, False)


def test_a_load_fails_when_more_requests_failed_than_max_error_rate_allows() -> None:
    section = _section(None, None, None, "HTTP 500")  # 1 of 4 failed: 25%
    assert failure(section, 0.25) is None
    assert failure(section, 0.2) == (
        "25.0% of requests failed (HTTP 500 x1), above --max-error-rate 20.0%; the run is recorded"
    )


def test_a_load_with_no_completed_request_fails_and_a_shed_one_says_so() -> None:
    assert failure(_section("HTTP 500", "HTTP 500"), 1.0) == (
        "no request completed (HTTP 500 x2); the run is recorded with its traces"
    )
    shed = _section("shed by the server (HTTP 429)", "shed by the server (HTTP 503)")
    assert failure(shed, 1.0) == (
        "the server shed the load: all 2 requests were answered HTTP 429/503 "
        "(shed by the server (HTTP 429) x1, shed by the server (HTTP 503) x1); "
        "lower --rate or --concurrency; the run is recorded"
    )


def test_a_rate_search_fails_only_when_no_rate_met_the_slo() -> None:
    section = _section("HTTP 500", "HTTP 500")  # its points count failed requests as missing the SLO
    none_met = dataclasses.replace(section, search=RateSearch(max_rate=None, stopped="budget"))
    assert load_failure(none_met, 0.0) == "no rate met the SLO (budget); every point is recorded"
    found = dataclasses.replace(section, search=RateSearch(max_rate=2.0, stopped="resolution"))
    assert load_failure(found, 0.0) is None
    assert load_failure(section, 0.0) == failure(section, 0.0)  # one load: failure() decides
