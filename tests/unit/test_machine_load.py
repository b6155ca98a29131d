"""The machine's load over a run's timed window: other processes' CPU use and steal, from
/proc/stat's counters and the process tree's own CPU time, and the warnings they earn."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowrate.measure import machine_load
from flowrate.measure.machine_load import LoadSample, MachineLoad, between, load_warnings


def _sample(jiffies: tuple[int, ...], own_cpu_s: float, at_s: float, load: float = 1.0) -> LoadSample:
    return LoadSample(jiffies, own_cpu_s, load, at_s)


def test_other_processes_use_what_is_busy_less_this_process_trees_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(machine_load.os, "cpu_count", lambda: 2)
    # 10 s on 2 CPUs at 100 ticks a second: 2000 ticks; busy 1500 (user 1000, system 300, irq 100,
    # softirq 100), idle 400, steal 100; this process used 12 s of CPU
    start = _sample((0, 0, 0, 0, 0, 0, 0, 0), 3.0, 100.0, load=1.5)
    end = _sample((1000, 0, 300, 400, 0, 100, 100, 100), 15.0, 110.0, load=2.5)
    load = between(start, end)
    assert load == MachineLoad(
        seconds=10.0, cpus=2, others_cpus=0.3, steal_share=0.05, loadavg_1m_start=1.5, loadavg_1m_end=2.5
    )
    warnings = load_warnings(load)
    assert len(warnings) == 2
    assert warnings[0].startswith("the machine was busy: other processes used 0.30 of its 2 CPUs")
    assert warnings[1].startswith("the hypervisor took 5% of the machine's CPU time (steal)")


def test_a_quiet_machine_earns_no_warning_and_missing_counters_claim_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(machine_load.os, "cpu_count", lambda: 2)
    start = _sample((0,) * 8, 0.0, 0.0)
    quiet = between(start, _sample((1900, 0, 0, 100, 0, 0, 0, 0), 19.0, 10.0))  # all of it ours
    assert quiet is not None and quiet.others_cpus == 0 and quiet.steal_share == 0
    assert load_warnings(quiet) == []
    assert between(None, start) is None and between(start, None) is None
    assert between(start, _sample((0,) * 8, 0.0, 1.0)) is None  # the counters did not move
    assert load_warnings(None) == []


def test_proc_stat_is_read_for_its_aggregate_line_or_nothing(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 1 20 300 4 5 6 7 0 0\ncpu0 5 0 10 150 2 2 3 3 0 0\n")
    found = machine_load.sample(stat)
    assert found is not None and found.jiffies == (10, 1, 20, 300, 4, 5, 6, 7)
    stat.write_text("intr 1 2 3\n")
    assert machine_load.sample(stat) is None
    assert machine_load.sample(tmp_path / "absent") is None


def test_a_run_records_the_machines_load_over_its_timed_window() -> None:
    import os

    import flowrate

    # a window of many clock ticks: one shorter than a tick records no load (between() says None)
    result = flowrate.benchmark(
        "fc_mnist", size="debug", duration_s=0.3, min_steps=1, preheat_steps=1, device="cpu"
    )
    load = result.environment.machine_load
    assert load is not None and load.cpus == os.cpu_count()
    assert load.others_cpus is not None and load.others_cpus >= 0
    assert load.steal_share is not None and 0 <= load.steal_share <= 1
    assert load.seconds is not None and 0 < load.seconds <= result.summary.timed_duration_s + 1
