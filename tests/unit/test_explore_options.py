"""flowrate.campaigns.explore.options: `flowrate explore`'s options and a space file read into what
to explore and how the search runs: the defaults, a flag over the file's [explore] table, the
file's [base] duration as the top rung, and a mistake in the file said before the flags' base."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowrate.campaigns.explore.objectives import parse_objectives
from flowrate.campaigns.explore.options import ExploreOptions, plan_exploration
from flowrate.campaigns.explore.plan import Budget
from flowrate.errors import ConfigError

BASE = {"problem": "fc_mnist", "size": "debug"}


def _flags() -> dict[str, Any]:
    return dict(BASE)


def test_defaults_without_a_file() -> None:
    planned = plan_exploration(ExploreOptions(space=("batch_size=1..4",)), _flags)
    assert (planned.budget, planned.seed, planned.initial) == (Budget(runs=12), 0, None)
    assert planned.spec.objectives == parse_objectives(("samples_per_sec:max", "peak_memory_bytes:min"))
    assert planned.spec.fidelity.durations == (10.0,) and planned.spec.name is None
    assert planned.spec.space.names == ("batch_size",)


def test_flags_over_the_files_explore_table_and_its_duration_as_the_top_rung(tmp_path: Path) -> None:
    path = tmp_path / "space.toml"
    path.write_text(
        '[space]\nbatch_size = "1..4"\n[base]\nduration_s = 9.0\n'
        '[explore]\nbudget = "2h"\nseed = 5\ninitial = 3\nname = "file"\n'
    )
    options = ExploreOptions(space_file=str(path), budget="4", min_duration=1.0, name="flag")
    planned = plan_exploration(options, _flags)
    assert (planned.budget, planned.seed, planned.initial) == (Budget(runs=4), 5, 3)
    assert planned.spec.fidelity.durations == (1.0, 3.0, 9.0) and planned.spec.name == "flag"
    assert plan_exploration(ExploreOptions(space_file=str(path), initial=2), _flags).initial == 2


def test_a_mistake_in_the_file_is_said_before_the_flags_base_is_read(tmp_path: Path) -> None:
    path = tmp_path / "space.toml"
    path.write_text('[space]\nbatch_size = "1..4"\n[explore]\nseed = "abc"\n')

    def bad_flags() -> dict[str, Any]:
        raise ConfigError("batch_size", "the flags' mistake")

    with pytest.raises(ConfigError) as said:
        plan_exploration(ExploreOptions(space_file=str(path)), bad_flags)
    assert said.value.field == "space-file" and said.value.message.startswith(f"{path}: seed: ")
