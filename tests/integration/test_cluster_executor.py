"""Campaign points as cluster jobs (flowrate.campaigns.process.cluster): the sbatch script a Slurm
submission would write, checked without running sbatch; a sweep through submitit's local executor
(real subprocesses, the same job function), its out-of-memory and its resume from the folder's
files; each point's outcome file; the bad input of --executor, one line before any run."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import submitit
from test_cli_sweep import OOM_PROBLEM  # batch 4 and up run out of memory

from factories import make_result
from flowrate.campaigns.process.child import OOM
from flowrate.campaigns.process.cluster import (
    SUBMITIT_LOCAL,
    ClusterOptions,
    SubmititExecutor,
    check_slurm_available,
    point_file,
    read_outcome,
    run_point,
)
from flowrate.campaigns.process.job import Job
from flowrate.campaigns.sweep.run import run_sweep
from flowrate.campaigns.sweep.spec import merge_spec, parse_grid_flags
from flowrate.config import RunConfig
from flowrate.errors import ConfigError
from flowrate.results.store import Store

# what sacct says of the jobs of test_the_sbatch_script_a_batch_would_submit, once resumed
SACCT = "JobID|State|NodeList\n4242_0|RUNNING|node1\n4242_1|FAILED|node2\n"


@pytest.fixture
def slurm_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch and srun on PATH for `which` to find (neither is ever run), and an sacct that
    answers SACCT."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("sbatch", "srun"):
        (folder / tool).write_text("#!/bin/sh\necho 'not a cluster' >&2\nexit 1\n")
    (folder / "sacct").write_text(f"#!/bin/sh\nprintf '{SACCT}'\n")
    for tool in ("sbatch", "srun", "sacct"):
        (folder / tool).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_the_sbatch_script_a_batch_would_submit(
    slurm_on_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_slurm_available()
    options = ClusterOptions(tmp_path / "jobs", partition="gpu-a100", gpus_per_point=1, max_parallel=2)
    executor = SubmititExecutor(options, "abc123", argv=["flowrate", "sweep"])
    # what sbatch would answer, instead of sbatch: the script is written, nothing is submitted
    ids = iter(range(4242, 4250))
    monkeypatch.setattr(
        submitit.SlurmExecutor,
        "_make_submission_command",
        lambda self, path: ["echo", f"Submitted batch job {next(ids)}"],
    )
    configs = [Job(RunConfig(problem="fc_mnist", size="debug", batch_size=b)) for b in (2, 4, 8)]
    done = point_file(executor.folder, configs[0].to_dict())  # finished while the parent was away
    done.write_text(json.dumps({"result": make_result(batch_size=2).to_dict()}))

    paths, submitted = executor.submit(configs)
    assert paths[0] == done and set(submitted) == set(paths[1:])  # only the two without a file
    assert sorted(job.job_id for job in submitted.values()) == ["4242_0", "4242_1"]
    [script_file] = (executor.folder / "submitit").glob("*_submission.sh")
    script = script_file.read_text()
    for line in (
        "#SBATCH --partition=gpu-a100",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --time=60",  # minutes: the default time limit
        "#SBATCH --array=0-1%2",  # two points, at most max_parallel at once
        "#SBATCH --job-name=flowrate-abc123",
    ):
        assert line in script.splitlines()
    command = script.splitlines()[-1]
    assert command.startswith("srun ") and f"{sys.executable} -u -m submitit.core._submit" in command

    # a new session (the parent was killed): 4242_0 still runs and is waited for, not submitted
    # again; 4242_1 failed without writing its file and is submitted again, alone
    later = SubmititExecutor(options, "abc123", argv=["flowrate", "sweep"])
    paths, submitted = later.submit(configs)
    assert {path: job.job_id for path, job in submitted.items()} == {paths[1]: "4242_0", paths[2]: "4243"}
    assert "#SBATCH --array" not in (later.folder / "submitit" / "4243_submission.sh").read_text()


@pytest.mark.slow  # three jobs, each a Python process that imports torch
def test_a_sweep_through_submitit_local_jobs_records_skips_and_resumes(tmp_path: Path) -> None:
    (tmp_path / "tight.py").write_text(OOM_PROBLEM)
    base = {"problem": f"{tmp_path / 'tight.py'}:make", "device": "cpu", "preheat_steps": 0, "steps": 2}
    spec = merge_spec(base, parse_grid_flags(["batch_size=2,4,8"]))
    options = ClusterOptions(tmp_path / "jobs", max_parallel=2, poll_s=0.1)
    executor = SubmititExecutor(options, spec.sweep_id, cluster=SUBMITIT_LOCAL)
    submitted = executor.folder / "submitit"
    with Store(tmp_path / "first.db") as store:
        outcome = run_sweep(spec, store, executor=executor)
        [run] = store.runs()
    assert [r.status for r in outcome.reports] == ["done", "failed", "skipped"]
    assert outcome.reports[1].out_of_memory  # an OOM in a job is an OOM for the sweep
    assert outcome.reports[2].reason == "batch 8 skipped: batch 4 ran out of memory on this branch"
    assert run.batch_size == 2 and run.result.environment.process_id != os.getpid()
    assert len(list(submitted.glob("*_submitted.pkl"))) == 2  # batch 8 was never submitted

    # a parent that lost its store: the finished point's file is imported; the failed one runs again
    with Store(tmp_path / "second.db") as store:
        again = run_sweep(
            spec, store, executor=SubmititExecutor(options, spec.sweep_id, cluster=SUBMITIT_LOCAL)
        )
        [imported] = store.runs()
    assert [r.status for r in again.reports] == ["done", "failed", "skipped"]
    assert imported.run_id == run.run_id
    assert len(list(submitted.glob("*_submitted.pkl"))) == 3


def test_a_job_writes_its_outcome_as_json_and_a_failure_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "tight.py").write_text(OOM_PROBLEM)
    config = RunConfig(problem=f"{tmp_path / 'tight.py'}:make", device="cpu", batch_size=4, steps=1)
    out = tmp_path / "point.json"
    run_point(Job(config).to_dict(), str(out), None)  # here, in this process: the job function itself
    assert sorted(p.name for p in tmp_path.iterdir()) == ["point.json", "tight.py"]  # no temporary left
    data = json.loads(out.read_text())
    assert data["failure"] == OOM and data["message"].startswith("out of memory at batch size 4")
    outcome = read_outcome(out)
    assert (outcome.result, outcome.failure) == (None, OOM)
    assert not out.exists()  # read once: a retry runs the point again

    kept = tmp_path / "done.json"
    result = make_result(batch_size=8)
    kept.write_text(json.dumps({"result": result.to_dict(), "started": 1.0, "finished": 2.0}))
    assert read_outcome(kept).result == result and kept.exists()


def test_slurm_without_submitit_or_sbatch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match="slurm needs sbatch and srun on PATH"):
        check_slurm_available()
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"slurm needs submitit: pip install 'flowrate\[cluster\]'"):
        check_slurm_available()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--executor", "slurm"), "error: --executor: slurm needs sbatch and srun on PATH"),
        (("--max-parallel", "4"), "error: --max-parallel: only --executor slurm takes it"),
        (("--slurm-partition", "gpu"), "error: --slurm-partition: only --executor slurm takes it"),
        (("--executor", "local", "--gpus-per-point", "1"), "error: --gpus-per-point: only --executor slurm"),
    ],
)
def test_cli_bad_executor_input_is_one_line_before_any_run(  # type: ignore[no-untyped-def]
    run_cli, monkeypatch: pytest.MonkeyPatch, results_store: Path, args: tuple[str, ...], says: str
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    outcome = run_cli("sweep", "-p", "fc_mnist", "--size", "debug", "-g", "batch_size=1", *args)
    assert outcome.code == 2
    assert outcome.stderr.startswith(says) and len(outcome.stderr.strip().splitlines()) == 1
    assert not results_store.exists()  # nothing ran, nothing was recorded


def test_a_generation_job_writes_its_result_with_the_generation(tmp_path: Path) -> None:
    from flowrate.config import GenerateConfig

    config = GenerateConfig(size="debug", device="cpu", batch_size=2, prompt_len=4, new_tokens=3, repeats=1)
    out = tmp_path / "point.json"
    run_point(Job(config).to_dict(), str(out), None)
    result = read_outcome(out).result
    assert result is not None and result.generation is not None
    assert (result.batch_size, result.generation.new_tokens, result.config.mode) == (2, 3, "generate")
