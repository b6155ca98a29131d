"""One definition per setting: RunConfig's and GenerateConfig's fields carry their Settings, and the
command line's options, its value checks, a sweep's keys and the reference table are all read
from them."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from flowrate.campaigns.explore.space import merge_space, parse_space_flags
from flowrate.campaigns.process.job import GENERATE
from flowrate.campaigns.sweep.spec import (
    canonical_key,
    load_sweep_file,
    merge_spec,
    parse_grid_flags,
    plan_points,
)
from flowrate.cli.generate import generate_options
from flowrate.cli.main import cli
from flowrate.cli.options import run_options
from flowrate.config import (
    BOUNDS,
    FLAG_NAMES,
    Bounds,
    GenerateConfig,
    RunConfig,
    reference,
    setting_of,
    settings,
)
from flowrate.config.run import RECORD_ONLY
from flowrate.config.setting import SETTING
from flowrate.config.values import BadValue, doubling, items, positive_ints, to_batch, to_bool, to_int
from flowrate.errors import ConfigError

SWEEP_BASE = {"problem": "fc_mnist", "size": "debug", "device": "cpu"}


def _run_param(name: str) -> click.Parameter:
    command = cli.get_command(click.Context(cli), "run")
    assert command is not None
    return next(p for p in command.params if p.name == name)


def _sweep_threads(*values: str) -> None:
    plan_points(merge_spec(SWEEP_BASE, parse_grid_flags([f"threads={','.join(values)}"])))


def _set_threads(monkeypatch: pytest.MonkeyPatch, **changes: object) -> None:
    """Change the threads field's Setting, in its metadata: the one place it is declared."""
    field = RunConfig.__dataclass_fields__["threads"]
    changed = dataclasses.replace(field.metadata[SETTING], **changes)
    monkeypatch.setattr(field, "metadata", types.MappingProxyType({SETTING: changed}))


def test_a_bound_changed_in_one_place_moves_the_flag_the_sweep_and_the_table(
    monkeypatch: pytest.MonkeyPatch, run_cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    param = _run_param("threads")
    assert param.type.convert("8", param, None) == 8
    _sweep_threads("2", "8")  # within 1..1024: plans

    _set_threads(
        monkeypatch, bounds=Bounds("a positive integer", 1, 4), help="Threads, at most four of them."
    )

    # the command line: `flowrate run --threads 8` refused as it is read, naming the flag
    with pytest.raises(ConfigError, match="must be at most 4, got 8"):
        param.type.convert("8", param, None)
    outcome = run_cli("run", "-p", "fc_mnist", "--size", "debug", "--threads", "8")
    assert outcome.code == 2 and "error: --threads: must be at most 4, got 8" in outcome.stderr
    # its --help, as run_options declares a command now
    fresh = click.command()(run_options(lambda **flags: None))
    assert "Threads, at most four of them." in CliRunner().invoke(fresh, ["--help"]).output
    # a sweep's point and a sweep file's, before anything runs
    with pytest.raises(ConfigError, match=r"must be at most 4, got 8 \(point 2 of 2: threads=8\)"):
        _sweep_threads("2", "8")
    file = tmp_path / "sweep.toml"
    file.write_text("[grid]\nthreads = [2, 8]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be at most 4, got 8"):
        plan_points(merge_spec(SWEEP_BASE, {}, load_sweep_file(file)))
    outcome = run_cli("sweep", "-p", "fc_mnist", "--size", "debug", "-g", "threads=2,8", "--dry-run")
    assert outcome.code == 2 and "error: --threads: must be at most 4, got 8" in outcome.stderr
    # an exploration's space, checked as a sweep's points are
    space = merge_space(parse_space_flags(["threads=2,8"]), SWEEP_BASE)
    with pytest.raises(ConfigError, match="must be at most 4, got 8"):
        space.check()
    # the Python API, the bounds table and the reference
    with pytest.raises(ConfigError, match="must be at most 4"):
        RunConfig(threads=8)
    assert BOUNDS["threads"].high == 4
    row = next(r for r in reference(RunConfig) if r.field == "threads")
    assert (row.bounds, row.help) == ("[1, 4]", "Threads, at most four of them.")


def _generate_param(name: str) -> click.Parameter:
    command = cli.get_command(click.Context(cli), "generate")
    assert command is not None
    return next(p for p in command.params if p.name == name)


def _sweep_repeats(*values: str) -> None:
    grid = parse_grid_flags([f"repeats={','.join(values)}"], GENERATE)
    plan_points(merge_spec({"problem": "transformer", "size": "debug"}, grid, command=GENERATE))


def test_a_generate_bound_changed_in_one_place_moves_the_flag_the_sweep_and_the_table(
    monkeypatch: pytest.MonkeyPatch, run_cli
) -> None:  # type: ignore[no-untyped-def]
    param = _generate_param("repeats")
    assert param.type.convert("20", param, None) == 20
    _sweep_repeats("2", "20")  # within 1..100000: plans

    field = GenerateConfig.__dataclass_fields__["repeats"]
    changed = dataclasses.replace(
        field.metadata[SETTING], bounds=Bounds("a positive integer", 1, 10), help="At most ten of them."
    )
    monkeypatch.setattr(field, "metadata", types.MappingProxyType({SETTING: changed}))

    # the command line: `flowrate generate --repeats 20` refused as it is read, naming the flag
    with pytest.raises(ConfigError, match="must be at most 10, got 20"):
        param.type.convert("20", param, None)
    outcome = run_cli("generate", "-p", "transformer", "--size", "debug", "--repeats", "20")
    assert outcome.code == 2 and "error: --repeats: must be at most 10, got 20" in outcome.stderr
    # its --help, as generate_options declares the command now
    fresh = click.command()(generate_options(lambda **flags: None))
    assert "At most ten of them. [default: 5]" in CliRunner().invoke(fresh, ["--help"]).output
    # a generate sweep's point, before anything runs
    with pytest.raises(ConfigError, match=r"must be at most 10, got 20 \(point 2 of 2: repeats=20\)"):
        _sweep_repeats("2", "20")
    # the Python API and the reference
    with pytest.raises(ConfigError, match="must be at most 10"):
        GenerateConfig(repeats=20)
    row = next(r for r in reference(GenerateConfig) if r.field == "repeats")
    assert (row.bounds, row.help) == ("[1, 10]", "At most ten of them.")


def test_every_generate_setting_has_its_flag_and_is_a_sweep_key() -> None:
    command = cli.get_command(click.Context(cli), "generate")
    assert command is not None
    by_name = {p.name: p for p in command.params}
    for found in settings(GenerateConfig):
        name = found.name if found.setting.own_option else "extra_options"  # -O, the problem's options
        param = by_name[name]
        assert isinstance(param, click.Option)
        assert tuple(param.opts) == found.flags and param.help == found.help
    keys = merge_spec({}, parse_grid_flags(["duration=2", "prefill_logits=ALL"], GENERATE), command=GENERATE)
    assert keys.grid == {"duration_s": (2.0,), "prefill_logits": ("all",)}


def test_a_flag_renamed_in_one_place_renames_the_option_and_the_sweep_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _set_threads(monkeypatch, flags=("--cpu-threads", "--threads"))  # the old spelling kept
    fresh = click.command()(run_options(lambda **flags: None))
    result = CliRunner().invoke(fresh, ["--cpu-threads", "3"])
    assert result.exit_code == 0, result.output
    assert merge_spec(SWEEP_BASE, parse_grid_flags(["cpu_threads=1,2"])).grid == {"threads": (1, 2)}
    assert setting_of(RunConfig, "threads").flag == "--cpu-threads"


def test_a_setting_no_sweep_may_vary_is_no_sweep_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_grid_flags(["threads=1,2"]) == {"threads": (1, 2)}
    _set_threads(monkeypatch, sweepable=False)
    with pytest.raises(ConfigError, match="applies to one run: give --threads to `flowrate run`"):
        parse_grid_flags(["threads=1,2"])
    with pytest.raises(ConfigError, match="applies to one run: give --threads to `flowrate run`"):
        parse_space_flags(["threads=1..4"])


def test_a_one_run_setting_names_the_command_that_takes_it() -> None:
    with pytest.raises(ConfigError, match="give it to `flowrate generate`, not a sweep"):
        canonical_key("profile_dir", "profile_dir", GENERATE)
    with pytest.raises(ConfigError, match="give it to `flowrate run`, not a sweep"):
        canonical_key("profile_dir", "profile_dir")


def test_the_reference_lists_every_field() -> None:
    rows = reference(RunConfig)
    assert [r.field for r in rows] == [
        f.name for f in dataclasses.fields(RunConfig) if f.name not in RECORD_ONLY
    ]
    for row in rows:
        assert row.flags.startswith("-") and row.help and row.type, row
    numeric = {f.name for f in settings(RunConfig) if f.kind in ("int", "float", "batch", "count_or_auto")}
    assert numeric == set(BOUNDS), "a number without bounds, or bounds on something else"
    batch = next(r for r in rows if r.field == "batch_size")
    assert (batch.flags, batch.type, batch.bounds, batch.unit) == (
        "-b, --batch-size",
        "integer or auto",
        "[1, 2147483647]",
        "samples",
    )
    precision = next(r for r in rows if r.field == "precision")
    assert precision.type.startswith("choice: fp32, tf32, bf16") and precision.default == "fp32"


def test_every_setting_has_its_flag_on_run_with_its_help() -> None:
    command = cli.get_command(click.Context(cli), "run")
    assert command is not None
    by_name = {p.name: p for p in command.params}
    for found in settings(RunConfig):
        if not found.setting.own_option:
            continue
        param = by_name[found.name]
        assert isinstance(param, click.Option)
        assert tuple(param.opts) == found.flags and param.help == found.help


def test_flag_names_are_the_flags_that_differ_from_their_field() -> None:
    assert FLAG_NAMES == {
        "learning_rate": "lr",
        "device_memory_limit_gib": "device_memory_limit",
        "preheat_steps": "preheat",
        "duration_s": "duration",
        "target_interval_s": "target_interval",
        "data_dir": "data",
        "dist_timeout_s": "dist_timeout",
        "profile_dir": "profile",
        "energy_price_per_kwh": "energy_price",
    }


def test_the_value_reader() -> None:
    assert to_int(" 16 ") == 16 and to_batch("AUTO") == "auto" and to_batch(8) == 8
    assert to_bool("yes") is True and to_bool(False) is False
    assert doubling("1..8") == [1, 2, 4, 8] and doubling("3..13") == [3, 6, 12]
    assert items("1,2,") == ["1", "2"] and items([1, 2]) == [1, 2] and items(3) == [3]
    assert positive_ints("4,1,2,4", "nproc", "1,2") == [1, 2, 4]
    for bad, reader in ((2.5, to_int), (True, to_int), ({"a": 1}, to_int), ("big", to_batch), ("x", to_bool)):
        with pytest.raises(BadValue):
            reader(bad)
    with pytest.raises(BadValue, match=r"write A\.\.B, 1 ≤ A ≤ B"):
        doubling("8..2")
    with pytest.raises(ConfigError, match="expected positive numbers like 1,2"):
        positive_ints("0,1", "nproc", "1,2")


def test_a_table_in_a_sweep_file_is_one_line_naming_the_key(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    file = tmp_path / "sweep.toml"
    file.write_text("[grid]\nbatch_size = {a = 1}\n", encoding="utf-8")
    outcome = run_cli("sweep", "-p", "fc_mnist", "--file", str(file), "--dry-run")
    assert outcome.code == 2 and "Traceback" not in outcome.stderr
    assert "error: --file: batch_size: cannot read {'a': 1} as an integer or 'auto'" in outcome.stderr
