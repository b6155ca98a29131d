"""The input-bound share and its advice: more loader workers only onto free cores.

Core counts are given, not read from this machine, so every case runs the same anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from flowrate.measure.inputs import compute_threads, input_report, input_warning, loader_advice


@dataclass(frozen=True)
class Interval:
    seconds: float
    input_wait_s: float | None


def test_workers_and_compute_threads_filling_the_cores_never_hear_raise_workers() -> None:
    """Issue 14's case: resnet50 on a 2-core CPU ran slower with 2 workers than with 0."""
    warning = input_warning(0.30, workers=2, directory="d", threads=2, cores=2)
    assert warning is not None and warning.startswith("highly input-bound: 30.0% of the step time")
    assert "raise --loader-workers" not in warning
    assert (
        "2 loader workers and 2 compute threads share 2 cores: more workers would take cores from the "
        "step; try --loader-workers 0 (the step reads its own batches) or fewer --threads, and compare"
    ) in warning
    assert warning.endswith(
        "`flowrate analyze-input --data d` with the same options for the smallest loader that keeps up"
    )


@pytest.mark.parametrize(
    ("workers", "threads", "cores", "says"),
    [
        # cores free: more workers, onto them
        (2, 4, 16, "raise --loader-workers (now 2; 10 of this machine's 16 cores are free) or --prefetch"),
        (2, 1, 8, "raise --loader-workers (now 2; 5 of this machine's 8 cores are free)"),  # a GPU run
        (0, 1, 2, "raise --loader-workers (now 0; 1 of this machine's 2 cores are free)"),
        # no core free: trade a compute thread for a worker, or prefetch deeper
        (
            2, 2, 4,
            "no core is free for another worker (2 loader workers and 2 compute threads share 4 cores): "
            "try --loader-workers 3 --threads 1 and compare, or raise --prefetch",
        ),
        (
            0, 2, 2,
            "no core is free for another worker (0 loader workers and 2 compute threads share 2 cores): "
            "try --loader-workers 1 --threads 1 and compare",
        ),
        (3, 1, 4, "(3 loader workers and 1 compute thread share 4 cores): raise --prefetch"),
        (0, 1, 1, "(0 loader workers and 1 compute thread share 1 core): use more cores"),
        # oversubscribed: fewer workers, or fewer threads
        (4, 2, 4, "try --loader-workers 2 or fewer --threads"),
        (1, 8, 8, "try --loader-workers 0 (the step reads its own batches) or fewer --threads"),
        (0, 8, 4, "0 loader workers and 8 compute threads share 4 cores: lower --threads to 4"),
    ],
)  # fmt: skip
def test_the_advice_counts_the_cores(workers: int, threads: int, cores: int, says: str) -> None:
    advice = loader_advice(workers, threads, cores)
    assert says in advice
    if workers + threads >= cores:
        assert "raise --loader-workers" not in advice


def test_no_warning_below_five_percent_and_the_level_above() -> None:
    assert input_warning(0.049, 2, "d", 2, 2) is None
    moderately = input_warning(0.05, 2, "d", 1, 16)
    assert moderately is not None and moderately.startswith("moderately input-bound: 5.0%")
    assert "(≥ 5%); raise --loader-workers (now 2; 13 of" in moderately


def test_the_report_counts_the_runs_threads_on_a_cpu_and_one_on_an_accelerator() -> None:
    intervals = [Interval(1.0, 0.3), Interval(1.0, 0.1), Interval(1.0, None)]
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert compute_threads(torch.device("cpu")) == 2
        section, warnings = input_report({"workers": 2}, 2, "d", intervals, torch.device("cpu"), cores=2)
    finally:
        torch.set_num_threads(saved)
    assert section["input_bound_share"] == pytest.approx(0.2) and section["input_bound"] == "highly"
    assert section["input_wait_s"] == pytest.approx(0.4) and section["workers"] == 2
    [warning] = warnings
    assert "2 loader workers and 2 compute threads share 2 cores" in warning
    # on an accelerator the step holds one core (the process that launches kernels)
    assert compute_threads(torch.device("meta")) == 1
    _, [gpu] = input_report({}, 2, "d", intervals, torch.device("meta"), cores=4)
    assert "raise --loader-workers (now 2; 1 of this machine's 4 cores are free)" in gpu


def test_more_workers_than_cores_is_its_own_warning() -> None:
    intervals = [Interval(1.0, 0.0)]
    _, warnings = input_report({}, 6, "d", intervals, torch.device("meta"), cores=4)
    assert warnings == [
        "--loader-workers 6 is more than this machine's 4 cores: the workers compete with each other "
        "and with the step for them"
    ]
