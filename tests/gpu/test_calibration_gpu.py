"""Calibration on a real GPU (`pytest -m gpu`): the magnitudes of what it times.

On the CPU, tests/unit/test_estimate_devices.py runs the same miniature ladder and checks only the
structure: on a loaded 2-core machine a per-kernel time says more about the load than the code.
A lent GPU is not shared, and a kernel launch there costs microseconds.
"""

from __future__ import annotations

import math

import pytest
import torch

from flowrate.estimate import calibrating
from flowrate.estimate import calibration as cal

pytestmark = pytest.mark.gpu


def test_calibrated_launch_overhead_is_microseconds_per_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    # a miniature ladder: the same code path in a few seconds
    monkeypatch.setitem(cal.GEMM_SIDES, "cuda", (256, 512))
    monkeypatch.setitem(cal.CONV, "cuda", ((4, 16), (32, 64)))
    monkeypatch.setitem(cal.ATTENTION_LENGTHS, "cuda", (128, 256))
    monkeypatch.setitem(cal.COPY_BYTES, "cuda", (1 << 20, 1 << 24))
    # fp32 too: the working-set curve prices the reference models' fp32 training steps
    monkeypatch.setitem(cal.PRECISIONS, "cuda", (cal.Precision.BF16, cal.Precision.FP32))
    monkeypatch.setitem(cal.THIN_SIDE, "cuda", 512)
    monkeypatch.setattr(cal, "THIN", (1, 16))
    monkeypatch.setattr(cal, "OPTIMIZER_PARAMETERS", 1 << 20)
    monkeypatch.setattr(calibrating.freed_memory, "apply", lambda setting: None)  # not for good, here
    measured = calibrating.calibrate(torch.device("cuda"), seconds_per_point=0.01)
    assert measured.device_type == "cuda" and measured.threads == torch.get_num_threads()
    # a launch costs ~5-20 µs; a millisecond per kernel would mean a sync or a host copy per kernel
    assert set(measured.launch_overhead_s) == {"train", "infer"}
    assert all(0 < s < 1e-3 for s in measured.launch_overhead_s.values())
    assert measured.host_link_bandwidth is not None and 0 < measured.host_link_bandwidth < math.inf


def test_no_calibrated_rate_exceeds_the_datasheet(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first H100 calibration (2026-11-24) recorded bf16 GEMMs at 3.6 PFLOP/s, 3.6 times the
    # datasheet: the bare call's time was left out of calls whose launch overlaps the kernel.
    from flowrate.measure.env import device_name
    from flowrate.measure.peaks import find_device

    peak = find_device(device_name(torch.device("cuda")))
    if peak is None:
        pytest.skip("this GPU is not in the peak table")
    monkeypatch.setitem(cal.PRECISIONS, "cuda", (cal.Precision.BF16, cal.Precision.FP32))
    monkeypatch.setattr(calibrating.freed_memory, "apply", lambda setting: None)  # not for good, here
    measured = calibrating.calibrate(torch.device("cuda"), seconds_per_point=0.02)
    assert measured.method == cal.CALIBRATION_METHOD
    for op_class, by_key in measured.flops.items():
        for key, points in by_key.items():
            ceiling = peak.dense_flops.get(key)
            if ceiling is not None:
                # a 3x3 convolution's FLOPs are counted as direct convolution's, and cuDNN runs it
                # with Winograd's F(4x4, 3x3) where it can: 36 multiplies for 144 (an H200's fp32
                # 3x3 backward reached 2.3x the fp32 peak, 2026-11-28)
                winograd = 4.0 if op_class.startswith("conv3x3") else 1.0
                assert max(rate for _, rate in points) <= 1.02 * winograd * ceiling, (op_class, key, points)
    # a batch norm over ELEMENTWISE_SIZE elements is bound by memory, not by its launch (over 1 Mi
    # elements the H100 was launch-bound): a call lasts 20 launches or more, and its read and
    # write of 4 bytes each stay under a copy's best bandwidth. (A share of the copy's bandwidth
    # is the kernel's, not flowrate's: an H200 ran it at 0.12, 2026-11-28, where 0.25 was asserted.)
    per_call_s = 1 / measured.elementwise["_native_batch_norm_legit"] * cal.ELEMENTWISE_SIZE["cuda"]
    assert per_call_s > 20 * measured.launch_overhead_s["train"]
    batch_norm = measured.elementwise["_native_batch_norm_legit"] * 8
    assert batch_norm <= 1.02 * max(rate for _, rate in measured.bandwidth)
