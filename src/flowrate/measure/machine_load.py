"""What else the machine did while a run was timed: other processes' CPU use, the hypervisor's
steal, and the load average, so a figure measured on a busy machine says so.

A CPU run shares its cores with whatever else runs; on a VM the hypervisor may also take time
from it (steal). Either can lower samples/s by any factor without the run's own intervals
looking unsteady, so the run records, over its timed window:

- ``others_cpus``: CPU time used by everything but this process and its children, in CPUs (0.5:
  half a core busy with other work on average), from /proc/stat's busy time less this process
  tree's own (psutil);
- ``steal_share``: the share of the machine's CPU time the hypervisor took (/proc/stat steal);
- the 1-minute load average at the window's start and end (as pyperf keeps it in its metadata);

and warns when others used ``OTHERS_WARN_CPUS`` or more, or steal took ``STEAL_WARN`` or more.
Where /proc/stat cannot be read (not Linux) nothing is recorded and nothing is claimed.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

OTHERS_WARN_CPUS = 0.25  # a quarter of a core of other work, on average over the window
STEAL_WARN = 0.05

_STAT = Path("/proc/stat")
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal (guest time is in user)
_BUSY = (0, 1, 2, 5, 6)
_STEAL = 7


@dataclass(frozen=True)
class LoadSample:
    """The machine's CPU counters and this process tree's CPU time at one moment."""

    jiffies: tuple[int, ...]  # /proc/stat's aggregate cpu line
    own_cpu_s: float  # this process and its live children, user + system
    loadavg_1m: float | None
    at_s: float  # time.monotonic()


@dataclass(frozen=True)
class MachineLoad:
    """The machine's load over a timed window (module docstring)."""

    seconds: float
    cpus: int
    others_cpus: float  # other processes' CPU use, in CPUs, averaged over the window
    steal_share: float  # of the machine's CPU time
    loadavg_1m_start: float | None
    loadavg_1m_end: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sample(stat: Path = _STAT) -> LoadSample | None:
    """The counters now; None where /proc/stat cannot be read."""
    try:
        line = stat.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    fields = line.split()
    if not fields or fields[0] != "cpu":
        return None
    try:
        jiffies = tuple(int(v) for v in fields[1:9])
    except ValueError:
        return None
    return LoadSample(jiffies, _own_cpu_seconds(), _loadavg(), time.monotonic())


def between(start: LoadSample | None, end: LoadSample | None) -> MachineLoad | None:
    """The load over the window from ``start`` to ``end``; None where either is missing or the
    counters did not move (a window shorter than a clock tick)."""
    if start is None or end is None or len(start.jiffies) < 8 or len(end.jiffies) < 8:
        return None
    delta = [b - a for a, b in zip(start.jiffies, end.jiffies, strict=True)]
    total = sum(delta)
    if total <= 0:
        return None
    cpus = os.cpu_count() or 1
    seconds = max(end.at_s - start.at_s, 1e-9)
    tick = total / (cpus * seconds)  # jiffies per CPU-second, as measured (USER_HZ)
    busy_s = sum(delta[i] for i in _BUSY) / tick
    own_s = max(end.own_cpu_s - start.own_cpu_s, 0.0)
    others = max(busy_s - own_s, 0.0) / seconds
    return MachineLoad(
        seconds=seconds,
        cpus=cpus,
        others_cpus=others,
        steal_share=delta[_STEAL] / total,
        loadavg_1m_start=start.loadavg_1m,
        loadavg_1m_end=end.loadavg_1m,
    )


def load_warnings(load: MachineLoad | None) -> list[str]:
    """What the reader should know when the machine was busy with other work."""
    if load is None:
        return []
    found = []
    if load.others_cpus >= OTHERS_WARN_CPUS:
        found.append(
            f"the machine was busy: other processes used {load.others_cpus:.2f} of its {load.cpus} CPUs "
            f"on average while the run was timed, so the figures are lower than an idle machine "
            "gives: close other programs and measure again"
        )
    if load.steal_share >= STEAL_WARN:
        found.append(
            f"the hypervisor took {load.steal_share:.0%} of the machine's CPU time (steal) while the "
            "run was timed: the VM's host is busy, and the figures vary with it; measure again later "
            "or on a dedicated machine"
        )
    return found


def _own_cpu_seconds() -> float:
    """CPU time of this process and its live children (loader workers), user + system."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:  # it ended meanwhile
            continue
    return total


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None
