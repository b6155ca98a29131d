"""The Pareto frontier on hand-made points whose answer is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factories import make_result
from flowrate.analysis.pareto import dominates, pareto_front, parse_objective
from flowrate.errors import FlowrateError
from flowrate.results.store import Store, StoredRun


def run(name: str, samples_per_sec: float, memory: int, **figures: float) -> StoredRun:
    return StoredRun.from_result(
        make_result(samples_per_sec, peak_memory_bytes=memory, run_id=name, **figures),  # type: ignore[arg-type]
        tags=[name],
    )


def test_dominance_needs_no_worse_everywhere_and_better_somewhere() -> None:
    up_down = [True, False]
    assert dominates((2, 1), (1, 2), up_down)
    assert dominates((2, 2), (1, 2), up_down)
    assert not dominates((2, 2), (2, 2), up_down)  # equal: neither dominates
    assert not dominates((3, 3), (1, 2), up_down)  # faster but bigger: a trade-off


def test_the_frontier_of_throughput_against_memory() -> None:
    # (samples/s, peak memory): a, c, e trade off; b is beaten by a; d by c; f equals e exactly
    runs = [
        run("a", 100, 10),
        run("b", 90, 12),
        run("c", 300, 40),
        run("d", 250, 40),
        run("e", 500, 100),
        run("f", 500, 100),
    ]
    front = pareto_front(runs)
    assert [o.name for o in front.objectives] == ["samples_per_sec", "peak_memory_bytes"]
    assert [r.run_id for r in front.front] == ["e", "f", "c", "a"]  # best samples/s first
    assert sorted(r.run_id for r in front.dominated) == ["b", "d"]
    assert front.values["c"] == (300.0, 40.0)


def test_a_difference_within_one_percent_is_no_trade_off() -> None:
    """1 MB less peak RSS (0.3%) does not put a 10% slower run on the frontier."""
    up_down = [True, False]
    assert dominates((1000, 355e6), (900, 354e6), up_down)
    assert not dominates((1000, 355e6), (995, 354e6), up_down)  # tied everywhere: neither
    assert not dominates((995, 354e6), (1000, 355e6), up_down)
    assert dominates((1000, 355e6), (900, 354e6), up_down, tie=0.0) is False  # exact: a trade-off
    close = [run("a", 1000, 355_000_000), run("b", 900, 354_000_000)]
    assert [r.run_id for r in pareto_front(close).front] == ["a"]
    apart = [run("a", 1000, 355_000_000), run("b", 900, 300_000_000)]  # 15% less memory: a trade-off
    assert [r.run_id for r in pareto_front(apart).front] == ["a", "b"]


def test_runs_are_ranked_only_against_runs_of_their_own_problem() -> None:
    def of(name: str, problem: str, rate: float, memory: int) -> StoredRun:
        result = make_result(rate, peak_memory_bytes=memory, run_id=name, problem=problem, size="debug")
        return StoredRun.from_result(result)

    # the MLP is faster and smaller than every ResNet: ranked together it would hide them all
    runs = [of("m1", "fc_mnist", 9000, 10), of("r1", "resnet", 300, 40), of("r2", "resnet", 500, 60),
            of("r3", "resnet", 250, 60), of("m2", "fc_mnist", 8000, 12)]  # fmt: skip
    front = pareto_front(runs)
    assert [r.run_id for r in front.front] == ["m1", "r2", "r1"]  # problems by name, best first in each
    assert sorted(r.run_id for r in front.dominated) == ["m2", "r3"]
    assert "ranked within each of the 2 problems" in front.notes[-1]
    assert not pareto_front(runs[:1]).notes


def test_default_objectives_take_energy_and_fidelity_only_where_every_run_has_them() -> None:
    everywhere = [
        run("a", 100, 10, samples_per_joule=5.0, final_loss=0.5),
        run("b", 90, 10, samples_per_joule=6.0, final_loss=0.4),
    ]
    front = pareto_front(everywhere)
    assert [o.name for o in front.objectives] == [
        "samples_per_sec",
        "samples_per_joule",
        "peak_memory_bytes",
        "final_loss",
    ]
    assert {r.run_id for r in front.front} == {"a", "b"}  # a is faster, b more efficient and lower loss

    partly = [run("a", 100, 10, samples_per_joule=5.0), run("b", 90, 10)]
    front = pareto_front(partly)
    assert [o.name for o in front.objectives] == ["samples_per_sec", "peak_memory_bytes"]
    assert [r.run_id for r in front.front] == ["a"]
    assert front.notes == [
        "samples/J left out of the objectives: recorded for 1 of 2 runs "
        "(name it with --objective samples_per_joule to rank only the runs that have it)"
    ]


def test_named_objectives_exclude_runs_that_lack_them_and_say_why() -> None:
    runs = [run("a", 100, 10, final_loss=0.9), run("b", 200, 10, final_loss=1.2), run("c", 300, 10)]
    front = pareto_front(runs, [parse_objective("samples_per_sec"), parse_objective("final_loss:min")])
    assert {r.run_id for r in front.front} == {"a", "b"}
    assert [(r.run_id, why) for r, why in front.excluded] == [("c", "no loss reached recorded")]


def test_directions_can_be_turned_and_bad_objectives_are_named() -> None:
    runs = [run("small", 100, 10), run("big", 200, 50)]
    smallest = pareto_front(runs, [parse_objective("peak_memory_bytes:max")])
    assert [r.run_id for r in smallest.front] == ["big"]
    with pytest.raises(FlowrateError, match="unknown metric 'speed'; known metrics: samples_per_sec"):
        parse_objective("speed:max")
    with pytest.raises(FlowrateError, match="must be max, min or auto"):
        parse_objective("samples_per_sec:up")
    with pytest.raises(FlowrateError, match="named twice"):
        pareto_front(runs, [parse_objective("mfu"), parse_objective("mfu:min")])
    with pytest.raises(FlowrateError, match="no run records every objective"):
        pareto_front(runs, [parse_objective("samples_per_joule")])


def test_pareto_and_explore_read_objectives_with_one_parser() -> None:
    """pareto refused `peak_memory` and explore refused `:auto`: both now take both."""
    from flowrate.campaigns.explore.objectives import parse_objective as explore_objective

    for parse in (parse_objective, explore_objective):
        assert parse("peak_memory").spec == "peak_memory_bytes:min"
        assert parse("final_loss:auto").spec == "final_loss:min"
        assert parse("samples_per_sec:auto").spec == "samples_per_sec:max"
    assert str(parse_objective("peak_memory")) == "min peak memory"


def test_pareto_from_the_command_line(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as store:
        for name, rate, memory in [("aaaa0001", 100, 10), ("aaaa0002", 90, 12), ("aaaa0003", 300, 40)]:
            store.add(make_result(rate, peak_memory_bytes=memory, run_id=name), ["grid"])
    table = run_cli("pareto", "grid")
    assert table.code == 0, table.stderr
    assert "Pareto frontier: 2 of 3 runs" in table.stdout
    assert "aaaa0003" in table.stdout and "aaaa0002" not in table.stdout
    assert "aaaa0002 (dominated)" in run_cli("pareto", "--dominated").stdout
    data = json.loads(run_cli("pareto", "--json", "--objective", "samples_per_sec").stdout)
    assert [entry["run_id"] for entry in data["front"]] == ["aaaa0003"]
    bad = run_cli("pareto", "--objective", "sampels_per_sec")
    assert bad.code == 2 and "unknown metric 'sampels_per_sec'" in bad.stderr  # bad input


def test_the_oracle_view_from_the_command_line(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    """Per precision, the best batch size with its pooled between-run interval; a beaten one listed with
    --dominated; JSON with each figure's half-width; an axis that does not vary refused."""
    with Store(results_store) as store:
        for name, precision, batch, rates in [
            ("bbbb0001", "fp32", 8, (100, 104)),
            ("bbbb0003", "fp32", 16, (60, 62)),
            ("bbbb0005", "bf16", 8, (300, 306)),
        ]:
            for i, rate in enumerate(rates):
                result = make_result(
                    rate, batch_size=batch, precision=precision, run_id=f"{name[:-1]}{int(name[-1]) + i}"
                )
                store.add(result, ["grid"])
    table = run_cli("pareto", "grid", "--by", "precision", "--objective", "samples_per_sec")
    assert table.code == 0, table.stderr
    assert "Best configuration per precision (max samples/s): 3 configurations" in table.stdout
    lines = [line for line in table.stdout.splitlines() if "bbbb" in line]
    assert len(lines) == 2  # one best per precision; the beaten fp32 batch is not listed
    assert (
        "bf16" in lines[0]
        and "batch_size=8" in lines[0]
        and "303" in lines[0]
        and "pooled, 2 runs" in lines[0]
    )
    # the between-run CV pooled over the 3 configurations (3 degrees of freedom): 2.24%;
    # t(3) · 2.24% · 303 / √2 = 15.26
    assert "303 ± 15.26" in lines[0]
    assert "varies by 2.2% between runs" in table.stderr
    assert "dominated" in table.stderr  # the rule is stated
    shown = run_cli("pareto", "grid", "--by", "precision", "--objective", "samples_per_sec", "--dominated")
    assert "bbbb0003 +1" in shown.stdout and "dominated" in shown.stdout
    data = json.loads(run_cli("pareto", "grid", "--by", "batch_size", "--json").stdout)
    assert data["axis"] == "batch_size" and [s["value"] for s in data["slices"]] == [8, 16]
    best = data["slices"][0]["best"]
    assert best["runs"] == ["bbbb0005", "bbbb0006"] and best["settings"]["precision"] == "bf16"
    assert best["samples_per_sec"]["value"] == 303 and best["samples_per_sec"]["source"] == "pooled"
    bad = run_cli("pareto", "grid", "--by", "optimizer")
    assert bad.code == 2 and "--by optimizer: every selected run has optimizer=adamw" in bad.stderr


def test_every_table_prints_a_memory_figure_in_binary_units() -> None:
    """One peak memory, 270 x 2**20 bytes: explore printed "270 MiB" and pareto "283 MB"."""
    from flowrate.analysis.html import show_value
    from flowrate.cli import explore_text, pareto_text
    from flowrate.cli.runs_text import runs_rows

    figure = 270 * 2**20
    stored = run("aaaa0001", 100.0, figure)
    front = pareto_front([stored], [parse_objective("samples_per_sec"), parse_objective("peak_memory")])
    (row,) = pareto_text.rows(front, show_dominated=False)
    assert row[-1] == "270 MiB"  # pareto
    assert runs_rows([stored])[0][-2] == "270 MiB"  # runs
    assert explore_text._figure("peak_memory_bytes", figure) == "270 MiB"  # explore
    assert show_value("peak_memory_bytes", figure) == "270 MiB"  # report


def test_a_run_summary_prints_its_memory_in_binary_units() -> None:
    from flowrate.cli.run_text import _memory_line
    from flowrate.results.sections import Memory

    memory = Memory(3 * 2**30, 3.5 * 2**30, 270 * 2**20, "run")  # type: ignore[arg-type]
    assert _memory_line(memory) == "device peak 3 GiB allocated, 3.5 GiB reserved; process peak RSS 270 MiB"
