"""Calibration on a real GPU (`pytest -m gpu`): the magnitudes of what it times.

On the CPU, tests/unit/test_estimate_devices.py runs the same miniature ladder and checks only the
structure: on a loaded 2-core machine a per-kernel time says more about the load than the code.
A lent GPU is not shared, and a kernel launch there costs microseconds.
"""

from __future__ import annotations

import math

import pytest
import torch

from flowrate.estimate import calibration as cal

pytestmark = pytest.mark.gpu


def test_calibrated_launch_overhead_is_microseconds_per_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    # a miniature ladder: the same code path in a few seconds
    monkeypatch.setitem(cal.GEMM_SIDES, "cuda", (256, 512))
    monkeypatch.setitem(cal.CONV, "cuda", ((4, 16), (32, 64)))
    monkeypatch.setitem(cal.ATTENTION_LENGTHS, "cuda", (128, 256))
    monkeypatch.setitem(cal.COPY_BYTES, "cuda", (1 << 20, 1 << 24))
    monkeypatch.setitem(cal.PRECISIONS, "cuda", (cal.Precision.BF16,))
    monkeypatch.setitem(cal.THIN_SIDE, "cuda", 512)
    monkeypatch.setattr(cal, "THIN", (1, 16))
    monkeypatch.setattr(cal, "OPTIMIZER_PARAMETERS", 1 << 20)
    measured = cal.calibrate(torch.device("cuda"), seconds_per_point=0.01)
    assert measured.device_type == "cuda" and measured.threads == torch.get_num_threads()
    # a launch costs ~5-20 µs; a millisecond per kernel would mean a sync or a host copy per kernel
    assert set(measured.launch_overhead_s) == {"train", "infer"}
    assert all(0 < s < 1e-3 for s in measured.launch_overhead_s.values())
    assert measured.host_link_bandwidth is not None and 0 < measured.host_link_bandwidth < math.inf
