"""`flowrate survey`: what the machine it runs on can do, figure by figure, against its datasheet.

Every figure is a short run of a zoo problem through the harness (``run_config``):

- matmul, per precision the device computes in: the maximum achievable FLOP/s over a few square
  and rectangular GEMM shapes (the MAMF finder's idea: a datasheet peak is not reached by every
  shape, so search shapes and keep the best), against the dense datasheet peak;
- copy: device memory bandwidth (read + write), against the datasheet's;
- h2d, d2h: the pinned host link per direction, against its theoretical rate (CUDA only);
- launch: seconds per eager op call (dispatch) and, on CUDA, launch to completion;
- train MODEL: a reference model's training step (GPT-2 124M in bf16 on a GPU, fc_mnist in fp32
  on a CPU), its model FLOP/s against the datasheet peak: its MFU.

A figure that cannot be measured here (a CUDA-only one on a CPU, a shape that does not fit) keeps
its name with an empty value and the reason. Bands: flowrate.harness.survey_bands.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from flowrate._version import __version__
from flowrate.config import Precision, RunConfig
from flowrate.errors import FlowrateError
from flowrate.harness.api import run_config
from flowrate.harness.survey_bands import Band, default_band, make_figure
from flowrate.measure.device import resolve_device
from flowrate.measure.env import collect_environment
from flowrate.measure.peaks import peak_for
from flowrate.results.environment import Environment, environment_from
from flowrate.results.schema import Result, RunSummary
from flowrate.results.sections import Kind, ProblemInfo, Survey, SurveyFigure

Shape = tuple[int, int, int]  # m, n, k: (m x k) @ (k x n)

# The shape search: squares up to the size that saturates the device, and rectangles with a long
# side (the shapes of a model's projections); the quick set is a subset.
SHAPES: dict[tuple[str, bool], tuple[Shape, ...]] = {
    ("cuda", False): (
        (2048, 2048, 2048),
        (4096, 4096, 4096),
        (8192, 8192, 8192),
        (16384, 16384, 16384),
        (8192, 8192, 2048),
        (16384, 4096, 8192),
        (4096, 16384, 4096),
    ),
    ("cuda", True): ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 8192)),
    ("cpu", False): ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 1024, 2048), (1024, 4096, 4096)),
    ("cpu", True): ((1024, 1024, 1024), (2048, 2048, 2048), (2048, 1024, 2048)),
}
COPY_MIB = {"cuda": 1024, "cpu": 256}
LINK_MIB = 256
# The reference model of each device type: problem, size, precision, batch size.
MODEL: dict[str, tuple[str, str, str, int]] = {
    "cuda": ("transformer", "gpt2", "bf16", 16),
    "cpu": ("fc_mnist", "default", "fp32", 64),
}
MODEL_QUICK_CPU = ("transformer", "debug", "fp32", 4)

Measure = Callable[[RunConfig], Result]


@dataclass(frozen=True)
class SurveyConfig:
    """What `flowrate survey` measures and how long each measurement lasts."""

    device: str = "auto"
    quick: bool = False  # fewer shapes, smaller model: within ~3 minutes on a 2-core CPU
    seconds: float | None = None  # timed seconds of each measurement; None: 1.0, or 0.5 with quick
    precisions: tuple[str, ...] = ()  # matmul precisions; empty: every one the device computes in
    shapes: tuple[Shape, ...] = ()  # the matmul shape search; empty: SHAPES for the device
    model: bool = True  # the reference model's training step
    threads: int | None = None
    bands: Mapping[str, Band] = field(default_factory=dict)  # replace the default band by name

    @property
    def timed_s(self) -> float:
        return self.seconds if self.seconds is not None else 0.5 if self.quick else 1.0


def device_precisions(device: torch.device) -> tuple[str, ...]:
    """The matmul precisions of a device: fp32 and bf16 everywhere; tf32 and fp16 on CUDA, and
    bf16 there only where the GPU has it."""
    if device.type != "cuda":
        return ("fp32", "bf16")
    bf16 = ("bf16",) if torch.cuda.is_bf16_supported() else ()
    return ("fp32", "tf32", *bf16, "fp16")


def run_survey(
    config: SurveyConfig,
    *,
    measure: Measure = run_config,
    argv: list[str] | None = None,
    on_figure: Callable[[SurveyFigure], None] | None = None,
) -> Result:
    """Measure every figure in turn (``measure`` runs one RunConfig) and return the survey record."""
    device = resolve_device(config.device)
    environment = environment_from(collect_environment(device, argv))
    name = environment.device_name or device.type
    figures: list[SurveyFigure] = []

    def add(figure: SurveyFigure) -> None:
        figures.append(figure)
        if on_figure is not None:
            on_figure(figure)

    survey = _Surveyor(config, device, name, measure)
    for precision in config.precisions or device_precisions(device):
        add(survey.matmul(precision))
    add(survey.copy())
    for direction in ("h2d", "d2h"):
        add(survey.link(direction))
    add(survey.launch(wait=False))
    if device.type == "cuda":
        add(survey.launch(wait=True))
    if config.model:
        add(survey.train())
    section = Survey(device=name, quick=config.quick, seconds_per_measurement=config.timed_s, figures=figures)
    return _record(section, config, device, environment)


class _Surveyor:
    """One measurement per method, each a figure (an empty one with the reason when it fails)."""

    def __init__(self, config: SurveyConfig, device: torch.device, name: str, measure: Measure) -> None:
        self.config = config
        self.device = device
        self.name = name
        self.measure = measure

    def _run(self, problem: str, precision: str = "fp32", **options: object) -> Result:
        seconds = self.config.timed_s
        return self.measure(
            RunConfig(
                problem=problem,
                precision=Precision.parse(precision),
                device=str(self.device),
                threads=self.config.threads,
                preheat_steps=1 if self.config.quick else 2,
                min_steps=2,
                duration_s=seconds,
                target_interval_s=max(seconds / 4, 0.01),
                **options,  # type: ignore[arg-type]  # RunConfig fields by name
            )
        )

    def _figure(self, name: str, value: float | None, unit: str, **kw: object) -> SurveyFigure:
        datasheet = kw.get("datasheet")
        band = self.config.bands.get(name, default_band(name, datasheet is not None))
        return make_figure(name, value, unit, band=band, **kw)  # type: ignore[arg-type]

    def matmul(self, precision: str) -> SurveyFigure:
        name = f"matmul {precision}"
        peak = peak_for(self.name, precision)
        shapes = self.config.shapes or SHAPES[(self.device.type, self.config.quick)]
        best: tuple[float, Shape] | None = None
        failures: list[str] = []
        for m, n, k in shapes:
            try:
                result = self._run("gemm", precision, problem_options={"m": m, "n": n, "k": k})
            except FlowrateError as error:
                failures.append(f"{m}x{n}x{k}: {error}")
                continue
            rate = result.summary.model_flops_per_sec
            if best is None or rate > best[0]:
                best = (rate, (m, n, k))
        if best is None:
            return self._figure(name, None, "FLOP/s", reason="; ".join(failures))
        m, n, k = best[1]
        tried = f"best of {len(shapes) - len(failures)} shapes: {m}x{n}x{k} (m x n x k)"
        return self._figure(name, best[0], "FLOP/s", datasheet=peak.flops, reason=peak.reason, detail=tried)

    def copy(self) -> SurveyFigure:
        mib = COPY_MIB.get(self.device.type, 256) // (4 if self.config.quick else 1)
        peak = peak_for(self.name, "fp32")
        try:
            result = self._run("copy", problem_options={"mib": mib})
        except FlowrateError as error:
            return self._figure("copy", None, "B/s", reason=str(error))
        reason = None if peak.memory_bandwidth else peak.reason or f"no memory bandwidth for {self.name}"
        detail = f"{mib} MiB, read + write"
        return self._figure(
            "copy",
            result.flops.bytes_per_sec,
            "B/s",
            datasheet=peak.memory_bandwidth,
            reason=reason,
            detail=detail,
        )

    def link(self, direction: str) -> SurveyFigure:
        name = f"{direction} pinned"
        if self.device.type != "cuda":
            return self._figure(name, None, "B/s", reason="the host link is measured on a CUDA device")
        peak = peak_for(self.name, "fp32")
        try:
            result = self._run(direction, problem_options={"mib": LINK_MIB, "pinned": 1})
        except FlowrateError as error:
            return self._figure(name, None, "B/s", reason=str(error))
        link = peak.host_link_bandwidth
        reason = None if link else peak.reason or f"no host link figure for {self.name}"
        return self._figure(
            name, result.flops.bytes_per_sec, "B/s", datasheet=link, reason=reason, detail=f"{LINK_MIB} MiB"
        )

    def launch(self, wait: bool) -> SurveyFigure:
        name = "launch to completion" if wait else "launch"
        try:
            result = self._run("launch", problem_options={"wait": int(wait)})
        except FlowrateError as error:
            return self._figure(name, None, "s", reason=str(error))
        per_call = 1 / result.summary.median_samples_per_sec
        return self._figure(name, per_call, "s", detail="seconds per call, median interval")

    def train(self) -> SurveyFigure:
        quick_cpu = self.config.quick and self.device.type != "cuda"
        problem, size, precision, batch = MODEL_QUICK_CPU if quick_cpu else MODEL[self.device.type]
        name = f"train {problem}/{size}"
        try:
            result = self._run(problem, precision, size=size, mode="train", batch_size=batch)
        except FlowrateError as error:
            return self._figure(name, None, "FLOP/s", reason=str(error))
        f = result.flops
        detail = f"{result.summary.samples_per_sec:.4g} samples/s, batch {batch}, {precision}"
        return self._figure(
            name, f.model_flops_per_sec, "FLOP/s", datasheet=f.peak_flops, reason=f.reason, detail=detail
        )


def matmul_max(survey: Survey, precision: str) -> float | None:
    """The survey's maximum achievable matmul FLOP/s at ``precision``, None where it has none."""
    for figure in survey.figures:
        if figure.name == f"matmul {precision}" and figure.value:
            return figure.value
    return None


def _record(section: Survey, config: SurveyConfig, device: torch.device, environment: Environment) -> Result:
    summary = RunSummary(
        samples_per_sec=0.0,
        rate_samples_per_sec=0.0,
        steps_per_sec=0.0,
        tokens_per_sec=None,
        model_flops_per_sec=0.0,
        median_samples_per_sec=0.0,
        mean_samples_per_sec=0.0,
        stdev_samples_per_sec=None,
        cv=None,
        min_samples_per_sec=0.0,
        max_samples_per_sec=0.0,
        p5_samples_per_sec=None,
        p95_samples_per_sec=None,
        ci95_low_samples_per_sec=None,
        ci95_high_samples_per_sec=None,
        timed_steps=0,
        timed_samples=0,
        timed_duration_s=0.0,
        intervals=0,
        sample_every_steps=1,
        preheat_steps=0,
        preheat_s=0.0,
        final_loss=None,
    )
    return Result(
        config={
            "problem": "survey",
            "mode": "survey",
            "device": str(device),
            "quick": config.quick,
            "seconds": config.timed_s,
            "threads": config.threads,
        },
        problem=ProblemInfo(name="survey", size="quick" if config.quick else "full"),
        batch_size=1,
        environment=environment,
        intervals=[],
        losses=[],
        summary=summary,
        survey=section,
        kind=Kind.SURVEY,
        run_id=uuid.uuid4().hex[:12],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        flowrate_version=__version__,
    )
