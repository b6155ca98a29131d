"""The HTML report's profile section: the breakdown and the operators losing most time, escaped."""

from __future__ import annotations

import dataclasses
import re

from factories import make_result
from flowrate.analysis.report import render_report
from flowrate.results.profile import IdleSplit, Profile, ProfileOp, StepBreakdown


def _op(name: str, lost: float) -> ProfileOp:
    return ProfileOp(name, 3, lost + 1e-3, 10**9, 10**7, 1e12, 1e10, "compute", 1e-3, lost, 2e-3)


def test_the_report_lists_each_profiled_runs_top_operators_in_order() -> None:
    profile = Profile(
        directory="prof",
        steps=3,
        seconds=0.5,
        time_kind="self CPU time",
        breakdown=StepBreakdown(compute_s=0.25, memory_s=0.125, overhead_s=0.125, communication_s=0.0),
        top_lost=[_op("aten::mm", 0.2), _op("<script>x</script>", 0.1)],
    )
    profiled = dataclasses.replace(make_result(100.0), run_id="aaaa00000001", profile=profile)
    page = render_report([profiled, dataclasses.replace(make_result(90.0), run_id="bbbb00000002")])
    section = re.search(r'<section id="profile">(.*?)</section>', page, re.S)
    assert section is not None
    html = section.group(1)
    assert "<h2>Where the time goes</h2>" in html
    assert "aaaa00000001" in html and "bbbb00000002" not in html  # the profiled run alone
    assert "compute 250 ms, memory-bound 125 ms, overhead 125 ms, communication 0 s" in html
    cells = re.findall(r"<tr><td><code>(.*?)</code></td><td class=num>(.*?)</td><td>(.*?)</td>", html)
    assert cells == [
        ("aten::mm", "201 ms", "compute"),
        ("&lt;script&gt;x&lt;/script&gt;", "101 ms", "compute"),
    ]


def test_the_report_says_when_no_run_was_profiled() -> None:
    page = render_report([make_result(100.0)])
    assert "No run was profiled (`flowrate run --profile DIR`)." in page


def test_on_a_gpu_the_report_splits_the_idle_time_by_cause() -> None:
    split = IdleSplit(host_wait_s=0.002, kernel_wait_s=0.0005, other_s=0.0015)
    profile = Profile(steps=3, seconds=0.01, breakdown=StepBreakdown(idle_s=0.004, idle_split=split))
    page = render_report([dataclasses.replace(make_result(100.0), run_id="aaaa00000001", profile=profile)])
    assert "idle 4 ms (idle: host wait 2 ms, kernel wait 500 µs, other 1.5 ms)" in page
