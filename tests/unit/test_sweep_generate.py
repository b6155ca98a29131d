"""Sweeps whose points run `flowrate generate`: keys, sweep files, plans, jobs, and batches of
points through an executor (out-of-memory skipping across batches). A fake runner or executor
stands in for the processes; the store is a real one in a temp folder."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from factories import make_result
from flowrate.campaigns.process.child import OOM, ChildOutcome
from flowrate.campaigns.process.job import CHECK, GENERATE, RUN, Job, JobKind
from flowrate.campaigns.sweep.run import run_sweep
from flowrate.campaigns.sweep.spec import (
    load_sweep_file,
    merge_spec,
    parse_base,
    parse_grid_flags,
    plan_points,
)
from flowrate.config import GenerateConfig, RunConfig
from flowrate.errors import ConfigError
from flowrate.results.schema import Result
from flowrate.results.sections import Generation, Kind, LatencyStats
from flowrate.results.store import Store

BASE = {"problem": "transformer", "size": "debug", "device": "cpu"}


def gen_spec(*flags: str, name: str | None = None, **base: Any):  # type: ignore[no-untyped-def]
    return merge_spec(
        parse_base({**BASE, **base}, None, GENERATE),
        parse_grid_flags(flags, GENERATE),
        name=name,
        command=GENERATE,
    )


def generation_result(batch: int, decode: float = 500.0, ttft: float = 0.02) -> Result:
    result = make_result(batch_size=batch, problem="transformer", mode="generate")
    section = Generation(decode_tokens_per_sec=decode, ttft_s=LatencyStats(median=ttft, mean=ttft))
    return dataclasses.replace(result, generation=section, kind=Kind.GENERATE)


class FakeRunner:
    """Each point 'generates' unless ``fail`` says it runs out of memory."""

    def __init__(self, fail: Callable[[Any], bool] = lambda c: False) -> None:
        self.fail, self.calls = fail, []  # type: ignore[var-annotated]

    def __call__(self, job: Job) -> ChildOutcome:
        config = job.config
        self.calls.append(config)
        if self.fail(config):
            return ChildOutcome(None, OOM, f"batch {config.batch_size} x 12 tokens does not fit on cpu")
        return ChildOutcome(generation_result(int(config.batch_size), decode=100.0 * config.batch_size))


@pytest.fixture
def store(tmp_path: Path) -> Store:  # type: ignore[misc]
    with Store(tmp_path / "sweeps.db") as opened:
        yield opened


# --- keys, files, plans ---------------------------------------------------------------------------


def test_generate_keys_are_typed_as_generate_config_fields() -> None:
    grid = parse_grid_flags(
        ["batch-size=1..4,auto", "prompt_len=16,32", "new-tokens=8", "duration=0.5"], GENERATE
    )
    assert grid == {
        "batch_size": (1, 2, 4, "auto"),
        "prompt_len": (16, 32),
        "new_tokens": (8,),
        "duration_s": (0.5,),
    }
    sweep = gen_spec("batch_size=1,2", "prompt_len=6", precision="BF16", repeats="2")
    config = sweep.point_config({"batch_size": 2, "prompt_len": 6})
    assert config == GenerateConfig(
        problem="transformer",
        size="debug",
        device="cpu",
        precision="bf16",
        repeats=2,
        batch_size=2,
        prompt_len=6,
    )


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["prompt_lenn=4"], "grid: generate sweeps have no option 'prompt_lenn' (did you mean prompt_len?)"),
        (["steps=4"], "generate sweeps have no option 'steps'"),
        (["sample_shape=4"], "generate sweeps have no option 'sample_shape'"),
    ],
)
def test_a_key_generate_does_not_take_names_the_valid_ones(flags: list[str], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_grid_flags(flags, GENERATE)
    assert says in str(caught.value)
    listed = (
        "valid keys are generate options: problem, size, batch_size, max_batch_size, prompt_len, new_tokens"
    )
    assert listed in caught.value.message


def test_the_same_grid_run_and_generated_are_two_sweeps() -> None:
    grid = ["batch_size=1,2"]
    run = merge_spec(BASE, parse_grid_flags(grid))
    generated = merge_spec(BASE, parse_grid_flags(grid, GENERATE), command=GENERATE)
    assert run.sweep_id != generated.sweep_id
    assert generated.to_dict()["command"] == GENERATE and run.to_dict()["command"] == RUN


def test_a_sweep_file_says_its_command(tmp_path: Path) -> None:
    path = tmp_path / "gen.toml"
    path.write_text(
        'name = "decode"\ncommand = "generate"\n[base]\nrepeats = 2\nwarmup = 0\n'
        '[grid]\nbatch_size = "1..4"\nnew_tokens = [4, 8]\n'
    )
    file = load_sweep_file(path)
    assert (file.command, file.base, file.grid) == (
        GENERATE,
        {"repeats": 2, "warmup": 0},
        {"batch_size": (1, 2, 4), "new_tokens": (4, 8)},
    )
    assert load_sweep_file(path, GENERATE).command == GENERATE
    with pytest.raises(ConfigError, match=r"gen\.toml sweeps 'generate' points, the flags ask for 'run'"):
        load_sweep_file(path, RUN)
    path.write_text('command = "serve"\n[grid]\nbatch_size = [1]\n')
    with pytest.raises(ConfigError, match="command must be 'run' or 'generate'"):
        load_sweep_file(path)


def test_plan_refuses_a_point_that_cannot_generate_before_anything_runs() -> None:
    with pytest.raises(ConfigError) as caught:
        plan_points(gen_spec("prompt_len=8,30", new_tokens="3"))
    assert "exceed the model's context of 32" in caught.value.message
    assert "(point 2 of 2: prompt_len=30)" in caught.value.message
    with pytest.raises(ConfigError, match="generate needs a causal LM"):
        plan_points(gen_spec("batch_size=1", problem="fc_mnist"))
    with pytest.raises(ConfigError, match="repeats: must be a positive integer, got 0"):
        plan_points(gen_spec("repeats=0,1"))


def test_a_point_crosses_a_process_boundary_as_plain_data() -> None:
    generated = GenerateConfig(
        problem="transformer", size="debug", batch_size="auto", problem_options={"layers": 1}
    )
    run = Job(RunConfig(problem="fc_mnist", size="debug", batch_size=4))
    check = Job(
        RunConfig(problem="fc_mnist", size="debug", batch_size=4, steps=300, preheat_steps=0), JobKind.CHECK
    )
    going = Job(run.config, JobKind.CONTINUE, json.dumps({"continuation": {}, "min_steps": [2]}))
    for job in (Job(generated), run, check, going):
        data = json.loads(json.dumps(job.to_dict()))  # JSON and back: no pickled objects
        assert Job.from_dict(data) == job and type(Job.from_dict(data).config) is type(job.config)
    assert Job(generated).to_dict()["command"] == GENERATE and run.to_dict()["command"] == RUN
    assert check.to_dict()["command"] == CHECK and check != Job(
        run.config.replace(steps=300, preheat_steps=0)
    )
    assert (
        going.to_dict()["rungs"] == {"continuation": {}, "min_steps": [2]}
        and "plan" not in going.to_dict()["config"]
    )


def test_a_job_kind_goes_with_the_config_it_can_run() -> None:
    generated = GenerateConfig(problem="transformer", size="debug")
    with pytest.raises(ValueError, match="a check job runs a RunConfig, not a GenerateConfig"):
        Job(generated, JobKind.CHECK)
    with pytest.raises(ValueError, match="a continue job, and only one, has a plan"):
        Job(RunConfig(problem="fc_mnist"), JobKind.CONTINUE)


# --- running: out of memory and resume, one at a time and in batches -------------------------------


def test_out_of_memory_in_generation_skips_the_larger_batches_of_its_branch(store: Store) -> None:
    sweep = gen_spec("prompt_len=6,12", "batch_size=1..8")
    runner = FakeRunner(lambda c: c.prompt_len == 12 and c.batch_size >= 2)
    outcome = run_sweep(sweep, store, runner=runner)
    assert [(c.prompt_len, c.batch_size) for c in runner.calls] == [
        (6, 1),
        (6, 2),
        (6, 4),
        (6, 8),
        (12, 1),
        (12, 2),
    ]
    assert [r.status for r in outcome.reports] == ["done"] * 5 + ["failed", "skipped", "skipped"]
    assert outcome.reports[5].reason == "out of memory: batch 2 x 12 tokens does not fit on cpu"
    assert outcome.exit_status == 0
    done = outcome.reports[1]
    assert (done.decode_tokens_per_sec, done.ttft_s) == (200.0, 0.02)
    runs = store.runs()
    assert len(runs) == 5 and all(r.tags == (f"sweep:{sweep.label}",) for r in runs)


def test_an_interrupted_generate_sweep_resumes_with_its_figures(store: Store) -> None:
    sweep = gen_spec("batch_size=1..4")
    first = FakeRunner()

    def stop_at_third(config: Any) -> ChildOutcome:
        if len(first.calls) == 2:
            raise KeyboardInterrupt
        return first(config)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, store, runner=stop_at_third)
    second = FakeRunner()
    outcome = run_sweep(sweep, store, runner=second)
    assert [c.batch_size for c in second.calls] == [4]
    assert [(r.earlier, r.decode_tokens_per_sec) for r in outcome.reports] == [
        (True, 100.0),
        (True, 200.0),
        (False, 400.0),
    ]


class BatchExecutor:
    """Runs batches of up to ``parallel`` points through a fake runner, remembering each batch."""

    def __init__(self, runner: FakeRunner, parallel: int) -> None:
        self.runner, self.parallel, self.batches = runner, parallel, []  # type: ignore[var-annotated]

    @property
    def max_parallel(self) -> int:
        return self.parallel

    def run_many(self, jobs: Sequence[Job]) -> list[ChildOutcome]:
        self.batches.append([(j.config.prompt_len, j.config.batch_size) for j in jobs])
        return [self.runner(j) for j in jobs]


def test_points_run_in_batches_and_an_oom_skips_in_the_batches_after(store: Store) -> None:
    sweep = gen_spec("prompt_len=6,12", "batch_size=1..8")
    executor = BatchExecutor(FakeRunner(lambda c: c.prompt_len == 6 and c.batch_size >= 2), parallel=3)
    outcome = run_sweep(sweep, store, executor=executor)
    # batch 2 ran out of memory in the first batch; 4 ran beside it; 8 (a later batch) is skipped
    assert executor.batches == [[(6, 1), (6, 2), (6, 4)], [(12, 1), (12, 2), (12, 4)], [(12, 8)]]
    assert [r.index for r in outcome.reports] == list(range(1, 9))
    assert [r.status for r in outcome.reports] == ["done", "failed", "failed", "skipped"] + ["done"] * 4
    assert outcome.exit_status == 0
    assert len(store.sweep_points(sweep.sweep_id)) == 8
