"""--price-per-hour and --energy-price: exact figures from fixed inputs, metrics and refusals."""

from __future__ import annotations

import dataclasses

import pytest

from factories import make_result
from flowrate.cli.profile_text import solution_line
from flowrate.config import RunConfig
from flowrate.config.amount import parse_amount
from flowrate.errors import ConfigError
from flowrate.harness.api import priced
from flowrate.results.cost import Cost, cost_of
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result
from flowrate.results.sections import Energy
from flowrate.results.solution import Solution, project


def test_no_price_no_cost() -> None:
    assert cost_of(None, None, 100.0, 1000.0, 50.0, 10.0) is None


def test_a_machine_price_alone() -> None:
    # 3.6 $/h is 0.001 $/s: 100 samples/s are 100,000 samples per dollar; 1000 tokens/s cost
    # 0.001 $ per 1000 tokens, 1 $ per million
    assert cost_of(3.6, None, 100.0, 1000.0, None, None) == Cost(
        price_per_hour=3.6,
        dollars_per_sec=pytest.approx(0.001),
        samples_per_dollar=pytest.approx(100_000.0),
        dollars_per_million_tokens=pytest.approx(1.0),
    )


def test_the_energy_price_adds_the_measured_watts_and_prices_the_joules() -> None:
    # 360 W at 0.5 $/kWh: 0.18 $/h = 5e-5 $/s on top of 0.001; 7.2e6 J over the window = 2 kWh = 1 $
    cost = cost_of(3.6, 0.5, 105.0, None, 7.2e6, 360.0)
    assert cost == Cost(
        price_per_hour=3.6,
        energy_price_per_kwh=0.5,
        dollars_per_sec=pytest.approx(0.00105),
        samples_per_dollar=pytest.approx(100_000.0),
        energy_cost=pytest.approx(1.0),
        reason="dollars per million tokens: the problem has no tokens",
    )


def test_an_energy_price_alone_prices_the_energy_only() -> None:
    # 3600 W at 1 $/kWh = 3.6 $/h = 0.001 $/s; 3.6e6 J over the window = 1 kWh = 1 $
    cost = cost_of(None, 1.0, 10.0, 100.0, 3.6e6, 3600.0)
    assert cost is not None
    assert cost.dollars_per_sec == pytest.approx(0.001)
    assert cost.samples_per_dollar == pytest.approx(10_000.0)
    assert cost.dollars_per_million_tokens == pytest.approx(10.0)  # 1e6 tokens take 1e4 s
    assert cost.energy_cost == pytest.approx(1.0)


def test_an_energy_price_without_a_measured_energy_says_so() -> None:
    cost = cost_of(None, 0.3, 10.0, None, None, None)
    assert cost == Cost(
        energy_price_per_kwh=0.3,
        reason="--energy-price: this run's energy was not measured, so it is not priced",
    )


def test_a_run_is_priced_at_its_configs_prices_and_the_metrics_read_it() -> None:
    result = dataclasses.replace(
        make_result(samples_per_sec=200.0), energy=Energy(joules=7.2e6, average_watts=360.0)
    )
    run = priced(result, RunConfig(price_per_hour=3.6, energy_price_per_kwh=0.5))
    assert run.cost is not None and run.cost.energy_cost == pytest.approx(1.0)
    assert METRICS["samples_per_dollar"].value(run) == pytest.approx(200.0 / 0.00105)
    assert METRICS["energy_cost"].value(run) == pytest.approx(1.0)
    assert METRICS["samples_per_dollar"].higher_is_better
    assert not METRICS["dollars_per_million_tokens"].higher_is_better
    assert METRICS["samples_per_dollar"].value(result) is None  # unpriced
    back = Result.from_json(run.to_json())  # stored with the record, read back typed
    assert back.cost == run.cost


@pytest.mark.parametrize("field", ["price_per_hour", "energy_price_per_kwh"])
@pytest.mark.parametrize(
    ("value", "says"),
    [
        (0.0, "must be a positive number, got 0.0"),
        (-1.0, "must be a positive number, got -1.0"),
        (float("nan"), "must be a positive number, got nan"),
        (float("inf"), "must be a finite number, got inf"),
    ],
)
def test_a_price_must_be_finite_and_above_zero(field: str, value: float, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        RunConfig(**{field: value})
    assert (refused.value.field, refused.value.message) == (field, says)


@pytest.mark.parametrize(
    ("text", "amount", "unit"),
    [
        ("2e12tokens", 2e12, "tokens"),
        ("1e6 samples", 1e6, "samples"),
        ("1_000 Sample", 1000.0, "samples"),
        ("3 Epochs", 3.0, "epochs"),
        ("1epoch", 1.0, "epochs"),
    ],
)
def test_a_job_size_reads_as_an_amount_and_a_unit(text: str, amount: float, unit: str) -> None:
    assert parse_amount("to_solution", text) == (amount, unit)


@pytest.mark.parametrize(
    "text", ["2e12", "tokens", "2e12 hours", "0tokens", "-1samples", "1e999tokens", "nan tokens"]
)
def test_a_job_size_without_a_positive_amount_and_a_known_unit_is_refused(text: str) -> None:
    with pytest.raises(ConfigError) as refused:
        RunConfig(to_solution=text)
    assert refused.value.field == "to_solution"
    assert refused.value.message == (
        f"must be a positive amount and a unit, e.g. 2e12tokens, 1e6samples or 3epochs, got {text!r}"
    )


def test_time_to_solution_at_the_measured_rate_and_the_given_prices() -> None:
    # 2e12 tokens at 1e6 tokens/s: 2e6 s; at 3.6 $/h (0.001 $/s) 2000 $
    assert project(2e12, "tokens", 1000.0, 1e6, 0.001) == Solution(
        amount=2e12,
        unit="tokens",
        rate_per_sec=1e6,
        seconds=2e6,
        dollars=pytest.approx(2000.0),
        rests_on="GlobalRate 1e+06 tokens/s of this run's timed window, 0.001 $/s at the given prices",
    )
    samples = project(1e6, "samples", 250.0, None, None)
    assert (samples.seconds, samples.dollars, samples.reason) == (4000.0, None, None)
    assert project(1e6, "tokens", 250.0, None, None) == Solution(
        1e6, "tokens", reason="--to-solution: the problem has no tokens"
    )


def test_a_run_projects_its_time_to_solution_and_prints_it() -> None:
    run = priced(make_result(samples_per_sec=200.0), RunConfig(to_solution="1e6samples", price_per_hour=3.6))
    assert run.solution is not None
    assert (run.solution.seconds, run.solution.dollars) == (5000.0, pytest.approx(5.0))
    assert Result.from_json(run.to_json()).solution == run.solution
    assert solution_line(run.solution) == (
        "1e+06 samples: 1 h 23 min, 5 $ (at GlobalRate 200 samples/s of this run's timed window, "
        "0.001 $/s at the given prices)"
    )
