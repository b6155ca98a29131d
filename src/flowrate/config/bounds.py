"""Bounds: the numbers a numeric setting may take, and how to say so when a value is outside.

A field's bounds sit in its Setting (flowrate.config.setting), read alike by RunConfig's
validation, the command line's value types and a sweep's points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowrate.errors import ConfigError

INT32_MAX = 2**31 - 1  # a batch or a shape beyond it reaches C++ kernels as an overflow
MAX_STEPS = 10**9  # steps no run finishes: a typo, refused before it runs forever
WEEK_S = 7 * 24 * 3600


@dataclass(frozen=True)
class Bounds:
    """The numbers a numeric setting may take, and how to say so."""

    says: str  # what a valid value is, e.g. "a positive integer"
    low: float
    high: float  # math.inf: any finite number
    integer: bool = True
    low_open: bool = False  # low itself is not valid
    high_open: bool = False  # high itself is not valid (then ``says`` states the range)
    high_note: str = ""  # after the upper bound, e.g. " (2**31 - 1)"

    def fault(self, value: object) -> str | None:
        """Why ``value`` is not a valid setting, in words; None when it is."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be {self.says}, got {value!r}"
        if self.integer and not isinstance(value, int):
            return f"must be {self.says}, got {value!r}"
        if math.isnan(value) or value < self.low or (self.low_open and value == self.low):
            return f"must be {self.says}, got {value!r}"
        if self.high_open and value >= self.high:
            return f"must be {self.says}, got {value!r}"
        if value > self.high:
            return f"must be at most {self.high}{self.high_note}, got {value!r}"
        if value == math.inf:  # no bound but finiteness
            return f"must be a finite number, got {value!r}"
        return None

    def check(self, name: str, value: object) -> None:
        fault = self.fault(value)
        if fault is not None:
            raise ConfigError(name, fault)

    def interval(self) -> str:
        """The bounds as an interval: [1, 2147483647], (0, ∞), [0, 1)."""
        high = "∞" if self.high == math.inf else f"{self.high:g}" if not self.integer else str(int(self.high))
        low = f"{self.low:g}" if not self.integer else str(int(self.low))
        left = "(" if self.low_open else "["
        right = ")" if self.high_open or self.high == math.inf else "]"
        return f"{left}{low}, {high}{right}"


COUNT = Bounds("a positive integer", 1, INT32_MAX, high_note=" (2**31 - 1)")
STEPS = Bounds("a positive integer", 1, MAX_STEPS)
POSITIVE = Bounds("a positive number", 0, math.inf, integer=False, low_open=True)
SEED = Bounds("an integer 0 or more", 0, 2**63 - 1, high_note=" (2**63 - 1)")
THREADS = Bounds("a positive integer", 1, 1024)
SECONDS = Bounds("a positive number", 0, WEEK_S, integer=False, low_open=True, high_note=" s (7 days)")
# -O KEY=VALUE and the shape flags: 0 is valid (causal=0); each family's config refuses the rest
OPTION_BOUNDS = Bounds("an integer 0 or more", 0, INT32_MAX, high_note=" (2**31 - 1)")
