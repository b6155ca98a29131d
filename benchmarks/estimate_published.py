"""GPU estimates checked on paper: flowrate's estimate beside published per-GPU measurements.

Each case (benchmarks/data/published_gpu_cases.json) is one published figure whose source states
enough to rebuild the configuration (model shape, batch per GPU, sequence length or image size,
precision, optimizer, the GPU), the figure as printed, and where it is printed. ``evaluate``
prices the same configuration as `flowrate estimate --target` does (``PublishedCase.command``
gives that command line) on the meta device, so the table is the same on any machine; the script
prints, per case, the ratio estimated ÷ published (as `flowrate estimate --check` reports
predicted ÷ measured), the MFU each figure implies (model FLOPs per sample x samples/s ÷ the
dense datasheet peak), and the estimate's split of the step (compute-bound, memory-bound, launch
overhead). No multi-GPU figure is divided: every figure is the source's single-GPU one.

Each case's ``recorded_ratio`` (RECORDED here) is the ratio it gave when last pinned: a change to
the cost model that moves a ratio fails tests/unit/test_estimate_published.py until it is
re-pinned in the data file (with the change that moved it explained in benchmarks/RESULTS.md).
A case whose ratio is outside ±30% carries ``miss``: why the published figure measures something
the cost model does not price. The pins are for targets never calibrated (datasheet peaks x
DEFAULT_EFFICIENCY), as in the tests; a calibration of the same GPU model on this machine would
change the estimate, as it should.

    python benchmarks/estimate_published.py
    python benchmarks/estimate_published.py --commands     # also each case's flowrate command
    python benchmarks/estimate_published.py --json published.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.config import Mode, OptimizerName, Precision, RunConfig
from flowrate.estimate.devices import EstimateUnavailable, resolve_target
from flowrate.estimate.report import CompileReport, report_for
from flowrate.measure.peaks import precision_key
from flowrate.problems.registry import get_problem
from record import Figure, record  # beside this script

DATA = Path(__file__).parent / "data" / "published_gpu_cases.json"

# Within this share of the published figure an estimate counts as right (issue 21's target).
WITHIN = 0.30


@dataclass(frozen=True)
class PublishedCase:
    """One published GPU throughput and the flowrate configuration that reproduces it."""

    name: str
    problem: str
    size: str | None
    options: dict[str, int | str]  # shape options and --hf-config values
    mode: str
    precision: str
    optimizer: str
    batch_size: int  # per GPU
    target: str  # --target
    published: float  # samples/s per GPU
    printed: str  # the figure as the source prints it
    hardware: str  # as the source names it
    citation: str  # URL
    where: str  # where in it
    date: str  # of the measurement or its publication
    notes: str = ""  # what differs between the published run and the configuration
    miss: str = ""  # why it is outside ±30%, where it is
    hf_config: dict[str, str] = field(default_factory=dict)
    attention: str | None = None  # how the published implementation computes it (trace.ATTENTION)

    def command(self) -> str:
        """The `flowrate estimate` command line for this case."""
        parts = ["flowrate estimate", f"-p {self.problem}"]
        if self.size:
            parts.append(f"--preset {self.size}" if self.problem.startswith("hf:") else f"--size {self.size}")
        parts += [f"--hf-config {k}={v}" for k, v in self.hf_config.items()]
        parts += [f"-O {k}={v}" for k, v in self.options.items()]
        parts += [f"--mode {self.mode}", f"--precision {self.precision}", f"-b {self.batch_size}"]
        if self.mode == "train":
            parts.append(f"--optimizer {self.optimizer}")
        parts.append(f"--target {self.target}")
        if self.attention:
            parts.append(f"--attention {self.attention}")
        return " ".join(parts)


def load_cases(path: Path = DATA) -> tuple[tuple[PublishedCase, ...], dict[str, float]]:
    """The cases in ``path``, in its order, and each one's pinned ratio (estimated ÷ published)."""
    rows: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    cases = tuple(PublishedCase(**{k: v for k, v in row.items() if k != "recorded_ratio"}) for row in rows)
    return cases, {row["name"]: float(row["recorded_ratio"]) for row in rows}


CASES, RECORDED = load_cases()


@dataclass(frozen=True)
class Evaluation:
    """A case priced: the estimate beside the published figure, and the MFU each implies."""

    case: PublishedCase
    estimated: float  # samples/s
    model_flops_per_sample: float  # analytic: forward, plus backward when training
    peak_flops: float  # the target's dense datasheet peak at the case's precision
    compute_share: float  # of the estimated step: compute-bound ops
    memory_share: float  # memory-bound ops
    overhead_share: float  # launch overhead

    @property
    def ratio(self) -> float:
        """Estimated ÷ published samples/s."""
        return self.estimated / self.case.published

    @property
    def published_mfu(self) -> float:
        return self.case.published * self.model_flops_per_sample / self.peak_flops

    @property
    def estimated_mfu(self) -> float:
        return self.estimated * self.model_flops_per_sample / self.peak_flops


def case_report(case: PublishedCase) -> CompileReport:
    """The compile report `flowrate estimate --target` prints for ``case``."""
    config = RunConfig(
        problem=case.problem,
        size=case.size,
        problem_options={**case.options, **case.hf_config},
        mode=Mode.parse(case.mode),
        precision=Precision.parse(case.precision),
        optimizer=OptimizerName.parse(case.optimizer),
        batch_size=case.batch_size,
    )
    problem = get_problem(config.problem, config.size, config.problem_options)
    config = config.for_problem(problem.modes, problem.default_mode, problem.name)
    return report_for(
        config, problem, target=case.target, batch_size=case.batch_size, attention=case.attention
    )


def evaluate(case: PublishedCase) -> Evaluation:
    """Price ``case`` on its target GPU, as `flowrate estimate --target` does."""
    report = case_report(case)
    step = report.estimate
    if step is None:
        raise EstimateUnavailable(f"{case.name}: {report.reasons.get('estimate', 'no estimate')}")
    peak, _ = resolve_target(case.target)
    assert peak is not None  # every case targets a peak-table GPU
    flops = report.forward_flops_per_sample + (report.backward_flops_per_sample or 0)
    return Evaluation(
        case=case,
        estimated=step.samples_per_sec,
        model_flops_per_sample=flops,
        peak_flops=peak.dense_flops[precision_key(case.precision)],
        compute_share=step.compute_bound_s / step.step_s,
        memory_share=step.memory_bound_s / step.step_s,
        overhead_share=step.overhead_s / step.step_s,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commands", action="store_true", help="print each case's flowrate command")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    header = (
        f"{'case':42} {'published':>10} {'estimated':>10} {'ratio':>6} {'pinned':>6} "
        f"{'pub MFU':>8} {'est MFU':>8}  {'compute/memory/overhead':>23}"
    )
    print(header)
    rows: list[Evaluation] = []
    for case in CASES:
        row = evaluate(case)
        rows.append(row)
        mark = "" if abs(row.ratio - 1) <= WITHIN else "  miss"
        split = f"{row.compute_share:.0%}/{row.memory_share:.0%}/{row.overhead_share:.0%}"
        print(
            f"{case.name:42} {case.published:>10.1f} {row.estimated:>10.1f} {row.ratio:>6.2f} "
            f"{RECORDED.get(case.name, float('nan')):>6.2f} {row.published_mfu:>8.1%} "
            f"{row.estimated_mfu:>8.1%}  {split:>23}{mark}",
            flush=True,
        )
        if args.commands:
            print(f"    {case.command()}")
    within = sum(abs(r.ratio - 1) <= WITHIN for r in rows)
    errors = [abs(r.ratio - 1) for r in rows]
    print(
        f"{within} of {len(rows)} within ±{WITHIN:.0%}; median |error| {statistics.median(errors):.0%}, "
        f"median ratio {statistics.median(r.ratio for r in rows):.2f} (estimated ÷ published)"
    )
    print("\nsamples/s per GPU; published figures, as printed:")
    for case in CASES:
        print(f"  {case.name}: {case.printed}, {case.hardware}; {case.citation}, {case.where} ({case.date})")
    if args.json:
        with open(args.json, "w") as out:
            json.dump([_as_dict(r) for r in rows], out, indent=2)
    figures = [
        Figure(f"{r.case.name}", round(r.ratio, 4), "estimated / published", note=r.case.miss or "")
        for r in rows
    ]
    figures += [
        Figure(f"within ±{WITHIN:.0%}", within, f"of {len(rows)}"),
        Figure("median |error|", round(statistics.median(errors), 4), "fraction"),
    ]
    record("estimate_published", figures, note="priced on paper: samples/s per GPU against published runs")


def _as_dict(row: Evaluation) -> dict[str, object]:
    c = row.case
    return {
        "case": c.name,
        "published": c.published,
        "estimated": row.estimated,
        "ratio": row.ratio,
        "published_mfu": row.published_mfu,
        "estimated_mfu": row.estimated_mfu,
        "command": c.command(),
        "citation": c.citation,
        "where": c.where,
        "miss": c.miss or None,
    }


if __name__ == "__main__":
    main()
