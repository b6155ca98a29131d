"""The summary's profile and cost rows, exactly as `flowrate run` and `show` print them."""

from __future__ import annotations

from flowrate.cli.profile_text import breakdown_line, cost_rows, profile_rows
from flowrate.results.cost import cost_of
from flowrate.results.profile import IdleSplit, Profile, ProfileOp, StepBreakdown


def test_the_profile_rows_give_the_breakdown_the_roof_and_the_top_operators() -> None:
    mm = ProfileOp("aten::mm", 3, 0.003, 10**9, 10**7, 1e12 / 3, 1e10 / 3, "compute", 0.001, 0.002, 0.0012)
    profile = Profile(
        directory="prof",
        steps=3,
        warmup_steps=1,
        seconds=0.01,
        time_kind="self CPU time",
        peak_flops=1e12,
        peak_bandwidth=1e11,
        roof_source="a fixed roof",
        launch_factor=10.0,
        breakdown=StepBreakdown(compute_s=0.003, memory_s=0.005, overhead_s=0.002, communication_s=0.0),
        top_lost=[mm],
    )
    assert profile_rows(profile) == [
        ("profile", "3 steps in 10 ms after 1 warm-up (self CPU time): prof"),
        (
            "breakdown",
            "compute 3 ms (30%), memory-bound 5 ms (50%), overhead 2 ms (20%), communication 0 s (0%), "
            "host-to-device —, input wait —, idle —",
        ),
        ("roof", "1 TFLOP/s, 100 GB/s, ridge 10 FLOP/B; overhead-bound beyond 10x the bound (a fixed roof)"),
        ("lost most", "aten::mm 3 ms (compute-bound, bound 1 ms, lost 2 ms, predicted 1.2 ms, 3 calls)"),
    ]


def test_without_a_roof_the_rows_say_why() -> None:
    profile = Profile(
        steps=3, seconds=0.01, roof_reason="no peak: bound unknown", cost_model_reason="no model"
    )
    assert profile_rows(profile)[2:] == [
        ("roof", "— (no peak: bound unknown)"),
        ("cost model", "— (no model)"),
    ]


def test_the_cost_rows() -> None:
    cost = cost_of(3.6, 0.5, 105.0, 2000.0, None, None)
    assert cost is not None
    assert cost_rows(cost) == [
        ("cost", "105 ksamples/$, 0.5 $/M tokens (at 3.6/h + 0.5/kWh)"),
        ("", "--energy-price: this run's energy was not measured, so it is not priced"),
    ]


def test_on_a_gpu_the_breakdown_row_splits_the_idle_time_by_cause() -> None:
    split = IdleSplit(host_wait_s=0.002, kernel_wait_s=0.0005, other_s=0.0015)
    breakdown = StepBreakdown(host_to_device_s=0.001, idle_s=0.004, idle_split=split)
    assert breakdown_line(breakdown, 0.01).endswith(
        "host-to-device 1 ms (10%), input wait —, "
        "idle 4 ms (40%) [host wait 2 ms, kernel wait 500 µs, other 1.5 ms]"
    )
