"""Merging the ranks of a data-parallel run, and the distributed module's pure parts, without processes."""

from __future__ import annotations

import pytest

from factories import make_result
from flowrate.config import RunConfig
from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.distributed import _compare, per_rank_batch_size
from flowrate.execution.launch import Launch, launched
from flowrate.problems.registry import get_problem
from flowrate.results.merge import RankRun, merge_ranks
from flowrate.results.schema import Result


def ranks(*results: Result, hosts: tuple[str, ...] = ("node",) * 8) -> list[RankRun]:
    return [RankRun(r, r, hosts[r], f"cuda:{r}", result.to_dict()) for r, result in enumerate(results)]


def test_throughput_is_the_sum_over_ranks_and_each_rank_is_kept() -> None:
    a = make_result(interval_rates=[100, 110, 90, 105, 95], batch_size=8)
    b = make_result(interval_rates=[80, 85, 82, 81, 84], batch_size=8)
    merged = merge_ranks(ranks(a, b), "nccl", 60.0)
    d = merged.distributed
    assert d is not None
    assert merged.summary.samples_per_sec == a.summary.samples_per_sec + b.summary.samples_per_sec
    assert [r.samples_per_sec for r in d.ranks] == [
        a.summary.samples_per_sec,
        b.summary.samples_per_sec,
    ]
    assert d.samples_per_sec == merged.summary.samples_per_sec
    assert d.world_size == 2 and d.backend == "nccl" and d.hosts == 1
    assert merged.batch_size == d.global_batch_size == 16 and d.batch_size_per_rank == 8
    assert merged.summary.steps_per_sec == merged.summary.samples_per_sec / 16
    assert merged.summary.timed_samples == a.summary.timed_samples + b.summary.timed_samples
    for k, interval in enumerate(merged.intervals):  # interval k: the same steps on every rank, summed
        assert interval.samples_per_sec == a.intervals[k].samples_per_sec + b.intervals[k].samples_per_sec
        assert interval.samples == a.intervals[k].samples + b.intervals[k].samples
        assert interval.samples / interval.seconds == pytest.approx(interval.samples_per_sec)
    assert merged.summary.median_samples_per_sec == 180  # the median of the sums 180, 195, 172, 186, 179
    assert merged.losses == [(x + y) / 2 for x, y in zip(a.losses, b.losses, strict=True)]
    assert merged.run_id == a.run_id and merged.environment == a.environment
    assert Result.from_json(merged.to_json()) == merged  # the section survives the round trip


def test_ratios_are_averaged_and_memory_is_the_largest_rank() -> None:
    a = make_result(samples_per_sec=100.0, mfu=0.4, peak_memory_bytes=10)
    b = make_result(samples_per_sec=100.0, mfu=0.2, peak_memory_bytes=30)
    merged = merge_ranks(ranks(a, b), "gloo")
    assert merged.flops.mfu == pytest.approx(0.3)  # summed FLOP/s over the sum of the peaks
    assert merged.flops.model_flops_per_sec == pytest.approx(200.0 * 1e5)
    assert merged.memory.process_peak_rss_bytes == 30


def test_energy_counts_a_shared_counter_once_and_distinct_ones_each() -> None:
    a = make_result(samples_per_sec=100.0, samples_per_joule=2.0)
    b = make_result(samples_per_sec=100.0, samples_per_joule=2.0)
    shared = merge_ranks(ranks(a, b), "gloo").energy  # one host, one RAPL package: counted once
    assert shared.joules == a.energy.joules and shared.ranks_metered == [0]
    apart = merge_ranks(ranks(a, b, hosts=("n1", "n2")), "gloo").energy
    assert apart.joules == pytest.approx(a.energy.joules + b.energy.joules)
    assert apart.samples_per_joule == pytest.approx(
        (a.summary.timed_samples + b.summary.timed_samples) / apart.joules
    )
    unmetered = merge_ranks(ranks(make_result(), make_result()), "gloo").energy
    assert make_result().energy == unmetered and unmetered.joules is None


def test_warnings_name_the_rank_and_a_straggler_is_flagged() -> None:
    a = make_result(samples_per_sec=100.0, warnings=["shared"])
    b = make_result(samples_per_sec=70.0, warnings=["shared", "only here"])
    warnings = merge_ranks(ranks(a, b), "gloo").warnings
    assert warnings[:2] == ["shared", "rank 1: only here"]
    assert "differs by 35%: rank 1 70 samples/s, rank 0 100" in warnings[2]


def test_misaligned_intervals_are_refused() -> None:
    a = make_result(interval_rates=[100, 100, 100])
    b = make_result(interval_rates=[100, 100])
    with pytest.raises(FlowrateError, match="different numbers of intervals"):
        merge_ranks(ranks(a, b), "gloo")


def test_global_batch_must_divide_among_the_ranks() -> None:
    problem = get_problem("fc_mnist", "debug")
    assert per_rank_batch_size(RunConfig(global_batch_size=64), problem, 4) == 16
    assert per_rank_batch_size(RunConfig(batch_size=5), problem, 4) == 5  # --batch-size is per rank
    with pytest.raises(ConfigError, match="63 is not divisible by the world size 4") as raised:
        per_rank_batch_size(RunConfig(global_batch_size=63), problem, 4)
    assert raised.value.field == "global_batch_size"
    with pytest.raises(ConfigError, match="not both"):
        RunConfig(batch_size=4, global_batch_size=8)


def test_a_configuration_that_differs_names_the_rank_and_the_flag() -> None:
    def described(config: RunConfig) -> dict[str, object]:
        return {"config": config.to_dict(), "problem": {"parameters": 1}, "versions": {"flowrate": "1"}}

    base = described(RunConfig())
    _compare(1, base, described(RunConfig()))
    with pytest.raises(ConfigError, match=r"0\.01 on rank 3 but 0\.0001 on rank 0") as raised:
        _compare(3, base, described(RunConfig(learning_rate=0.01)))
    assert raised.value.field == "lr"
    with pytest.raises(ConfigError, match="rank 2 built"):
        _compare(2, base, {**base, "problem": {"parameters": 2}})
    with pytest.raises(FlowrateError, match="rank 1 runs flowrate 2 but rank 0 runs 1"):
        _compare(1, base, {**base, "versions": {"flowrate": "2"}})


def test_a_launch_is_read_from_torchruns_variables() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    assert launched(env) == Launch(rank=1, world_size=2, local_rank=1)
    assert launched({k: v for k, v in env.items() if k != "MASTER_PORT"}) is None
    with pytest.raises(FlowrateError, match="outside WORLD_SIZE"):
        launched({**env, "RANK": "2"})
