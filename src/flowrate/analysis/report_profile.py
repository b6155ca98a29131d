"""The HTML report's profile section: for each run taken with --profile DIR, its step breakdown (on
a GPU with its idle time split by cause) and the five operators that lose the most time against
their roofline bound."""

from __future__ import annotations

from collections.abc import Sequence

from flowrate.analysis.grouping import problem_of
from flowrate.analysis.html import e
from flowrate.results.profile import Profile
from flowrate.results.store import StoredRun
from flowrate.units import seconds

_HEAD = ("operator", "time", "bound", "bound's time", "lost", "predicted", "calls")


def section(runs: Sequence[StoredRun]) -> str:
    """One table per profiled run; a note where none was profiled."""
    profiled = [(run, run.result.profile) for run in runs if run.result.profile is not None]
    if not profiled:
        return '<p class="note">No run was profiled (`flowrate run --profile DIR`).</p>'
    return "".join(_run(run, profile) for run, profile in profiled if profile is not None)


def _run(run: StoredRun, profile: Profile) -> str:
    title = (
        f'<h3><a href="#run-{e(run.run_id)}"><code>{e(run.run_id)}</code></a> {e(problem_of(run))}, '
        f"{profile.steps} steps in {e(seconds(profile.seconds))} ({e(profile.time_kind)})</h3>"
    )
    b = profile.breakdown
    parts = [
        ("compute", b.compute_s),
        ("memory-bound", b.memory_s),
        ("overhead", b.overhead_s),
        ("communication", b.communication_s),
        ("host-to-device", b.host_to_device_s),
        ("input wait", b.input_wait_s),
        ("idle", b.idle_s),
    ]
    split = ", ".join(f"{label} {seconds(value)}" for label, value in parts)
    if b.idle_split is not None:
        split += " (idle: " + ", ".join(f"{c} {seconds(s)}" for c, s in b.idle_split.parts()) + ")"
    if not profile.top_lost:
        return f'{title}<p>{e(split)}</p><p class="note">{e(profile.roof_reason or "no operator placed")}</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in _HEAD)
    rows = "".join(
        f"<tr><td><code>{e(op.op)}</code></td><td class=num>{e(seconds(op.seconds))}</td>"
        f"<td>{e(op.bound)}</td><td class=num>{e(seconds(op.bound_s))}</td>"
        f"<td class=num>{e(seconds(op.lost_s))}</td><td class=num>{e(seconds(op.predicted_s))}</td>"
        f"<td class=num>{op.calls}</td></tr>"
        for op in profile.top_lost
    )
    return f'{title}<p>{e(split)}</p><div class="scroll"><table><tr>{head}</tr>{rows}</table></div>'
