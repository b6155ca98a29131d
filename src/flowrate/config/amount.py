"""--to-solution's amount of work: a positive finite number and what it counts (tokens, samples, or
epochs of the run's --data set)."""

from __future__ import annotations

import math
import re

from flowrate.errors import ConfigError

UNITS = ("tokens", "samples", "epochs")
EPOCHS = "epochs"
_AMOUNT = re.compile(r"\s*([0-9][0-9_.]*(?:[eE][+-]?[0-9]+)?)\s*(tokens?|samples?|epochs?)\s*", re.IGNORECASE)


def parse_amount(field: str, text: str) -> tuple[float, str]:
    """``text`` ("2e12tokens", "1e6 samples") as (amount, unit); ConfigError(field) otherwise."""
    match = _AMOUNT.fullmatch(text)
    amount = float(match.group(1).replace("_", "")) if match and _number(match.group(1)) else math.nan
    if match is None or not math.isfinite(amount) or amount <= 0:
        raise ConfigError(
            field,
            f"must be a positive amount and a unit, e.g. 2e12tokens, 1e6samples or 3epochs, got {text!r}",
        )
    unit = match.group(2).lower()
    return amount, unit if unit.endswith("s") else unit + "s"


def _number(text: str) -> bool:
    try:
        float(text.replace("_", ""))
    except ValueError:
        return False
    return True
