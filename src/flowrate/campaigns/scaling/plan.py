"""`flowrate scaling`'s plan and its record: what each size runs, and every size's run recorded in
the store as it ends, tagged with the study and its process count. ``scaling_study`` is the whole
study: plan, store, every size.

The sizes themselves run in flowrate.campaigns.scaling.run.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from flowrate.campaigns.scaling.comm import explain
from flowrate.campaigns.scaling.run import ScalingReport, check_weak_scaling, run_scaling, threads_per_rank
from flowrate.config import Mode, RunConfig
from flowrate.results.schema import Result
from flowrate.results.store import Store


@dataclass(frozen=True)
class ScalingPlan:
    config: RunConfig  # what every rank of every size runs, its threads per rank set
    sizes: list[int]  # process counts, ascending
    label: str  # the study's name: its runs are tagged scaling:LABEL


def plan_scaling(config: RunConfig, sizes: Sequence[int], name: str | None = None) -> ScalingPlan:
    """Check ``config`` suits weak scaling and give each rank its share of the cores (on a CPU)."""
    import torch

    check_weak_scaling(config)
    cuda = config.device.startswith("cuda") or (config.device == "auto" and torch.cuda.is_available())
    threads = threads_per_rank(config, sizes, cuda)
    return ScalingPlan(
        config.replace(threads=threads), list(sizes), name or f"scaling-{uuid.uuid4().hex[:6]}"
    )


def run_plan(
    plan: ScalingPlan,
    store: Store | None,
    tags: Sequence[str] = (),
    on_size: Callable[[int, Result], None] | None = None,
) -> ScalingReport:
    """Every size, smallest first; each size's run recorded in ``store`` (unless None) as it ends,
    tagged scaling:LABEL, nproc:N and ``tags``. Training studies then measure the all-reduce of
    the gradients at each size above the baseline (flowrate.campaigns.scaling.comm)."""

    def recorded(processes: int, result: Result) -> None:
        if store is not None:
            store.add(result, (f"scaling:{plan.label}", f"nproc:{processes}", *tags))
        if on_size is not None:
            on_size(processes, result)

    report, results = run_scaling(plan.config, plan.sizes, plan.label, on_size=recorded)
    if len(results) < 2 or results[0].config.mode != Mode.TRAIN:
        return report  # no gradients to all-reduce, or no size above the baseline
    return replace(report, communication=explain(plan.config, list(zip(plan.sizes, results, strict=True))))


def scaling_study(
    config: RunConfig,
    sizes: Sequence[int],
    *,
    name: str | None = None,
    store: str | None = None,
    record: bool = True,
    tags: Sequence[str] = (),
    on_plan: Callable[[ScalingPlan], None] = lambda plan: None,
    on_size: Callable[[int, Result], None] | None = None,
) -> tuple[ScalingPlan, ScalingReport]:
    """Plan the study (plan_scaling; ``on_plan`` hears the plan), then run every size (run_plan;
    ``on_size`` hears each as it ends), each run recorded in the store at ``store`` (the default
    store when None) unless ``record`` is False."""
    plan = plan_scaling(config, sizes, name)
    on_plan(plan)
    with contextlib.nullcontext(None) if not record else Store(store) as opened:
        report = run_plan(plan, opened, tags, on_size=on_size)
    return plan, report
