"""Campaign points as cluster jobs through submitit: each point a job of its own, in a fresh process.

Why JSON files: a Result is data. Each job writes its point's outcome to the shared folder as
JSON (the Result, or ``{"failure", "message"}``), atomically (a temporary file renamed), and the
parent reads those files and never the pickles submitit keeps: the job function returns nothing
that matters. An out-of-memory in a job comes back as OOM, so a sweep skips larger batches as it
does locally.

Why one folder per campaign: a point's file is named by the hash of its job (command and
config), inside a folder named by the campaign (a sweep's id), so a campaign started again
imports the files of points that finished while it was away instead of submitting them again,
and waits for a Slurm job still running (its id is kept beside the point's file) instead of
submitting a second; another campaign with the same point never reads them. A failure's file is
removed once read, so a retry runs the point again.

submitit's local executor runs the same job function in real subprocesses, which is how the
tests run this module; Slurm needs ``sbatch`` and ``srun`` on PATH (check_slurm_available).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowrate.campaigns.process.child import BUG, CRASHED, ERROR, ChildOutcome, run_and_report
from flowrate.campaigns.process.job import Job
from flowrate.errors import ConfigError
from flowrate.results.schema import Result

SLURM = "slurm"
SUBMITIT_LOCAL = "local"  # submitit's own local executor: subprocesses, for tests
JOBS_FOLDER = "flowrate-jobs"
# Slurm job states of a job that may still write its point's file
_ALIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED", "RESIZING")


@dataclass(frozen=True)
class ClusterOptions:
    """How points are submitted: where their files go, and each job's resources."""

    folder: Path  # shared by this machine and the cluster's nodes
    partition: str | None = None
    gpus_per_point: int | None = None
    max_parallel: int = 8  # jobs running at once (a Slurm array's %N)
    time_limit_min: int = 60  # per point; Slurm ends a job that runs longer
    poll_s: float = 5.0  # how often the parent looks for finished points

    def __post_init__(self) -> None:
        for name in ("max_parallel", "time_limit_min"):
            if getattr(self, name) < 1:
                raise ConfigError(name, "must be at least 1")
        if self.gpus_per_point is not None and self.gpus_per_point < 0:
            raise ConfigError("gpus_per_point", "must be 0 or more")


def check_slurm_available() -> None:
    """ConfigError("executor") unless submitit imports and Slurm's sbatch and srun are on PATH."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise ConfigError(
            "executor", "slurm needs submitit: pip install 'flowrate[cluster]' (or submitit>=1.5)"
        ) from None
    missing = [tool for tool in ("sbatch", "srun") if shutil.which(tool) is None]
    if missing:
        raise ConfigError(
            "executor", f"slurm needs {' and '.join(missing)} on PATH: run from a Slurm login node"
        )


def point_file(folder: Path, job: dict[str, Any]) -> Path:
    """Where the point of ``job`` writes its outcome: the hash of its command and config."""
    digest = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:16]
    return folder / f"point-{digest}.json"


def run_point(job: dict[str, Any], out: str, argv: list[str] | None) -> None:
    """The job function: run the point in this (fresh) process and write its outcome to ``out``.

    A FlowrateError is a failure of its kind (OOM, ERROR); any other exception is a crash named by
    the last line of its traceback. Returns nothing: the file is the outcome.
    """
    kind, text, started, finished, lower = run_and_report(job, argv)
    if kind == "ok":
        outcome: dict[str, Any] = {"result": json.loads(text), "lower": [json.loads(t) for t in lower]}
    elif kind == BUG:
        outcome = {"failure": CRASHED, "message": text.strip().splitlines()[-1]}
    else:
        outcome = {"failure": kind, "message": text}
    outcome.update(started=started, finished=finished)
    path = Path(out)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(outcome), encoding="utf-8")
    temporary.replace(path)  # atomic: the parent never reads half a file


def read_outcome(path: Path) -> ChildOutcome:
    """A point's file as a ChildOutcome; a failure's file is removed (a retry runs it again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return ChildOutcome(None, CRASHED, f"its outcome {path} cannot be read: {error}")
    times = data.get("started"), data.get("finished")
    if "result" in data:
        lower = tuple(Result.from_dict(r) for r in data.get("lower", []))
        return ChildOutcome(Result.from_dict(data["result"]), None, "", *times, lower)
    path.unlink(missing_ok=True)
    return ChildOutcome(None, data.get("failure") or ERROR, str(data.get("message") or ""), *times)


class SubmititExecutor:
    """Each point a submitit job (Slurm, or submitit's local subprocesses); up to max_parallel
    at once, as one array per batch."""

    def __init__(
        self, options: ClusterOptions, campaign: str, argv: list[str] | None = None, cluster: str = SLURM
    ) -> None:
        import submitit

        self.options, self.argv, self.cluster = options, argv, cluster
        self.folder = options.folder / campaign
        self.folder.mkdir(parents=True, exist_ok=True)
        self.backend = submitit.AutoExecutor(folder=self.folder / "submitit", cluster=cluster)
        parameters: dict[str, Any] = {"name": f"flowrate-{campaign}", "timeout_min": options.time_limit_min}
        if options.gpus_per_point is not None:
            parameters["gpus_per_node"] = options.gpus_per_point
        if cluster == SLURM:
            parameters["slurm_array_parallelism"] = options.max_parallel
            if options.partition is not None:
                parameters["slurm_partition"] = options.partition
        self.backend.update_parameters(**parameters)

    @property
    def max_parallel(self) -> int:
        return self.options.max_parallel

    def submit(self, points: Sequence[Job]) -> tuple[list[Path], dict[Path, Any]]:
        """Each point's file, and the jobs submitted for those not in the folder already."""
        jobs = [point.to_dict() for point in points]
        paths = [point_file(self.folder, job) for job in jobs]
        submitted: dict[Path, Any] = {}
        todo = []
        for job, path in zip(jobs, paths, strict=True):
            running = None if path.exists() else self._still_running(path)
            if running is not None:
                submitted[path] = running
            elif not path.exists():
                todo.append((job, path))
        if todo:
            with self.backend.batch():  # one array job on Slurm
                pending = [self.backend.submit(run_point, job, str(path), self.argv) for job, path in todo]
            for (_, path), handle in zip(todo, pending, strict=True):
                submitted[path] = handle
                path.with_suffix(".job").write_text(handle.job_id, encoding="utf-8")
        return paths, submitted

    def _still_running(self, path: Path) -> Any:
        """The Slurm job an earlier session submitted for this point, if it has not ended."""
        marker = path.with_suffix(".job")
        if self.cluster != SLURM or not marker.exists():
            return None  # submitit's local jobs end with the session that started them
        import submitit

        job_id = marker.read_text(encoding="utf-8").strip()
        job: submitit.SlurmJob[None] = submitit.SlurmJob(folder=self.backend.folder, job_id=job_id)
        state = job.get_info(mode="force").get("State") or "UNKNOWN"  # sacct, now
        return job if state.split()[0].upper() in _ALIVE else None  # one sacct forgot is ended

    def run_many(self, jobs: Sequence[Job]) -> list[ChildOutcome]:
        paths, submitted = self.submit(jobs)
        try:
            self._wait(paths, submitted)
        except BaseException:  # interrupted: no job goes on unwatched
            for path, job in submitted.items():
                if not path.exists():
                    job.cancel(check=False)
            raise
        return [self._outcome(path, submitted.get(path)) for path in paths]

    def _wait(self, paths: Sequence[Path], submitted: dict[Path, Any]) -> None:
        """Until every point has its file, or its job ended without writing one."""
        waiting = [path for path in paths if path in submitted]
        while waiting:
            waiting = [p for p in waiting if not p.exists() and not submitted[p].done()]
            if waiting:
                time.sleep(self.options.poll_s)

    def _outcome(self, path: Path, job: Any) -> ChildOutcome:
        path.with_suffix(".job").unlink(missing_ok=True)
        if path.exists():
            return read_outcome(path)
        state = job.state if job is not None else "unknown"
        return ChildOutcome(
            None,
            CRASHED,
            f"job {job.job_id if job is not None else '?'} ended without a result ({state}): killed, "
            f"out of memory or time; its log: {job.paths.stderr if job is not None else self.folder}",
        )
