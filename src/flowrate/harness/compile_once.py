"""`flowrate compile`: compile a configuration's step once, keep what torch.compile cached, and
price the step with the cost model.

One timed step is enough: the compile happens in the first step (its time and the cache hit are
recorded in the Result's ``compile`` section), and the artifacts land in the cache folder keyed by
the configuration, where `flowrate run --compile` with the same options finds them.
"""

from __future__ import annotations

from dataclasses import dataclass

from flowrate.config import RunConfig
from flowrate.estimate.report import CompileReport, report_for
from flowrate.harness.api import run_config
from flowrate.problems.base import Problem
from flowrate.results.sections import Compile


@dataclass(frozen=True)
class Compiled:
    compiled: Compile  # the Result's compile section: compile_s, cache hits, directory
    step_s: float  # the one compiled step's time
    report: CompileReport


def compile_once(
    config: RunConfig, problem: Problem, *, target: str | None = None, argv: list[str] | None = None
) -> Compiled:
    """Run one step of ``config`` (its compile flag set; no preheat, no peak measurement, no
    checkpoints) and the compile report on ``target`` (else this device) at the batch size that
    step used."""
    once = config.replace(
        preheat_steps=0,
        steps=1,
        sample_every=1,
        measure_peak=False,
        checkpoint_every=None,
        checkpoint_dir=None,
        keep_checkpoints=None,
    )
    result = run_config(once, problem, argv=argv)
    report = report_for(config, problem, target=target, batch_size=result.batch_size)
    return Compiled(result.compile or Compile(), result.summary.timed_duration_s, report)
