"""The made results other tests rank, compare and plot: their figures, computed here by hand.

tests/factories.py derives a made result's summary with flowrate's own assemble; these numbers
are worked out on paper, so a change in either shows here.
"""

from __future__ import annotations

import pytest

from factories import make_result
from flowrate.results.sections import Fidelity, Memory


def test_a_made_results_summary_is_the_hand_computed_one() -> None:
    # two one-step intervals of 10 samples at 100 and 200 samples/s: 0.1 s and 0.05 s,
    # then a 0.05 s checkpoint after the first one
    result = make_result(interval_rates=[100.0, 200.0], batch_size=10, checkpoint_after=[0])
    assert [i.kind for i in result.intervals] == ["compute", "checkpoint", "compute"]
    assert [i.seconds for i in result.intervals] == pytest.approx([0.1, 0.05, 0.05])
    assert [i.elapsed_s for i in result.intervals] == pytest.approx([0.1, 0.15, 0.2])
    s = result.summary
    assert s.samples_per_sec == pytest.approx(100.0)  # 20 samples / 0.2 s, the checkpoint included
    assert s.rate_samples_per_sec == pytest.approx(160.0)  # 0.6 * 200 + 0.4 * 100
    assert s.compute_samples_per_sec == pytest.approx(20 / 0.15)
    assert s.steps_per_sec == pytest.approx(10.0)
    assert s.model_flops_per_sec == pytest.approx(100.0 * 100_000)
    assert (s.median_samples_per_sec, s.mean_samples_per_sec) == pytest.approx((150.0, 150.0))
    assert (s.min_samples_per_sec, s.max_samples_per_sec) == (100.0, 200.0)
    assert s.stdev_samples_per_sec == pytest.approx(50.0 * 2**0.5)  # sample stdev of (100, 200)
    assert (s.timed_steps, s.timed_samples, s.intervals) == (2, 20, 2)
    assert (s.checkpoints, s.checkpoint_s, s.checkpoint_overhead) == pytest.approx((1, 0.05, 0.25))
    assert s.final_loss == pytest.approx(1.0) and result.losses == pytest.approx([2.0, 1.0])


def test_given_figures_are_kept_as_given() -> None:
    result = make_result(
        samples_per_sec=123.0, samples_per_joule=3.5, mfu=0.4, final_loss=0.7, peak_memory_bytes=None
    )
    assert result.summary.samples_per_sec == 123.0
    assert result.summary.steps_per_sec == 123.0 / 8
    # the default spread, 0.96 to 1.03 times it, has it in the middle
    assert result.summary.median_samples_per_sec == pytest.approx(123.0)
    assert result.energy.samples_per_joule == 3.5 and result.flops.mfu == 0.4
    assert result.fidelity == Fidelity(final_loss=0.7) and result.memory == Memory()
