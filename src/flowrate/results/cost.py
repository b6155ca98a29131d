"""What a run's throughput costs, at the user's prices (--price-per-hour, --energy-price).

With a machine price P per hour and an energy price E per kWh, one second of the timed run costs

    dollars_per_sec = P / 3600 + W × E / 3.6e6

W the measured average watts over the timed window (the energy term only where the energy was
measured). Then samples per dollar = samples/s ÷ dollars_per_sec, dollars per million tokens =
1e6 × dollars_per_sec ÷ tokens/s, and the timed window's energy cost = joules × E / 3.6e6.
flowrate keeps no price table: the prices are the user's, in the user's currency, given as flags
or in a prices file keyed by machine (flowrate.config.prices).
"""

from __future__ import annotations

from dataclasses import dataclass

JOULES_PER_KWH = 3.6e6
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Cost:
    """The run's figures per unit of money; None with the reason where a price or a measurement
    they need is missing."""

    price_per_hour: float | None = None
    energy_price_per_kwh: float | None = None
    dollars_per_sec: float | None = None  # the machine and its measured energy, while it runs
    samples_per_dollar: float | None = None
    dollars_per_million_tokens: float | None = None  # token problems only
    energy_cost: float | None = None  # the timed window's joules at the energy price
    reason: str | None = None  # why a figure is missing
    prices_from: str | None = None  # the --prices entry a price came from (None: the flags)


def cost_of(
    price_per_hour: float | None,
    energy_price_per_kwh: float | None,
    samples_per_sec: float,
    tokens_per_sec: float | None,
    joules: float | None,
    average_watts: float | None,
) -> Cost | None:
    """The run's cost figures at these prices (None: no price given)."""
    if price_per_hour is None and energy_price_per_kwh is None:
        return None
    reasons = []
    per_sec = price_per_hour / SECONDS_PER_HOUR if price_per_hour is not None else None
    energy_cost = None
    if energy_price_per_kwh is not None:
        if joules is None or average_watts is None:
            reasons.append("--energy-price: this run's energy was not measured, so it is not priced")
        else:
            energy_cost = joules * energy_price_per_kwh / JOULES_PER_KWH
            per_sec = (per_sec or 0.0) + average_watts * energy_price_per_kwh / JOULES_PER_KWH
    per_million = None
    if per_sec is not None and per_sec > 0:
        if tokens_per_sec:
            per_million = 1e6 * per_sec / tokens_per_sec
        else:
            reasons.append("dollars per million tokens: the problem has no tokens")
    return Cost(
        price_per_hour=price_per_hour,
        energy_price_per_kwh=energy_price_per_kwh,
        dollars_per_sec=per_sec,
        samples_per_dollar=samples_per_sec / per_sec if per_sec else None,
        dollars_per_million_tokens=per_million,
        energy_cost=energy_cost,
        reason="; ".join(reasons) or None,
    )
