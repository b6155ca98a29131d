"""Numbers with units for people: engineering prefixes, parameter counts, rates, durations.

Pure functions, the one home of number formatting: the CLI's renderers, the report and the plots
all format through here.
"""

from __future__ import annotations

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
DASH = "—"  # a figure that cannot be had


def si(value: float | None, unit: str = "", digits: int = 3) -> str:
    """1234567 -> '1.23 M' + unit: engineering prefixes, ``digits`` significant figures; None (a
    figure not measured) as a dash."""
    if value is None:
        return DASH
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}".rstrip()


def compact(value: float | None, digits: int = 4) -> str:
    """1234567 -> '1.235M': si's prefixes without the space, for table cells; tiny values in
    scientific notation (0.000123 -> '1.230e-04'), None as a dash."""
    if value is None:
        return DASH
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{prefix}"
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}"


def count(value: float | None) -> str:
    """Parameter counts as people say them: 124.4 M, 6.658 B; None (not declared) as a dash."""
    if value is None:
        return DASH
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
    return DASH if value is None else f"{_sig(value, 4)}"


def short_duration(duration_s: float) -> str:
    """0.00148 -> '1.48 ms': a step's time in the unit that reads best."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if duration_s >= scale:
            return f"{duration_s / scale:.3g} {unit}"
    return f"{duration_s * 1e9:.3g} ns"


def seconds(duration_s: float | None) -> str:
    """short_duration for a time that may be absent (a dash) or nothing at all ("0 s")."""
    if duration_s is None:
        return "—"
    return short_duration(duration_s) if duration_s > 0 else "0 s"


def duration(duration_s: float) -> str:
    """A wait as people say it: 42 s, 3 min 05 s, 1 h 02 min."""
    whole = max(round(duration_s), 0)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def p_value(p: float) -> str:
    """A test's p-value: two significant figures, scientific below 1e-4 (0.041, 3.2e-07)."""
    if p == 0:
        return "0"
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """3 -> '3 runs', 1 -> '1 run': a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def gib(value: float | None) -> str:
    """Bytes of memory in binary units, as datasheets count device memory and every table of
    flowrate's prints a memory figure: 93.1 GiB, 512 MiB, 1000 MiB, 12 KiB; None as a dash.
    (Traffic, bandwidth and files on disk stay in si()'s decimal units.)"""
    if value is None:
        return DASH
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if abs(value) >= 1 << shift:
            return f"{_sig(value / (1 << shift), 3)} {unit}"
    return f"{value:.0f} B"
