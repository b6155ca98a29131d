"""The summary's rows for a run's profile (--profile DIR), its cost (--price-per-hour,
--energy-price, --prices) and its time to solution (--to-solution, --scaling): pure functions of
the record's sections."""

from __future__ import annotations

from flowrate.results.cost import Cost
from flowrate.results.profile import Profile, ProfileOp, StepBreakdown
from flowrate.results.solution import Solution
from flowrate.units import duration, seconds, si

_BREAKDOWN = (
    ("compute_s", "compute"),
    ("memory_s", "memory-bound"),
    ("overhead_s", "overhead"),
    ("communication_s", "communication"),
    ("host_to_device_s", "host-to-device"),
    ("input_wait_s", "input wait"),
    ("idle_s", "idle"),
)


def profile_rows(profile: Profile) -> list[tuple[str, str]]:
    """Where the profiled steps' time went, the roof, and the operators losing the most time."""
    what = profile.unit or "steps"
    steps = f"{profile.steps} {what} in {seconds(profile.seconds)} after {profile.warmup_steps} warm-up"
    rows = [("profile", f"{steps} ({profile.time_kind}): {profile.directory}")]
    rows.append(("breakdown", breakdown_line(profile.breakdown, profile.seconds)))
    if profile.peak_flops is not None and profile.peak_bandwidth is not None:
        ridge = profile.peak_flops / profile.peak_bandwidth
        peaks = f"{si(profile.peak_flops, 'FLOP/s')}, {si(profile.peak_bandwidth, 'B/s')}"
        roof = f"{peaks}, ridge {ridge:.3g} FLOP/B"
        factor = f"{profile.launch_factor:g}" if profile.launch_factor is not None else "—"
        rows.append(("roof", f"{roof}; overhead-bound beyond {factor}x the bound ({profile.roof_source})"))
    else:
        rows.append(("roof", f"— ({profile.roof_reason})"))
    for n, op in enumerate(profile.top_lost):
        rows.append(("lost most" if n == 0 else "", lost_line(op)))
    if profile.cost_model_reason:
        rows.append(("cost model", f"— ({profile.cost_model_reason})"))
    return rows


def breakdown_line(breakdown: StepBreakdown, total_s: float) -> str:
    """Each kind of work's seconds and share of the profiled steps, the idle time's split by cause
    where measured; a dash where not measurable."""
    parts = []
    for name, label in _BREAKDOWN:
        value = getattr(breakdown, name)
        if value is None:
            parts.append(f"{label} —")
        else:
            share = f" ({value / total_s:.0%})" if total_s > 0 else ""
            parts.append(f"{label} {seconds(value)}{share}")
            if name == "idle_s" and breakdown.idle_split is not None:
                causes = ", ".join(f"{cause} {seconds(s)}" for cause, s in breakdown.idle_split.parts())
                parts[-1] += f" [{causes}]"
    return ", ".join(parts)


def lost_line(op: ProfileOp) -> str:
    """One operator: its time, its bound's, the time lost and the cost model's price."""
    predicted = f", predicted {seconds(op.predicted_s)}" if op.predicted_s is not None else ""
    return (
        f"{op.op} {seconds(op.seconds)} ({op.bound}-bound, bound {seconds(op.bound_s)}, "
        f"lost {seconds(op.lost_s)}{predicted}, {op.calls} calls)"
    )


def cost_rows(cost: Cost) -> list[tuple[str, str]]:
    """Samples per dollar, dollars per million tokens and the energy's cost at the user's prices."""
    prices = [f"{cost.price_per_hour:g}/h" if cost.price_per_hour is not None else ""]
    if cost.energy_price_per_kwh is not None:
        prices.append(f"{cost.energy_price_per_kwh:g}/kWh")
    line = f"{si(cost.samples_per_dollar, 'samples/$')}"
    if cost.dollars_per_million_tokens is not None:
        line += f", {cost.dollars_per_million_tokens:.4g} $/M tokens"
    if cost.energy_cost is not None:
        line += f", energy {cost.energy_cost:.4g} $ over the timed window"
    source = f" from {cost.prices_from}" if cost.prices_from else ""
    rows = [("cost", f"{line} (at {' + '.join(p for p in prices if p)}{source})")]
    if cost.reason:
        rows.append(("", cost.reason))
    return rows


def solution_rows(solution: Solution) -> list[tuple[str, str]]:
    """The job at the measured rate, then at each size of a scaling study (or why not)."""
    rows = [("to solution", solution_line(solution))]
    for n, point in enumerate(solution.devices):
        dollars = f", {point.dollars:.4g} $" if point.dollars is not None else ""
        took = f"{duration(point.seconds)}{dollars} (efficiency {point.efficiency:.3g})"
        many = "s" if point.devices != 1 else ""
        rows.append(("at N devices" if n == 0 else "", f"{point.devices} device{many}: {took}"))
    if solution.devices:
        rows.append(("", f"(at {solution.devices_rest_on})"))
    elif solution.devices_reason:
        rows.append(("at N devices", f"— ({solution.devices_reason})"))
    return rows


def solution_line(solution: Solution) -> str:
    """A job's projected wall time (and cost) at the measured rate, and what it rests on."""
    job = f"{solution.amount:g} {solution.unit}"
    if solution.seconds is None:
        return f"{job}: — ({solution.reason})"
    dollars = f", {solution.dollars:.4g} $" if solution.dollars is not None else ""
    return f"{job}: {duration(solution.seconds)}{dollars} (at {solution.rests_on})"
