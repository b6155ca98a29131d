"""Sweeps without processes: grid parsing, order, out-of-memory skipping, resume, exit status.

A fake point runner stands in for the fresh process; the store is a real one in a temp folder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from factories import make_result
from flowrate.campaigns.process.child import CRASHED, ERROR, OOM, ChildOutcome
from flowrate.campaigns.process.job import Job
from flowrate.campaigns.sweep.run import (
    PointReport,
    SweepInterrupted,
    SweepProgress,
    SweepStart,
    run_sweep,
    sweep_in_store,
)
from flowrate.campaigns.sweep.spec import (
    PlannedPoint,
    SweepSpec,
    expand_grid,
    load_sweep_file,
    merge_spec,
    parse_grid_flags,
    plan_points,
)
from flowrate.config import RunConfig
from flowrate.errors import ConfigError
from flowrate.results.store import Store
from flowrate.units import duration

BASE = {"problem": "fc_mnist", "size": "debug", "device": "cpu"}


def spec(*flags: str, name: str | None = None, **base: Any) -> SweepSpec:
    return merge_spec({**BASE, **base}, parse_grid_flags(flags), name=name)


class FakeRunner:
    """Runs nothing: each point 'succeeds' unless ``fail`` says how it fails."""

    def __init__(self, fail: Callable[[RunConfig], str | None] = lambda c: None) -> None:
        self.fail = fail
        self.calls: list[RunConfig] = []

    def __call__(self, job: Job) -> ChildOutcome:
        config = job.config
        self.calls.append(config)
        kind = self.fail(config)
        if kind is None:
            return ChildOutcome(make_result(batch_size=int(config.batch_size or 1)))
        message = f"out of memory at batch size {config.batch_size} on cpu" if kind == OOM else "it broke"
        return ChildOutcome(None, kind, message)

    def batches(self, precision: str | None = None) -> list[Any]:
        return [c.batch_size for c in self.calls if precision is None or c.precision.value == precision]


class Log:
    """A SweepListener that keeps what it was told."""

    def __init__(self) -> None:
        self.start: SweepStart | None = None
        self.progress: list[SweepProgress] = []
        self.reports: list[PointReport] = []

    def begin(self, start: SweepStart) -> None:
        self.start = start

    def starting(self, point: PlannedPoint, progress: SweepProgress) -> None:
        pass

    def recorded(self, report: PointReport, progress: SweepProgress) -> None:
        self.reports.append(report)
        self.progress.append(progress)


@pytest.fixture
def store(tmp_path: Path) -> Store:  # type: ignore[misc]
    with Store(tmp_path / "sweeps.db") as opened:
        yield opened


# --- grid values ---------------------------------------------------------------------------------


def test_a_range_doubles_from_a_to_b_inclusive() -> None:
    grid = parse_grid_flags(["batch_size=1..512"])
    assert grid == {"batch_size": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)}
    assert parse_grid_flags(["batch-size=3..24"])["batch_size"] == (3, 6, 12, 24)
    assert parse_grid_flags(["m=1024..4096"])["m"] == (1024, 2048, 4096)
    assert parse_grid_flags(["batch_size=4..4"])["batch_size"] == (4,)
    assert parse_grid_flags(["batch_size=8..15"])["batch_size"] == (8,)


def test_comma_lists_are_typed_canonical_and_without_duplicates() -> None:
    grid = parse_grid_flags(
        ["precision=fp32,BF16,bfloat16", "lr=1e-3, 1e-4", "mode=training,infer", "batch_size=2,auto,2,1..4"]
    )
    assert grid == {
        "precision": ("fp32", "bf16"),
        "learning_rate": (1e-3, 1e-4),
        "mode": ("train", "infer"),
        "batch_size": (2, "auto", 1, 4),
    }
    assert parse_grid_flags(["causal=true,false"]) == {"causal": (1, 0)}  # like -O causal=true


def test_flag_names_are_grid_keys_too() -> None:
    grid = parse_grid_flags(["duration=1,2", "preheat=0,1", "target-interval=0.1", "seq-len=64,128"])
    assert list(grid) == ["duration_s", "preheat_steps", "target_interval_s", "seq_len"]


def test_an_unknown_key_names_the_valid_ones_and_a_close_match() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_grid_flags(["batchsize=1,2"])
    assert caught.value.field == "grid"
    message = caught.value.message
    assert "unknown option 'batchsize'" in message and "did you mean batch_size" in message
    assert "valid keys are run options: problem, size, mode, batch_size" in message
    assert "problem options:" in message and " m," in message and "hidden" in message


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        ("batch_size=", "batch_size: the grid gives it no values"),
        ("batch_size= , ", "batch_size: the grid gives it no values"),
        ("batch_size=x", "batch_size: cannot read 'x' as an integer or 'auto'"),
        ("batch_size=8..2", "batch_size: cannot read '8..2' as a range"),
        ("batch_size=0..8", "batch_size: cannot read '0..8' as a range"),
        ("precision=1..4", "precision: A..B ranges are for integer options"),
        ("precision=fp64", "precision: unknown precision 'fp64'; use one of fp32"),
        ("lr=fast", "learning_rate: cannot read 'fast' as a number"),
        ("steps=2.5", "steps: cannot read '2.5' as an integer"),
        ("batch_size", "expected KEY=V1,V2,…, got 'batch_size'"),
    ],
)
def test_bad_values_name_the_option(flag: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_grid_flags([flag])
    assert caught.value.field == "grid"
    assert says in caught.value.message


def test_a_key_given_twice_is_a_mistake() -> None:
    with pytest.raises(ConfigError, match="batch_size is given twice"):
        parse_grid_flags(["batch_size=1", "batch-size=2"])


def test_an_empty_grid_names_the_option_and_the_valid_keys() -> None:
    with pytest.raises(ConfigError) as caught:
        merge_spec(BASE, {})
    assert caught.value.field == "grid"
    assert "the sweep grid is empty" in caught.value.message and "batch_size" in caught.value.message


# --- TOML and flags together ---------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_a_sweep_file_gives_name_base_and_grid(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
name = "mlp-widths"

[base]
problem = "fc_mnist"
size = "debug"
steps = 3
"preheat" = 1

[grid]
batch_size = "1..8"
precision = ["fp32", "bf16"]
hidden = [64, 128]
""",
    )
    file = load_sweep_file(path)
    assert file.name == "mlp-widths"
    assert file.base == {"problem": "fc_mnist", "size": "debug", "steps": 3, "preheat_steps": 1}
    assert file.grid == {"batch_size": (1, 2, 4, 8), "precision": ("fp32", "bf16"), "hidden": (64, 128)}
    sweep = merge_spec({}, {}, file)
    assert sweep.label == "mlp-widths" and len(sweep.points()) == 16
    config = sweep.config_for(sweep.points()[0])
    assert config.problem_options == {"hidden": 64} and config.batch_size == 1 and config.steps == 3


def test_flags_override_the_file(tmp_path: Path) -> None:
    file = load_sweep_file(
        write(
            tmp_path,
            '[base]\nsteps = 3\nsize = "debug"\n[grid]\nbatch_size = [1, 2]\nprecision = ["fp32", "bf16"]',
        )
    )
    # a flag fixes what the file varies; a -g replaces the file's values; base flags win
    sweep = merge_spec({"precision": "bf16", "steps": 5}, parse_grid_flags(["batch_size=4,8"]), file, "n")
    assert sweep.base == {"steps": 5, "size": "debug", "precision": "bf16"}
    assert sweep.grid == {"batch_size": (4, 8)}
    assert sweep.name == "n"
    # a -g key the file's base fixes: the grid wins
    sweep = merge_spec({}, parse_grid_flags(["steps=1,2"]), file)
    assert "steps" not in sweep.base and sweep.grid["steps"] == (1, 2)


def test_a_key_fixed_and_varied_in_one_place_is_a_mistake(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="batch_size is both a flag"):
        merge_spec({"batch_size": 4}, parse_grid_flags(["batch_size=1,2"]))
    file = load_sweep_file(write(tmp_path, "[base]\nsteps = 3\n[grid]\nsteps = [1, 2]"))
    with pytest.raises(ConfigError, match="steps is in both"):
        merge_spec({}, {}, file)


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ("[grid]\nbatchsize = [1, 2]", "file", "unknown option 'batchsize' (did you mean batch_size"),
        ("[grid]\nbatch_size = []", "file", "batch_size: the grid gives it no values"),
        ("[base]\nsteps = [1, 2]", "file", "steps: a base option takes one value"),
        ("grid = 3", "file", "grid must be a table"),
        ("[grids]\nbatch_size = [1]", "file", "unknown entry 'grids'"),
        ("[grid\n", "file", "is not valid TOML"),
        ("[grid]\nbatch_size = {a = 1}", "file", "batch_size: cannot read {'a': 1} as an integer or 'auto'"),
        ("[grid]\nm = [{a = 1}]", "file", "m: cannot read {'a': 1} as an integer"),
        ("[base]\nlr = {a = 1}", "file", "learning_rate: cannot read {'a': 1} as a number"),
    ],
)
def test_a_bad_sweep_file_says_where(tmp_path: Path, text: str, field: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_sweep_file(write(tmp_path, text))
    assert caught.value.field == field and says in caught.value.message


def test_a_file_with_no_grid_is_an_empty_grid(tmp_path: Path) -> None:
    file = load_sweep_file(write(tmp_path, "[base]\nsteps = 3\n"))
    with pytest.raises(ConfigError, match="the sweep grid is empty"):
        merge_spec({}, {}, file)


# --- identity, order and planning -----------------------------------------------------------------


def test_the_same_sweep_has_the_same_id_and_a_new_name_starts_a_new_one() -> None:
    a = spec("batch_size=1,2", "precision=fp32,bf16")
    b = spec("precision=bf16,fp32", "batch_size=2,1")
    assert a.sweep_id == b.sweep_id and a.label == f"sweep-{a.sweep_id}"
    assert spec("batch_size=1,2,4", "precision=fp32,bf16").sweep_id != a.sweep_id
    assert spec("batch_size=1,2", "precision=fp32,bf16", steps=3).sweep_id != a.sweep_id
    named = spec("batch_size=1,2", "precision=fp32,bf16", name="mine")
    assert named.sweep_id != a.sweep_id and named.label == "mine"


def test_within_a_branch_batch_sizes_ascend() -> None:
    points = expand_grid({"batch_size": (8, 2, "auto", 4), "precision": ("fp32", "bf16")})
    assert [(p["precision"], p["batch_size"]) for p in points] == [
        ("fp32", 2), ("fp32", 4), ("fp32", 8), ("fp32", "auto"),
        ("bf16", 2), ("bf16", 4), ("bf16", 8), ("bf16", "auto"),
    ]  # fmt: skip
    assert all(list(p) == ["batch_size", "precision"] for p in points)  # the user's key order
    assert expand_grid({"mode": ("train", "infer")}) == [{"mode": "train"}, {"mode": "infer"}]


def test_every_point_is_validated_before_anything_runs() -> None:
    with pytest.raises(ConfigError) as caught:
        plan_points(spec("hidden=64,0"))
    assert caught.value.field == "hidden" and "(point 2 of 2: hidden=0)" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        plan_points(spec("m=64"))
    assert caught.value.field == "m" and "does not apply to fc_mnist" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        plan_points(spec("precision=fp32,tf32", "batch_size=1,2"))
    assert caught.value.field == "precision" and "point 3 of 4" in caught.value.message


def test_a_point_takes_base_then_its_own_values() -> None:
    [first, _] = plan_points(spec("sample_shape=64,128", problem="transformer", **{"layers": 2}))
    assert first.config.problem_options == {"layers": 2, "seq_len": 64}
    assert first.config.mode is not None  # settled for the problem


# --- running: out of memory, failures, resume ---------------------------------------------------


def oom_in_bf16_from(batch: int) -> Callable[[RunConfig], str | None]:
    def fail(config: RunConfig) -> str | None:
        big = isinstance(config.batch_size, int) and config.batch_size >= batch
        return OOM if config.precision.value == "bf16" and big else None

    return fail


def test_out_of_memory_skips_the_larger_batches_of_its_branch_only(store: Store) -> None:
    sweep = spec("batch_size=2..32", "precision=bf16,fp32")
    runner, log = FakeRunner(oom_in_bf16_from(8)), Log()
    outcome = run_sweep(sweep, store, runner=runner, listener=log, tags=["nightly"])
    assert runner.batches("bf16") == [2, 4, 8]  # 16 and 32 never started
    assert runner.batches("fp32") == [2, 4, 8, 16, 32]
    by_point = {(r.params["precision"], r.params["batch_size"]): r for r in outcome.reports}
    assert by_point["bf16", 8].status == "failed" and by_point["bf16", 8].out_of_memory
    assert by_point["bf16", 8].reason == "out of memory at batch size 8 on cpu"
    for batch in (16, 32):
        assert by_point["bf16", batch].status == "skipped"
        assert by_point["bf16", batch].reason == (
            f"batch {batch} skipped: batch 8 ran out of memory on this branch"
        )
    assert all(by_point["fp32", b].status == "done" for b in (2, 4, 8, 16, 32))
    assert outcome.exit_status == 0  # running out of memory is what a sweep finds out
    recorded = store.sweep_points(sweep.sweep_id)
    assert len(recorded) == 10
    assert sorted(p.status for p in recorded.values()).count("skipped") == 2
    runs = store.runs()
    assert len(runs) == 7 and all(set(r.tags) == {"nightly", f"sweep:{sweep.label}"} for r in runs)


def test_another_failure_skips_nothing_and_fails_the_sweep(store: Store) -> None:
    runner = FakeRunner(lambda c: ERROR if c.batch_size == 4 else CRASHED if c.batch_size == 16 else None)
    outcome = run_sweep(spec("batch_size=2..32"), store, runner=runner)
    assert runner.batches() == [2, 4, 8, 16, 32]
    assert [r.status for r in outcome.reports] == ["done", "failed", "done", "failed", "done"]
    assert outcome.reports[1].reason == "it broke"
    assert outcome.reports[3].reason == "crashed: it broke"
    assert [r.index for r in outcome.failed_otherwise] == [2, 4]
    assert outcome.exit_status == 1


class Interrupt:
    """A runner that stops the sweep (Ctrl-C) when it is asked to run its n-th point."""

    def __init__(self, inner: FakeRunner, at_call: int) -> None:
        self.inner, self.at_call, self.calls = inner, at_call, 0

    def __call__(self, job: Job) -> ChildOutcome:
        self.calls += 1
        if self.calls == self.at_call:
            raise KeyboardInterrupt
        return self.inner(job)


def test_an_interrupted_sweep_resumes_without_redoing_recorded_points(store: Store) -> None:
    sweep = spec("batch_size=1..8", "precision=fp32,bf16")
    first = FakeRunner()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, store, runner=Interrupt(first, at_call=4))
    assert len(first.calls) == 3
    kept = {p.key: p.run_id for p in store.sweep_points(sweep.sweep_id).values()}
    assert len(kept) == 3

    second, log = FakeRunner(), Log()
    outcome = run_sweep(sweep, store, runner=second, listener=log)
    assert log.start is not None and log.start.resumed and log.start.recorded == 3
    assert [(c.precision.value, c.batch_size) for c in second.calls] == [
        ("fp32", 8), ("bf16", 1), ("bf16", 2), ("bf16", 4), ("bf16", 8),
    ]  # fmt: skip
    assert [r.earlier for r in outcome.reports] == [True] * 3 + [False] * 5
    assert all(r.samples_per_sec for r in outcome.reports)  # earlier points show their figures
    recorded = store.sweep_points(sweep.sweep_id)
    assert len(recorded) == 8 and all(p.status == "done" for p in recorded.values())
    assert all(recorded[k].run_id == run_id for k, run_id in kept.items())  # untouched
    assert len(store.runs()) == 8

    third = FakeRunner()
    assert run_sweep(sweep, store, runner=third).exit_status == 0
    assert third.calls == []  # all recorded: nothing to do


def test_a_sweep_in_a_store_interrupted_says_how_many_points_it_holds(tmp_path: Path) -> None:
    from flowrate.campaigns.process.executor import LocalExecutor
    from flowrate.campaigns.sweep.recorded import recorded_points

    sweep, path = spec("batch_size=1..8"), str(tmp_path / "s.db")
    assert (
        recorded_points(sweep, path) == {} and not (tmp_path / "s.db").exists()
    )  # a dry run creates nothing
    asked: list[str] = []

    def executor(sweep_id: str) -> LocalExecutor:
        asked.append(sweep_id)
        return LocalExecutor(runner=Interrupt(FakeRunner(), at_call=3))

    with pytest.raises(SweepInterrupted) as cut:
        sweep_in_store(sweep, path, executor)
    assert cut.value.recorded == 2 and asked == [sweep.sweep_id]
    assert len(recorded_points(sweep, path)) == 2
    outcome = sweep_in_store(sweep, path, lambda _: LocalExecutor(runner=FakeRunner()))
    assert [r.earlier for r in outcome.reports] == [True, True, False, False]


def test_a_resume_after_an_out_of_memory_skips_without_running(store: Store) -> None:
    sweep = spec("batch_size=2..16")
    # killed right after batch 4 ran out of memory, before its larger batches were recorded
    store.open_sweep(sweep.sweep_id, sweep.label, sweep.to_dict())
    store.record_point(sweep.sweep_id, {"batch_size": 2}, "done", result=make_result(batch_size=2))
    store.record_point(
        sweep.sweep_id, {"batch_size": 4}, "failed", reason="out of memory at batch size 4 on cpu"
    )
    runner = FakeRunner()
    outcome = run_sweep(sweep, store, runner=runner)
    assert runner.calls == []
    assert [r.status for r in outcome.reports] == ["done", "failed", "skipped", "skipped"]
    assert outcome.reports[3].reason == "batch 16 skipped: batch 4 ran out of memory on this branch"
    assert outcome.exit_status == 0


def test_retry_failed_runs_failed_and_skipped_points_again(store: Store) -> None:
    sweep = spec("batch_size=2..16")
    run_sweep(sweep, store, runner=FakeRunner(lambda c: OOM if c.batch_size == 4 else None))
    again = FakeRunner()
    plain = run_sweep(sweep, store, runner=again)
    assert again.calls == [] and plain.exit_status == 0
    retry = FakeRunner()
    outcome = run_sweep(sweep, store, runner=retry, retry_failed=True)
    assert retry.batches() == [4, 8, 16]
    assert [r.status for r in outcome.reports] == ["done"] * 4
    assert [p.status for p in store.sweep_points(sweep.sweep_id).values()] == ["done"] * 4


def test_time_left_comes_from_the_mean_wall_time_of_points_run_now(store: Store) -> None:
    sweep = spec("precision=bf16,fp32", "batch_size=1,2,4,8")  # bf16 1, 2, 4, 8, then fp32 1, 2, 4, 8
    runner = FakeRunner(lambda c: OOM if c.batch_size == 4 and c.precision.value == "bf16" else None)
    # clock reads before and after each point run: bf16/1 takes 10 s, bf16/2 20 s, bf16/4 3 s (OOM)
    ticks = iter([0.0, 10.0, 10.0, 30.0, 30.0, 33.0, *(float(t) for t in range(100, 108))])
    log = Log()
    run_sweep(sweep, store, runner=runner, listener=log, clock=lambda: next(ticks))
    first, second, oom, skipped = log.progress[:4]
    assert (first.done, first.left, first.seconds_left) == (1, 7, pytest.approx(10.0 * 7))
    assert (second.done, second.seconds_left) == (2, pytest.approx(15.0 * 6))
    # bf16/8 will be skipped (an instant): only the 4 fp32 points still take time
    assert (oom.done, oom.left, oom.seconds_left) == (3, 5, pytest.approx(11.0 * 4))
    assert log.reports[3].status == "skipped"
    assert (skipped.done, skipped.seconds_left) == (4, pytest.approx(11.0 * 4))
    assert log.progress[-1].left == 0 and log.progress[-1].seconds_left == 0.0


def test_a_name_reused_with_another_grid_is_refused_before_anything_runs(store: Store) -> None:
    """Two grids under one name would list as one sweep (`runs --sweep NAME`): refused, not merged."""
    first = spec("batch_size=1,2", "precision=fp32", name="nightly")
    run_sweep(first, store, runner=FakeRunner())
    other, runner = spec("batch_size=4,8", "precision=fp32", name="nightly"), FakeRunner()
    with pytest.raises(ConfigError) as caught:
        run_sweep(other, store, runner=runner)
    assert caught.value.field == "name"
    assert caught.value.message == (
        "sweep nightly was recorded with a different grid (recorded: batch_size=1,2; now: "
        "batch_size=4,8); use a new --name or the same grid to resume"
    )
    assert runner.calls == [] and [s["sweep_id"] for s in store.sweeps()] == [first.sweep_id]
    # a base option differs: named as well; an option only one side gives shows as what it is
    longer = spec("batch_size=1,2", "precision=fp32", name="nightly", steps=9)
    with pytest.raises(ConfigError, match=r"\(recorded: —; now: steps=9\)"):
        run_sweep(longer, store, runner=runner)
    # the same grid under the same name (values in another order) resumes; a new name starts afresh
    again = spec("precision=fp32", "batch_size=2,1", name="nightly")
    assert run_sweep(again, store, runner=runner).sweep_id == first.sweep_id and runner.calls == []
    run_sweep(spec("batch_size=4,8", "precision=fp32", name="nightly-2"), store, runner=runner)
    assert runner.batches() == [4, 8]


def test_durations_read_as_people_say_them() -> None:
    assert [duration(s) for s in (0.4, 42, 185, 3720)] == ["0 s", "42 s", "3 min 05 s", "1 h 02 min"]


# --- the CLI's checks, before any process starts --------------------------------------------------


def test_cli_rejects_a_misspelt_key_with_exit_2(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("sweep", "-p", "fc_mnist", "-g", "batchsize=1,2")
    assert outcome.code == 2
    assert "error: --grid: unknown option 'batchsize' (did you mean batch_size" in outcome.stderr
    assert "Traceback" not in outcome.stderr


def test_cli_rejects_an_empty_grid(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("sweep", "-p", "fc_mnist")
    assert outcome.code == 2 and "--grid: the sweep grid is empty" in outcome.stderr


def test_cli_names_the_flag_and_point_of_a_bad_value(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("sweep", "-p", "fc_mnist", "--size", "debug", "-g", "duration=1,0")
    assert outcome.code == 2
    assert "error: --duration: must be a positive number, got 0.0 (point 2 of 2: duration_s=0.0)" in (
        outcome.stderr
    )


def test_cli_dry_run_lists_the_points_and_runs_nothing(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "sweep", "-p", "fc_mnist", "--size", "debug", "-g", "batch_size=1..4", "-g", "precision=fp32,bf16",
        "--dry-run",
    )  # fmt: skip
    assert outcome.code == 0, outcome.stderr
    assert "6 points, 0 recorded" in outcome.stderr
    assert outcome.stdout.count("to run") == 6
    assert not results_store.exists()  # a dry run creates no store


def test_cli_dry_run_refuses_a_name_recorded_with_another_grid(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    recorded = merge_spec(BASE, parse_grid_flags(["batch_size=1,2"]), name="nightly")
    with Store(results_store) as opened:
        opened.open_sweep(recorded.sweep_id, recorded.label, recorded.to_dict())
    args = ("sweep", "-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--name", "nightly")
    outcome = run_cli(*args, "-g", "batch_size=4,8", "--dry-run")
    assert outcome.code == 2
    assert outcome.stderr.strip() == (
        "error: --name: sweep nightly was recorded with a different grid (recorded: batch_size=1,2; "
        "now: batch_size=4,8); use a new --name or the same grid to resume"
    )
    same = run_cli(*args, "-g", "batch_size=2,1", "--dry-run")
    assert same.code == 0 and "2 points, 0 recorded" in same.stderr
