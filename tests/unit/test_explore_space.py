"""The search space, objectives and constraints of `flowrate explore`: read as a sweep reads its
grid, every mistake one ConfigError naming what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowrate.campaigns.explore.objectives import parse_constraint, parse_objective, parse_objectives
from flowrate.campaigns.explore.plan import Budget
from flowrate.campaigns.explore.settings import read_settings
from flowrate.campaigns.explore.space import load_space_file, merge_space, parse_space_flags
from flowrate.errors import ConfigError

GIB = 2**30


def test_ranges_doubling_ranges_and_lists_become_axes_with_typed_values() -> None:
    axes = parse_space_flags(
        ["batch-size=1..512:log2", "threads=1..4", "precision=fp32,bfloat16", "compile=0,1", "lr=1e-3,1e-4"]
    )
    by_name = {a.name: a for a in axes}
    assert by_name["batch_size"].values == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    assert by_name["batch_size"].numeric and by_name["batch_size"].log2
    assert by_name["threads"].values == (1, 2, 3, 4) and not by_name["threads"].log2
    assert by_name["precision"].values == ("fp32", "bf16") and not by_name["precision"].numeric
    assert by_name["compile"].values == (False, True)
    assert by_name["learning_rate"].values == (1e-3, 1e-4)  # the flag name's field
    space = merge_space(axes, {"size": "debug"})
    assert space.size == 10 * 4 * 2 * 2 * 2
    config = space.config_for(
        {"batch_size": 8, "threads": 2, "precision": "bf16", "compile": True, "learning_rate": 1e-3}, 2.5
    )
    assert (config.batch_size, config.threads, config.precision, config.compile, config.duration_s) == (
        8,
        2,
        "bf16",
        True,
        2.5,
    )


@pytest.mark.parametrize(
    ("flags", "base", "says"),
    [
        ([], {}, "the search space is empty"),
        (["threads=4..2"], {}, "empty: its low end is above its high end"),
        (["threads=1..4", "threads=1,2"], {}, "threads is given twice"),
        (["batch_size=1..64:log3"], {}, "unknown scale"),
        (["precision=1..4"], {}, "integer options"),
        (["batchsize=1..4"], {}, "did you mean batch_size"),
        (["threads=1..4"], {"threads": 2}, "threads is both a flag (--threads) and a --space axis"),
        (["threads"], {}, "expected KEY=VALUES"),
    ],
)
def test_bad_spaces_are_one_config_error(flags: list[str], base: dict[str, int], says: str) -> None:
    with pytest.raises(ConfigError, match=None) as raised:
        merge_space(parse_space_flags(flags), base)
    assert says in str(raised.value)


def test_a_space_file_gives_axes_base_and_settings_and_flags_override_it(tmp_path: Path) -> None:
    path = tmp_path / "space.toml"
    path.write_text(
        '[space]\nbatch_size = "1..8:log2"\nprecision = ["fp32", "bf16"]\n[base]\nsize = "debug"\n'
        '[explore]\nobjectives = ["samples_per_sec:max"]\nbudget = 20\n',
        encoding="utf-8",
    )
    file = load_space_file(path)
    assert file.settings == {"objectives": ["samples_per_sec:max"], "budget": 20}
    space = merge_space(parse_space_flags(["precision=fp32"]), {"threads": 1}, file)
    assert {a.name: a.values for a in space.axes} == {"batch_size": (1, 2, 4, 8), "precision": ("fp32",)}
    assert space.base == {"size": "debug", "threads": 1}
    fixed = merge_space([], {"batch_size": 4}, file)  # a flag fixes what the file searches
    assert [a.name for a in fixed.axes] == ["precision"] and fixed.base["batch_size"] == 4
    path.write_text('[space]\nthreads = "1..2"\n[base]\nthreads = 1\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="in both"):
        merge_space([], {}, load_space_file(path))
    path.write_text('[space]\nthreads = "1..2"\n[explore]\nbudjet = 3\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown \\[explore\\] entry 'budjet'"):
        load_space_file(path)


def test_objectives_name_metrics_of_the_table_and_take_their_direction() -> None:
    assert parse_objective("samples_per_sec").spec == "samples_per_sec:max"
    assert parse_objective("peak_memory:min").spec == "peak_memory_bytes:min"  # a unique leading part
    assert parse_objective("samples-per-sec:min").spec == "samples_per_sec:min"
    with pytest.raises(ConfigError, match="unknown metric 'speed'"):
        parse_objective("speed:max")
    assert parse_objective("final_loss").spec == "final_loss:min"  # fidelity, from a check of each point
    with pytest.raises(ConfigError, match="must be max, min or auto"):
        parse_objective("samples_per_sec:up")
    with pytest.raises(ConfigError, match="named twice"):
        parse_objectives(["samples_per_sec", "samples_per_sec:min"])


def test_constraints_read_units_and_measure_their_violation() -> None:
    memory = parse_constraint("peak_memory<16GiB")
    assert memory.bound == 16 * GIB and memory.upper
    assert memory.violation(8 * GIB) == -0.5 and memory.violation(20 * GIB) == 0.25
    rate = parse_constraint("samples_per_sec >= 1.5k")
    assert rate.bound == 1500 and not rate.upper and rate.violation(1200) == pytest.approx(0.2)
    assert parse_constraint("samples_per_sec>100samples/s").bound == 100
    for text, says in [
        ("power<3", "unknown metric"),
        ("peak_memory<16 parsecs", "unknown unit"),
        ("peak_memory=16GiB", "cannot read"),
    ]:
        with pytest.raises(ConfigError, match=says):
            parse_constraint(text)


def test_a_budget_is_runs_or_wall_time() -> None:
    assert Budget.parse("12") == Budget(runs=12)
    assert Budget.parse("2h") == Budget(seconds=7200)
    assert Budget.parse("90m") == Budget(seconds=5400) and Budget.parse("30s") == Budget(seconds=30)
    assert Budget(runs=5).room(3, 1e9) == 2 and Budget(seconds=60).room(100, 61) == 0
    for text in ("0", "soon", "-3h"):
        with pytest.raises(ConfigError, match="budget"):
            Budget.parse(text)


def test_the_explore_table_reads_each_setting_as_its_flag_does() -> None:
    settings = read_settings(
        {
            "objectives": "samples_per_sec:max",  # one, as one --objective
            "constraints": {"peak_memory": "<16GiB", "samples_per_sec": ">=100"},
            "budget": 20,
            "seed": 7,
            "initial": 3,
            "name": "night",
        }
    )
    assert [o.spec for o in settings.objectives] == ["samples_per_sec:max"]
    assert [str(c) for c in settings.constraints] == ["peak_memory_bytes<16GiB", "samples_per_sec>=100"]
    assert (settings.budget, settings.seed, settings.initial, settings.name) == (
        Budget(runs=20),
        7,
        3,
        "night",
    )
    listed = read_settings({"objectives": ["samples_per_sec", "peak_memory:min"], "constraints": ["mfu>0.1"]})
    assert len(listed.objectives) == 2 and len(listed.constraints) == 1
    assert read_settings({"budget": "2h"}).budget == Budget(seconds=7200)


def test_a_range_too_large_for_a_grid_is_refused_before_it_is_built() -> None:
    with pytest.raises(ConfigError, match="holds 1,000,000,000,000 values, more than the 1024"):
        parse_space_flags(["batch_size=1..1000000000000"])
    assert len(parse_space_flags(["batch_size=1..1000000000000:log2"])[0].values) == 40  # doubling: 40
