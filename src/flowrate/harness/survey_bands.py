"""A survey figure's plausibility band, and the figure built against its datasheet value.

A band is a closed interval [low, high]. It applies to the figure's fraction of its datasheet
value where the peak table has one, else to the figure's own value (in its unit): a matmul on a
GPU is held to a share of its datasheet peak, a launch latency to a number of seconds.

The default bands are conservative — wide enough that a healthy machine never falls outside them,
narrow enough to catch what breaks a machine outright (a PCIe link trained at x4, TF32 or tensor
cores silently off, a driver falling back to a slow path):

- matmul, memory copy, pinned host link (duplex: of both directions' rate): [0.3, 1.0] of the
  datasheet (an H100 SXM's best bf16 GEMM reaches about 0.8 of its 989 TFLOP/s; a copy about 0.9
  of HBM bandwidth; pinned PCIe copies 0.6-0.9 of the link). Above 1.0 the datasheet or the
  measurement is wrong.
- attention's forward: [0.1, 1.0] of the datasheet (FlashAttention-2 reaches 0.3-0.7 of a GPU's
  dense peak, the math fallback far less).
- pageable host copies: [0.05, 1.0] of the link (the driver stages them through a pinned buffer,
  so the host's memcpy bounds them, not the link: an H200 in a Firecracker VM moved 0.10 of its PCIe 5
  link host to device, with flowrate and with benchmarks/kernels.py alike).
- a reference model's training or inference step: [0.05, 1.0] of the datasheet peak (MFU; GPT-2
  124M in bf16, eager, measured 0.18 on an H100).
- power: [0.05, 1.05] of the GPU's power limit (a mean over a window can overshoot the limit a
  little; a counter that reads nothing falls below).
- launch latency, seconds per call: [0.2 µs, 500 µs] (eager dispatch of one op costs a few µs on
  a CPU and 5-20 µs to a GPU; launch to completion up to some 100 µs).

A figure without a datasheet value has no fraction, so only a value band (launch, or one a band
file gives) applies to it. ``--bands FILE`` replaces the default band of the figures it names:
a JSON object of figure name to ``[low, high]``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from flowrate.errors import ConfigError, PathError
from flowrate.results.sections import SurveyFigure

Band = tuple[float, float]

FRACTION_BAND: Band = (0.3, 1.0)  # matmul, copy, pinned host link: share of the datasheet value
WIDE_BAND: Band = (0.1, 1.0)  # attention: share of the datasheet value
PAGEABLE_BAND: Band = (0.05, 1.0)  # pageable host link: share of the link's rate
MODEL_BAND: Band = (0.05, 1.0)  # a training or inference step's MFU
POWER_BAND: Band = (0.05, 1.05)  # mean power, share of the power limit
LAUNCH_BAND: Band = (2e-7, 5e-4)  # seconds per call


def default_band(name: str, has_datasheet: bool) -> Band | None:
    """The band of a figure by its name: a fraction band where it has a datasheet value; launch
    latency's value band everywhere; None for the rest."""
    family = name.split(" ", 1)[0]
    if family == "launch":
        return LAUNCH_BAND
    if not has_datasheet:
        return None
    if family in {"train", "infer"}:
        return MODEL_BAND
    if family == "power":
        return POWER_BAND
    if name.endswith(" pageable"):
        return PAGEABLE_BAND
    if family == "attention":
        return WIDE_BAND
    if family in {"matmul", "copy", "h2d", "d2h", "duplex"}:
        return FRACTION_BAND
    return None


def make_figure(
    name: str,
    value: float | None,
    unit: str,
    *,
    datasheet: float | None = None,
    reason: str | None = None,
    detail: str | None = None,
    band: Band | None = None,
    cv: float | None = None,
) -> SurveyFigure:
    """The figure, its fraction of ``datasheet`` and whether it lies in ``band`` (module docstring:
    the band holds the fraction where there is a datasheet value, else the value)."""
    fraction = value / datasheet if value is not None and datasheet else None
    held = fraction if datasheet else value
    within = None if band is None or held is None else band[0] <= held <= band[1]
    return SurveyFigure(
        name=name,
        value=value,
        unit=unit,
        datasheet=datasheet,
        fraction=fraction,
        band_low=band[0] if band else None,
        band_high=band[1] if band else None,
        within_band=within,
        reason=reason,
        detail=detail,
        cv=cv,
    )


def outside(figures: list[SurveyFigure]) -> list[SurveyFigure]:
    """The figures that fell outside their band (a figure without a band or value is not)."""
    return [f for f in figures if f.within_band is False]


def load_bands(path: str | Path) -> dict[str, Band]:
    """A band file: a JSON object of figure name to [low, high], low <= high, finite numbers.
    Raises PathError when it cannot be read and ConfigError naming what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise PathError(f"cannot read band file {path}", error) from None
    except UnicodeDecodeError:
        raise ConfigError("bands", f"{path} is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError("bands", f"{path} is not valid JSON ({error})") from None
    return check_bands(data, str(path))


def check_bands(data: object, where: str = "bands") -> dict[str, Band]:
    """``data`` as bands, or ConfigError saying which entry is wrong and what would be valid."""
    if not isinstance(data, Mapping):
        raise ConfigError("bands", f"{where} must be a JSON object of figure name to [low, high]")
    bands: dict[str, Band] = {}
    for name, band in data.items():
        if (
            not isinstance(band, list)
            or len(band) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in band)
            or not all(math.isfinite(v) for v in band)
            or band[0] > band[1]
        ):
            raise ConfigError(
                "bands",
                f"{where}: {name!r} must be [low, high], two finite numbers with low <= high, got {band!r}",
            )
        bands[str(name)] = (float(band[0]), float(band[1]))
    return bands
