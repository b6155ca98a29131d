"""The one reader of setting values given as text: integers, numbers (seconds, GiB, rates), on/off
words, batch sizes with "auto", comma lists, doubling ranges and durations ("3m", "90 s").

The command line (flowrate.cli.param_types), sweep grids and bases (flowrate.campaigns.sweep.spec),
explore spaces and the -O problem options all read a value through here, so "16", " 16 ",
"auto" and "1..512" mean the same wherever they are typed. Each reader raises ``BadValue``
saying what it wanted; the caller names the flag or key.
"""

from __future__ import annotations

import math
import re
from typing import Any

from flowrate.errors import ConfigError

AUTO = "auto"
TRUTH = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}
_DOUBLING = re.compile(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*$")
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(h|m|min|s)?\s*$", re.IGNORECASE)
SECONDS_PER = {"h": 3600.0, "m": 60.0, "min": 60.0, "s": 1.0}


class BadValue(ValueError):
    """A value that cannot be read as asked; ``wanted`` says what would be, e.g. "an integer"."""

    def __init__(self, value: Any, wanted: str) -> None:
        self.value = value
        self.wanted = wanted
        super().__init__(f"cannot read {value!r} as {wanted}")


def to_int(value: Any) -> int:
    """16 or "16" -> 16; a bool, a float or other text is refused."""
    if isinstance(value, bool | float):
        raise BadValue(value, "an integer")
    try:
        return int(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise BadValue(value, "an integer") from None


def to_float(value: Any) -> float:
    """2, 2.5 or "2.5" -> a float (seconds, GiB, a rate: the field's unit); a bool is refused."""
    if isinstance(value, bool):
        raise BadValue(value, "a number")
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise BadValue(value, "a number") from None


def to_bool(value: Any) -> bool:
    """True, "true", "yes", "1" (and their opposites) -> a bool."""
    if isinstance(value, bool):
        return value
    try:
        return TRUTH[str(value).strip().lower()]
    except KeyError:
        raise BadValue(value, "true or false") from None


def to_option_int(value: Any) -> int:
    """A problem option (-O KEY=VALUE, a sweep's m or hidden): an integer, true/false as 1/0."""
    if isinstance(value, str) and value.strip().lower() in TRUTH:
        return int(TRUTH[value.strip().lower()])
    return to_int(value)


def to_batch(value: Any) -> int | str:
    """A batch size: 16, "16", or "auto" (any case) as "auto"."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    try:
        return to_int(value)
    except BadValue:
        raise BadValue(value, "an integer or 'auto'") from None


def to_count_or_auto(value: Any) -> int | None:
    """A count or "auto" (None: the program chooses), e.g. --resident-blocks."""
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        return None
    try:
        return to_int(value)
    except BadValue:
        raise BadValue(value, "an integer or 'auto'") from None


def items(values: Any) -> list[Any]:
    """A comma list ("1,2,"), a list or one value, as its items (empty text items dropped)."""
    if isinstance(values, str):
        return [v for v in values.split(",") if v.strip()]
    if isinstance(values, list | tuple):
        return list(values)
    return [values]


def is_range(value: Any) -> bool:
    """Whether ``value`` is written as a range (it holds "..")."""
    return isinstance(value, str) and ".." in value


def doubling(text: str) -> list[int]:
    """ "A..B" -> A, 2A, 4A, … up to B (1..512 is 1, 2, 4, …, 512); 1 ≤ A ≤ B."""
    match = _DOUBLING.match(text)
    if not match or int(match[1]) < 1 or int(match[2]) < int(match[1]):
        raise BadValue(text, "a range: write A..B, 1 ≤ A ≤ B (e.g. 1..512)")
    low, high = int(match[1]), int(match[2])
    return [low * 2**i for i in range((high // low).bit_length())]


def to_seconds(value: Any) -> float:
    """A duration above 0: "3m" or "3 min" -> 180.0, "2h", "90s", "1.5h"; a bare number is seconds.
    0, nan, inf and other units are refused."""
    match = _DURATION.match(str(value))
    seconds = float(match[1]) * SECONDS_PER[(match[2] or "s").lower()] if match else math.nan
    if not 0 < seconds < math.inf:
        raise BadValue(value, "a duration above 0 like 90s, 3m or 2h")
    return seconds


def positive_ints(text: str, field_name: str, example: str) -> list[int]:
    """'4,1,2' -> [1, 2, 4]: the distinct positive integers of a comma list, ascending; ConfigError
    naming ``field_name`` otherwise (``example`` shows the form)."""
    try:
        values = sorted({to_int(part) for part in items(text)})
    except BadValue:
        raise ConfigError(field_name, f"expected numbers like {example}, got {text!r}") from None
    if not values or values[0] < 1:
        raise ConfigError(field_name, f"expected positive numbers like {example}, got {text!r}")
    return values
