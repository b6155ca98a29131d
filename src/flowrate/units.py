"""Numbers with units for people: engineering prefixes, parameter counts, rates. Pure functions."""

from __future__ import annotations

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """1234567 -> '1.23 M' + unit: engineering prefixes, ``digits`` significant figures."""
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}".rstrip()


def count(value: float) -> str:
    """Parameter counts as people say them: 124.4 M, 6.658 B."""
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{_sig(value / scale, 4)} {suffix}"
    return str(int(value))


def _sig(value: float, digits: int) -> str:
    text = f"{value:.{digits}g}"
    if "e" in text:  # keep fixed notation for human tables: 54758, not 5.476e+04 or 54758.234
        text = f"{value:.0f}" if abs(value) >= 1 else f"{value:.{max(digits - 1, 0)}f}"
    return text


def rate(value: float | None) -> str:
    return "—" if value is None else f"{_sig(value, 4)}"
