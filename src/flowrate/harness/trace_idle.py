"""Host-to-device copies and device idle time from a Kineto (Chrome) trace, as HolisticTraceAnalysis
defines them.

HolisticTraceAnalysis (HTA, Meta's trace analyzer) is not called here: it needs pandas, plotly and
JupyterLab. This module applies its definitions (``BreakdownAnalysis.get_idle_time_breakdown``,
``hta.utils.utils.get_memory_kernel_type``) to the parsed trace, and a test cross-checks the two on
one trace:

- The device's work is every event whose category is a kernel, a memset or a memcpy and that sits
  on a stream (``args.stream``).
- Host-to-device copies are the memcpy events whose name begins "Memcpy HtoD": their summed
  duration.
- On each stream, taken alone, the events run in order of start; the gap before each event after
  the first is idle time on that stream. A gap is:
  - host wait when the runtime call that launched the event (the CPU event with the same
    ``args.correlation``) started after the previous event ended: the host had not yet queued it;
  - kernel wait otherwise, when the gap is shorter than KERNEL_WAIT_US: the delay of launching
    back-to-back kernels;
  - other otherwise (such as a kernel waiting on an event from another stream).
- Each kind's seconds are summed over the streams, so idle time is stream time: on one stream,
  the time the device ran nothing between its first and last event.

HTA rounds float timestamps to whole microseconds (start up, end down) before it measures; this
module keeps them as written, so the two agree exactly on traces in whole microseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from flowrate.results.profile import IdleSplit

DEVICE_CATEGORIES = frozenset({"kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy"})
HOST_TO_DEVICE = "Memcpy HtoD"  # the name's prefix of a host-to-device copy (HTA's memcpy type)
# HTA's default consecutive_kernel_delay: compared with the trace's timestamps, in microseconds
KERNEL_WAIT_US = 30.0


@dataclass(frozen=True)
class DeviceTime:
    """What the device's events in a trace show: its host-to-device copies and its idle time."""

    host_to_device_s: float
    idle: IdleSplit

    @property
    def idle_s(self) -> float:
        """All idle time: host wait, kernel wait and other together."""
        return self.idle.host_wait_s + self.idle.kernel_wait_s + self.idle.other_s


@dataclass(frozen=True)
class _Event:
    start: float  # microseconds, as the trace writes them
    end: float
    launched: float | None  # when its runtime call started; None: no such call in the trace


def device_time(trace: Mapping[str, Any]) -> DeviceTime | None:
    """The copies and idle split of a parsed Chrome trace (``{"traceEvents": [...]}``); None when it
    holds no device event (a CPU-only profile)."""
    events = [event for event in trace.get("traceEvents", []) if isinstance(event, dict)]
    device = [event for event in events if _on_stream(event)]
    if not device:
        return None
    launches: dict[Any, float] = {}
    for event in events:
        correlation = _args(event).get("correlation")
        if correlation is not None and not _on_stream(event) and "ts" in event:
            launches.setdefault(correlation, float(event["ts"]))
    to_device = sum(
        float(event.get("dur", 0.0))
        for event in device
        if str(event.get("name", "")).startswith(HOST_TO_DEVICE)
    )
    streams: dict[Any, list[_Event]] = {}
    for event in device:
        start = float(event["ts"])
        streams.setdefault(_args(event)["stream"], []).append(
            _Event(start, start + float(event.get("dur", 0.0)), launches.get(_args(event).get("correlation")))
        )
    host = kernel = other = 0.0
    for timeline in streams.values():
        timeline.sort(key=lambda one: one.start)
        for before, after in pairwise(timeline):
            gap = after.start - before.end
            if after.launched is not None and after.launched > before.end:
                host += gap
            elif gap < KERNEL_WAIT_US:
                kernel += gap
            else:
                other += gap
    return DeviceTime(to_device / 1e6, IdleSplit(host / 1e6, kernel / 1e6, other / 1e6))


def _args(event: Mapping[str, Any]) -> Mapping[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _on_stream(event: Mapping[str, Any]) -> bool:
    stream = _args(event).get("stream")
    return event.get("cat") in DEVICE_CATEGORIES and stream is not None and stream != -1 and "ts" in event
