"""A record's kind and configuration identity (flowrate.results.identity), and the readers that
group by it: records at different serving loads, or of different kinds, are never one
configuration."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from factories import make_result, with_figures
from flowrate.analysis.grouping import problem_of
from flowrate.analysis.oracle import settings_of
from flowrate.analysis.plots import _series
from flowrate.results.compare import compare, problem_identity
from flowrate.results.identity import family, is_workload_field, kind_of, load_label, workload
from flowrate.results.metrics import METRICS
from flowrate.results.noise import configuration_key, noise_table
from flowrate.results.schema import Result
from flowrate.results.sections import Fidelity, Generation, Kind, ProblemInfo
from flowrate.results.serving import serving_from
from flowrate.results.store import StoredRun

URL = "http://127.0.0.1:8000"


def _serving(rate: Any = 1.0, **load: Any) -> Result:
    section = {
        "url": URL,
        "model": "m",
        "endpoint": "completions",
        "scenario": "server",
        "rate": rate,
        "burstiness": 1.0,
        "ramp_up_s": 0.0,
        "concurrency": None,
        "input_len": "16",
        "output_len": "8",
        "dataset": None,
        "replay": None,
        **load,
    }
    base = make_result(2.0, batch_size=1, problem="serve:m", mode="serve")
    return with_figures(
        base, problem=ProblemInfo(name="serve:m"), serving=serving_from(section), kind=Kind.SERVE
    )


def _check(result: Result) -> Result:
    return replace(result, fidelity=Fidelity(fell=True), kind=Kind.CHECK)


def _generation(prompt_len: int = 64, new_tokens: int = 16) -> Result:
    base = make_result(4.0, batch_size=2, problem="transformer", mode="generate")
    section = Generation(prompt_len=prompt_len, new_tokens=new_tokens)
    return with_figures(base, generation=section, kind=Kind.GENERATE)


def test_a_record_names_its_kind_and_an_earlier_one_is_told_by_the_section_only_its_kind_writes() -> None:
    run = make_result(10.0)
    assert kind_of(run) is Kind.RUN
    assert kind_of(_check(run)) is Kind.CHECK
    before = {**run.to_dict(), "schema_version": 6}
    del before["kind"]
    assert Result.from_dict(before).kind is Kind.RUN
    for section, kind in (("fidelity", Kind.CHECK), ("generation", Kind.GENERATE), ("serving", Kind.SERVE)):
        assert Result.from_dict({**before, section: {"final_loss": 1.0}}).kind is kind
    assert kind_of(_generation()) is Kind.GENERATE
    assert kind_of(_serving()) is Kind.SERVE
    assert workload(run) == {}
    assert workload(_generation(32, 8)) == {"prompt_len": 32, "new_tokens": 8, "prefill_logits": "all"}


def test_serving_runs_at_other_loads_are_other_configurations() -> None:
    one, again = _serving(1.0), _serving(1.0)
    assert configuration_key(one) == configuration_key(again)
    for other in (
        _serving(2.0),
        _serving(None, concurrency=4, scenario="concurrency"),
        _serving(1.0, burstiness=0.5),
        _serving(1.0, input_len="32"),
        _serving(1.0, url="http://127.0.0.1:9000"),
        _serving(1.0, server_device="H100"),
    ):
        assert configuration_key(other) != configuration_key(one)


def test_generations_of_other_lengths_and_other_kinds_are_other_configurations() -> None:
    assert configuration_key(_generation(64, 16)) == configuration_key(_generation(64, 16))
    assert configuration_key(_generation(64, 16)) != configuration_key(_generation(128, 16))
    train = make_result(4.0, batch_size=2, problem="transformer", mode="train")
    assert problem_identity(train)["kind"] == "run"
    assert configuration_key(_check(train)) != configuration_key(train)


def test_noise_pools_repeats_of_one_load_only() -> None:
    runs = [_serving(0.5), _serving(1.0), _serving(1.0), _serving(2.0)]
    rows = noise_table(runs)
    assert sorted((r.problem["rate"], r.runs) for r in rows) == [(0.5, 1), (1.0, 2), (2.0, 1)]


def test_compare_names_a_load_difference_as_a_mismatch() -> None:
    comparison = compare([_serving(0.5)], [_serving(1.0)])
    assert [(d.field, d.a, d.b) for d in comparison.problem_mismatch] == [("rate", 0.5, 1.0)]
    assert is_workload_field("rate") and is_workload_field("rate (within A)")
    assert is_workload_field("kind") and not is_workload_field("size")
    assert compare([_serving(1.0)], [_serving(1.0)]).problem_mismatch == []
    turns = compare([_serving(1.0)], [_serving(1.0, turns="3", think_time_s=1.0)]).problem_mismatch
    assert [(d.field, d.a, d.b) for d in turns] == [("turns", None, "3"), ("think_time_s", None, 1.0)]


def test_one_length_distribution_spelled_two_ways_is_one_load() -> None:
    """A record made before the spelling was settled (uniform:LOW,HIGH) is the same load as one
    that records LOW:HIGH: compare finds no mismatch and the labels agree."""
    short, long = _serving(1.0, input_len="64:256"), _serving(1.0, input_len="uniform:64,256")
    assert workload(short) == workload(long) and workload(long)["input_len"] == "64:256"
    assert compare([short], [long]).problem_mismatch == []
    assert load_label(long) == load_label(short) == "1 req/s, in 64:256 / out 8 tokens"
    assert workload(_serving(1.0, input_len="64:128")) != workload(short)


def test_load_labels_say_what_the_figures_were_measured_under() -> None:
    assert load_label(_serving(2.0)) == "2 req/s, in 16 / out 8 tokens"
    assert load_label(_serving("inf")) == "max rate, in 16 / out 8 tokens"
    assert load_label(_serving(None, concurrency=4)) == "concurrency 4, in 16 / out 8 tokens"
    assert load_label(_serving(2.0, burstiness=0.5)) == "2 req/s, burstiness 0.5, in 16 / out 8 tokens"
    assert load_label(_serving(2.0, dataset="d.jsonl", input_len=None)) == "2 req/s, dataset d.jsonl"
    assert (
        load_label(_serving(None, concurrency=2, turns="2:6"))
        == "concurrency 2, in 16 / out 8 tokens, 2:6 turns"
    )
    assert load_label(_generation(64, 16)) == "batch 2, prompt 64, 16 new"
    assert load_label(make_result(1.0)) == ""


def test_generations_and_servers_are_families_of_their_own() -> None:
    train = make_result(4.0, batch_size=2, problem="transformer", size="debug")
    generation = replace(_generation(), problem=train.problem)
    assert family(train) == problem_of(train) == "transformer/debug"
    assert problem_of(generation) == "transformer/debug (generate)"
    assert problem_of(StoredRun.from_result(generation)) == "transformer/debug (generate)"
    assert problem_of(_serving(server_device="H100")) == f"serve:m at {URL} on H100"


def test_the_oracle_and_the_batch_plot_keep_loads_apart() -> None:
    slow, fast = StoredRun.from_result(_serving(0.5)), StoredRun.from_result(_serving(2.0))
    assert settings_of(slow)["rate"] == 0.5 and settings_of(fast)["rate"] == 2.0
    series = _series([_serving(1.0), make_result(5.0)], METRICS["samples_per_sec"])
    assert [key[0] for key in series] == ["fc_mnist/debug"]  # no batch size to draw a serving run at


def test_constant_arrivals_are_a_load_of_their_own_and_old_records_read_as_random_ones() -> None:
    constant = _serving(2.0, arrivals="constant")
    assert load_label(constant) == "2 req/s constant, in 16 / out 8 tokens"
    assert configuration_key(constant) != configuration_key(_serving(2.0, arrivals="poisson"))
    assert configuration_key(_serving(2.0)) == configuration_key(_serving(2.0, arrivals="poisson"))
    assert workload(_serving(2.0, burstiness=0.5))["arrivals"] == "gamma"
