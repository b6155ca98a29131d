"""The number formatters of flowrate.units, with values worked out by hand."""

from __future__ import annotations

from flowrate.units import DASH, compact, count, duration, gib, p_value, rate, short_duration, si


def test_si_uses_engineering_prefixes_and_fixed_notation() -> None:
    assert si(1234567, "B") == "1.23 MB"
    assert si(999) == "999"
    assert si(54758.234, digits=5) == "54.758 k"
    assert si(0.5, "W") == "0.5 W"


def test_compact_packs_a_table_cell() -> None:
    assert compact(1234567) == "1.235M"
    assert compact(-2500) == "-2.5k"
    assert compact(12.5) == "12.5"
    assert compact(0.000123) == "1.230e-04"
    assert compact(0.0) == "0"
    assert compact(None) == DASH


def test_counts_and_rates() -> None:
    assert count(124_439_808) == "124.4 M"
    assert count(6_658_000_000) == "6.658 B"
    assert count(512) == "512"
    assert rate(54758.234) == "54758"
    assert rate(None) == DASH


def test_durations() -> None:
    assert [short_duration(s) for s in (2.5, 0.00148, 3.2e-6, 4e-9)] == ["2.5 s", "1.48 ms", "3.2 µs", "4 ns"]
    assert [duration(s) for s in (0.4, 42, 185, 3720)] == ["0 s", "42 s", "3 min 05 s", "1 h 02 min"]


def test_p_values() -> None:
    assert [p_value(p) for p in (0.0, 0.41, 0.0123, 3.2e-7)] == ["0", "0.41", "0.012", "3.2e-07"]


def test_memory_prints_in_binary_units() -> None:
    assert gib(283_115_520) == "270 MiB"  # 270 x 2**20: what si() printed as "283 MB"
    assert gib(1000 * 2**20) == "1000 MiB"  # fixed notation, not "1e+03 MiB"
    assert gib(93.1 * 2**30) == "93.1 GiB"
    assert gib(12 * 2**10) == "12 KiB"
    assert gib(512) == "512 B"
    assert gib(2 * 2**40) == "2 TiB"
    assert gib(None) == DASH
