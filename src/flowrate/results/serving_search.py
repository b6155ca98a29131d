"""The serving section's ``search`` (`flowrate serve-bench --find-max-rate`): the settings the rate
search ran under, every point it sent with its verdict, and the highest rate that met the SLO.

Each part is an open section (flowrate.results.codec): the keys readers read are named, any other
key a record holds is kept in ``extra``, and each is written again with the keys it was read
with, in their order. A key a record lacks reads as None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowrate.results.codec import decode


@dataclass(frozen=True)
class Bounded:
    """One SLO'd latency at one point (ms): the requests counted, the percentile measured and its
    distribution-free upper bound (None: a failed request's, or too few requests for a bound)."""

    n: int | None = None
    quantile: float | None = None
    upper: float | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SearchPoint:
    """One rate the search sent: its verdict (pass, fail or undecided; None for a cut point, with
    why it was cut), each SLO'd latency, and what the requests achieved."""

    rate: float | None = None  # offered requests/s
    partial: bool | None = None
    verdict: str | None = None
    cut: str | None = None
    latency_ms: dict[str, Bounded] | None = None  # by SLO key
    p99: dict[str, float] | None = None  # a search stored before latency_ms: the p99s only
    requests: int | None = None
    completed: int | None = None
    errors: int | None = None
    duration_s: float | None = None
    request_throughput: float | None = None  # achieved requests/s
    output_token_throughput: float | None = None
    # its requests' traces stay in extra, as they were written (no reader reads them from a record)
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class RateSearch:
    """--find-max-rate: the highest rate that passed (None: none did), the rule and settings it was
    judged by, why it stopped, and every point; ``headline_point`` indexes the point the record's
    figures are of."""

    max_rate: float | None = None
    percentile: float | None = None  # in percent
    confidence: float | None = None
    requests_per_point: int | None = None
    resolution: float | None = None
    budget_s: float | None = None
    spent_s: float | None = None
    stopped: str | None = None
    rule: str | None = None
    headline_point: int | None = None
    points: list[SearchPoint] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


def search_from(data: Mapping[str, Any]) -> RateSearch:
    """The search from its plain values (flowrate.serving.capacity's, a record's)."""
    return decode(RateSearch, data)
