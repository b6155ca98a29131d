"""One schema per configuration: RunConfig and GenerateConfig, whose fields each carry a Setting
(help, flags, bounds, unit, whether a sweep may vary it), and the one reader of values given as text.

- ``run``: RunConfig; ``run_checks``: its validation, one concern at a time.
- ``generate``: GenerateConfig, `flowrate generate`'s settings, and its checks.
- ``setting``: the Setting a field declares, ``settings(cls)`` to read them, ``reference(cls)``
  for the docs' table.
- ``bounds``: the numbers a numeric setting may take.
- ``values``: integers, numbers, on/off, batch sizes with "auto", comma lists and doubling ranges
  read from text, alike for the command line, sweeps, explorations and -O options.
"""

from flowrate.choices import Execution, FreedMemory, Mode, OptimizerName, Precision
from flowrate.config.bounds import INT32_MAX, MAX_STEPS, OPTION_BOUNDS, WEEK_S, Bounds
from flowrate.config.generate import GenerateConfig
from flowrate.config.run import BOUNDS, CHECK_STEPS, FLAG_NAMES, RunConfig, parse_batch_size
from flowrate.config.setting import ReferenceRow, Setting, SettingField, reference, setting_of, settings
from flowrate.config.values import AUTO, positive_ints

__all__ = [
    "AUTO",
    "BOUNDS",
    "CHECK_STEPS",
    "FLAG_NAMES",
    "INT32_MAX",
    "MAX_STEPS",
    "OPTION_BOUNDS",
    "WEEK_S",
    "Bounds",
    "Execution",
    "FreedMemory",
    "GenerateConfig",
    "Mode",
    "OptimizerName",
    "Precision",
    "ReferenceRow",
    "RunConfig",
    "Setting",
    "SettingField",
    "parse_batch_size",
    "positive_ints",
    "reference",
    "setting_of",
    "settings",
]
