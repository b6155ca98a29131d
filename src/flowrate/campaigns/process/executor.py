"""Where a campaign's points run: one after another on this machine, or as jobs on a cluster.

A sweep or a search hands an Executor a batch of points (each a Job: a run, a check or a run
through rungs, in a fresh process) and gets one ChildOutcome per point back, in order. The local
executor runs them one at a time, never concurrently (they would compete for the hardware). The
Slurm executor (flowrate.campaigns.process.cluster, through submitit) runs up to ``max_parallel``
at once, each point a job of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from flowrate.campaigns.process.child import CRASHED, ERROR, ChildCrash, ChildOutcome, run_in_fresh_process
from flowrate.campaigns.process.job import Job
from flowrate.errors import FlowrateError

PointRunner = Callable[[Job], ChildOutcome]


class Executor(Protocol):
    """Runs a batch of points and returns their outcomes in the batch's order."""

    @property
    def max_parallel(self) -> int:
        """How many points it can usefully run at once (a batch larger than this is fine)."""
        ...

    def run_many(self, jobs: Sequence[Job]) -> list[ChildOutcome]: ...


def fresh_process_runner(argv: list[str] | None = None) -> PointRunner:
    """Runs each point in a fresh process (flowrate.campaigns.process.child): a bug fails that point only."""

    def run(job: Job) -> ChildOutcome:
        try:
            return run_in_fresh_process(job, argv=argv)
        except FlowrateError as error:
            return ChildOutcome(None, ERROR, str(error))
        except ChildCrash as crash:  # the last line of the child's traceback says what
            last = str(crash).strip().splitlines()[-1]
            return ChildOutcome(None, CRASHED, f"{last} (run it alone with `flowrate run` to see where)")

    return run


class LocalExecutor:
    """Each point in a fresh process on this machine, one after another.

    ``runner`` runs one point (default: fresh_process_runner(argv)); tests pass a fake one.
    """

    def __init__(self, argv: list[str] | None = None, runner: PointRunner | None = None) -> None:
        self.run = runner or fresh_process_runner(argv)

    @property
    def max_parallel(self) -> int:
        return 1

    def run_many(self, jobs: Sequence[Job]) -> list[ChildOutcome]:
        return [self.run(job) for job in jobs]
