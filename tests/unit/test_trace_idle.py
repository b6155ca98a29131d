"""A GPU trace's host-to-device copies and idle split (HolisticTraceAnalysis's definitions), exactly,
from a synthetic Kineto trace; and the same figures from HTA itself on the same trace."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from flowrate.harness.profile_table import breakdown
from flowrate.harness.trace_idle import device_time
from flowrate.results.codec import decode, encode
from flowrate.results.profile import IdleSplit, StepBreakdown

US = 1e-6


def _launch(name: str, correlation: int, ts: int) -> dict[str, Any]:
    return {
        "ph": "X", "cat": "cuda_runtime", "name": name, "pid": 100, "tid": 100,
        "ts": ts, "dur": 4, "args": {"correlation": correlation},
    }  # fmt: skip


def _on_device(cat: str, name: str, correlation: int, stream: int, ts: int, dur: int) -> dict[str, Any]:
    return {
        "ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": correlation},
    }  # fmt: skip


def kineto_trace() -> dict[str, Any]:
    """Two streams, in microseconds. Stream 7: a host-to-device copy 10-50; kernel A 60-160
    (launched at 20: a 10 µs gap between kernels queued back to back, kernel wait); kernel B
    200-250 (launched at 30, long before: a 40 µs gap of other wait); kernel C 310-400 (launched
    at 300, after B ended: 60 µs of host wait); a device-to-host copy 420-428 (launched at 405: 20
    µs of host wait). Stream 8, interleaved with 7: kernel D 100-120, kernel E 125-135 (launched
    at 36: 5 µs of kernel wait)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 100, "ts": 18, "dur": 20},
        _launch("cudaMemcpyAsync", 1, 0),
        _on_device("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 1, 7, 10, 40),
        _launch("cudaLaunchKernel", 2, 20),
        _on_device("kernel", "gemm_a", 2, 7, 60, 100),
        _launch("cudaLaunchKernel", 3, 30),
        _on_device("kernel", "gemm_b", 3, 7, 200, 50),
        _launch("cudaLaunchKernel", 4, 300),
        _on_device("kernel", "elementwise_c", 4, 7, 310, 90),
        _launch("cudaMemcpyAsync", 5, 405),
        _on_device("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 5, 7, 420, 8),
        _launch("cudaLaunchKernel", 6, 34),
        _on_device("kernel", "reduce_d", 6, 8, 100, 20),
        _launch("cudaLaunchKernel", 7, 36),
        _on_device("kernel", "reduce_e", 7, 8, 125, 10),
    ]
    return {"schemaVersion": 1, "traceEvents": events}


def test_host_to_device_copies_and_the_idle_split_per_stream() -> None:
    measured = device_time(kineto_trace())
    assert measured is not None
    assert measured.host_to_device_s == pytest.approx(40 * US)
    assert measured.idle == IdleSplit(
        host_wait_s=pytest.approx(80 * US),
        kernel_wait_s=pytest.approx(15 * US),
        other_s=pytest.approx(40 * US),
    )
    assert measured.idle_s == pytest.approx(135 * US)


def test_a_trace_without_device_events_has_no_device_time() -> None:
    trace = kineto_trace()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if "stream" not in e.get("args", {})]
    assert device_time(trace) is None


def test_on_cuda_the_breakdown_fills_the_copies_and_the_idle_split() -> None:
    measured = device_time(kineto_trace())
    split = breakdown([], roofed=True, device_type="cuda", synthetic=True, device=measured)
    assert split.host_to_device_s == pytest.approx(40 * US)
    assert split.idle_s == pytest.approx(135 * US)
    assert split.idle_split == IdleSplit(
        pytest.approx(80 * US), pytest.approx(15 * US), pytest.approx(40 * US)
    )
    assert "idle_s" not in split.notes and "host_to_device_s" not in split.notes
    cpu = breakdown([], roofed=True, device_type="cpu", synthetic=True, device=None)
    assert cpu.idle_s is None and cpu.idle_split is None
    assert cpu.notes["idle_s"] == "not measurable on a CPU: the host runs the operators itself"


def test_the_copies_and_the_split_are_htas_on_the_same_trace(tmp_path: Path) -> None:
    """HTA's own idle time breakdown and memory kernels of the trace, written as torch.profiler
    names a rank's file (HTA is in the dev extra; skipped where it is not installed)."""
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
    trace = kineto_trace()
    trace["distributedInfo"] = {"rank": 0}
    (tmp_path / "rank-0.pt.trace.json").write_text(json.dumps(trace), encoding="utf-8")
    analysis = TraceAnalysis(trace_dir=str(tmp_path))
    table, _ = analysis.get_idle_time_breakdown(visualize=False)
    by_kind = {kind: 0.0 for kind in ("host_wait", "kernel_wait", "other")}
    for row in table.itertuples():
        by_kind[row.idle_category] += float(row.idle_time) * US
    _, kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    copies = kernels[kernels["name"].str.startswith("Memcpy HtoD")]["sum (us)"].sum() * US
    ours = device_time(kineto_trace())
    assert ours is not None
    assert ours.host_to_device_s == pytest.approx(copies)
    assert ours.idle == IdleSplit(
        pytest.approx(by_kind["host_wait"]),
        pytest.approx(by_kind["kernel_wait"]),
        pytest.approx(by_kind["other"]),
    )


def test_the_split_round_trips_through_the_record_and_an_older_breakdown_reads_without_it() -> None:
    written = StepBreakdown(idle_s=4e-3, idle_split=IdleSplit(2e-3, 5e-4, 1.5e-3), notes={"x": "y"})
    data = encode(written)
    assert data["idle_split"] == {"host_wait_s": 2e-3, "kernel_wait_s": 5e-4, "other_s": 1.5e-3}
    assert decode(StepBreakdown, data) == written
    del data["idle_split"]  # as a record written before the split was kept
    assert decode(StepBreakdown, data).idle_split is None
