"""--prices FILE: the user's prices per machine fingerprint, the flags winning over it, and the
file's mistakes refused naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from factories import make_result
from flowrate.cli.profile_text import cost_rows
from flowrate.config import RunConfig
from flowrate.config.prices import read_prices
from flowrate.errors import ConfigError
from flowrate.harness.api import priced
from flowrate.results.schema import Result

# make_result's machine: hostname testhost, device "Test CPU" (or the one given), 2 threads
PRICES = """
[[machine]]
device_name = "NVIDIA H100 80GB HBM3"
price_per_hour = 7.2

[[machine]]
hostname = "testhost"
device_name = "Test CPU"
price_per_hour = 3.6
energy_price_per_kwh = 0.5

[[machine]]
device_name = "Test CPU"
price_per_hour = 100.0
"""


def _file(tmp_path: Path, text: str = PRICES) -> str:
    path = tmp_path / "prices.toml"
    path.write_text(text)
    return str(path)


def test_the_first_entry_naming_the_machine_prices_the_run(tmp_path: Path) -> None:
    path = _file(tmp_path)
    run = priced(make_result(samples_per_sec=200.0), RunConfig(prices=path))
    # machine 2 names this host and device (machine 3 too, but comes later): 3.6 $/h = 0.001 $/s
    assert run.cost is not None
    assert (run.cost.price_per_hour, run.cost.energy_price_per_kwh) == (3.6, 0.5)
    assert run.cost.samples_per_dollar == pytest.approx(200_000.0)
    assert run.cost.prices_from == f"{path} machine 2 (hostname='testhost', device_name='Test CPU')"
    assert cost_rows(run.cost)[0] == (
        "cost",
        f"200 ksamples/$ (at 3.6/h + 0.5/kWh from {path} machine 2 (hostname='testhost', "
        "device_name='Test CPU'))",
    )
    assert run.warnings == []
    assert Result.from_json(run.to_json()).cost == run.cost
    gpu = priced(
        make_result(samples_per_sec=200.0, device_name="NVIDIA H100 80GB HBM3"), RunConfig(prices=path)
    )
    assert gpu.cost is not None and gpu.cost.price_per_hour == 7.2


def test_a_price_given_as_a_flag_wins_over_the_file(tmp_path: Path) -> None:
    config = RunConfig(prices=_file(tmp_path), price_per_hour=36.0)
    run = priced(make_result(samples_per_sec=200.0), config)
    # the flag's 36 $/h, the file's energy price (its entry named in the record)
    assert run.cost is not None
    assert (run.cost.price_per_hour, run.cost.energy_price_per_kwh) == (36.0, 0.5)
    both = priced(
        make_result(), RunConfig(prices=config.prices, price_per_hour=36.0, energy_price_per_kwh=1.0)
    )
    assert both.cost is not None and both.cost.prices_from is None
    assert (both.cost.price_per_hour, both.cost.energy_price_per_kwh) == (36.0, 1.0)


def test_a_machine_the_file_does_not_name_is_not_priced_and_the_run_says_so_once(tmp_path: Path) -> None:
    path = _file(tmp_path)
    run = priced(make_result(device_name="Other GPU", warnings=["w"]), RunConfig(prices=path))
    assert run.cost is None
    assert run.warnings == [
        "w",
        f"--prices {path}: no entry names this machine (hostname='testhost', device_name='Other GPU', "
        "cpu_model='Test CPU', num_threads=2); not priced by the file",
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[machine]\n", "is not valid TOML"),
        ("price = 1\n", "unknown key 'price'; give [[machine]] entries only"),
        ("machine = 3\n", "machine must be [[machine]] tables"),
        ("[[machine]]\nprice_per_hour = 1.0\n", "machine 1: name the machine by hostname, device_name"),
        ('[[machine]]\ndevice_name = "x"\n', "machine 1: give price_per_hour or energy_price_per_kwh"),
        ('[[machine]]\ndevice_name = "x"\ncolour = 1\n', "machine 1: unknown key 'colour'; valid keys"),
        ('[[machine]]\nnum_threads = "2"\nprice_per_hour = 1\n', "num_threads must be an integer, got '2'"),
        ('[[machine]]\ndevice_name = "x"\nprice_per_hour = -1\n', "price_per_hour must be a finite number"),
        ('[[machine]]\ndevice_name = "x"\nprice_per_hour = 0\n', "above 0, got 0"),
        ('[[machine]]\ndevice_name = "x"\nenergy_price_per_kwh = inf\n', "energy_price_per_kwh must be"),
        ('[[machine]]\ndevice_name = "x"\nprice_per_hour = nan\n', "above 0, got nan"),
        ('[[machine]]\ndevice_name = "x"\nprice_per_hour = "2"\n', "above 0, got '2'"),
        ('[[machine]]\ndevice_name = "x"\nprice_per_hour = true\n', "above 0, got True"),
    ],
)
def test_a_malformed_prices_file_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, text: str, says: str
) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as refused:
        read_prices(path)
    assert refused.value.field == "prices"
    assert refused.value.message.startswith(path) and says in refused.value.message


def test_a_prices_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        read_prices(str(tmp_path / "none.toml"))
    assert refused.value.message == f"cannot read {tmp_path / 'none.toml'}: No such file or directory"
