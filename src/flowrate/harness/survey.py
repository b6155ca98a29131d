"""`flowrate survey`: what the machine it runs on can do, figure by figure, against its datasheet.

Every figure is a short run of a zoo problem through the harness (``run_config``) or of
`flowrate generate`, in this order: matmul and attention per precision the device computes in,
memory copy, the host link, launch latency, the collectives' bus bandwidth (flowrate.harness.
survey_figures), then a reference model's training step, inference step and generation, and the
power drawn while it trained (flowrate.harness.survey_model).

A figure that cannot be measured here (a CUDA-only one on a CPU, a shape that does not fit) keeps
its name with an empty value and the reason. Bands: flowrate.harness.survey_bands.

Launched by torchrun, the survey measures the collectives alone (every rank runs the all-reduce,
each on the device a data-parallel run gives it; a device's own figures would be summed over the
ranks): every rank returns the same record.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from flowrate._version import __version__
from flowrate.config import RunConfig
from flowrate.errors import ConfigError
from flowrate.execution.launch import launched
from flowrate.harness.api import run_config
from flowrate.harness.survey_bands import Band, outside
from flowrate.harness.survey_figures import LINKS, KernelFigures, Measure, Shape, Timing
from flowrate.harness.survey_model import Generate, ModelFigures, generate_with
from flowrate.measure.device import resolve_device
from flowrate.measure.env import collect_environment
from flowrate.results.configs import SurveyRecordConfig
from flowrate.results.environment import Environment, environment_from
from flowrate.results.schema import Result, RunSummary
from flowrate.results.sections import Kind, ProblemInfo, Survey, SurveyFigure


@dataclass(frozen=True)
class SurveyConfig:
    """What `flowrate survey` measures and how long each measurement lasts."""

    device: str = "auto"
    quick: bool = False  # fewer shapes, smaller model: within ~3 minutes on a 2-core CPU
    seconds: float | None = None  # timed seconds of each measurement; None: 1.0, or 0.5 with quick
    precisions: tuple[str, ...] = ()  # matmul precisions; empty: every one the device computes in
    shapes: tuple[Shape, ...] = ()  # the matmul shape search; empty: SHAPES for the device
    model: bool = True  # the reference model's figures: train, infer, generate, power
    threads: int | None = None
    bands: Mapping[str, Band] = field(default_factory=dict)  # replace the default band by name

    @property
    def timed_s(self) -> float:
        return self.seconds if self.seconds is not None else 0.5 if self.quick else 1.0


@dataclass(frozen=True)
class MachineSurvey:
    """A finished survey: its record, its section, and the figures outside their band."""

    result: Result
    survey: Survey
    outside: tuple[SurveyFigure, ...]


def check_launch(precisions: Sequence[str], shapes: Sequence[Shape], model: bool) -> None:
    """Under torchrun the survey measures the collectives alone, so the options that choose the
    device's own figures (each rank's would be summed over the ranks) are refused, naming the
    first one given: precisions, shapes, or the model left out."""
    if launched() is None:
        return
    for flag, given in (("precision", bool(precisions)), ("shapes", bool(shapes)), ("no-model", not model)):
        if given:
            raise ConfigError(flag, "applies without torchrun (under it the survey measures the collectives)")


def device_precisions(device: torch.device) -> tuple[str, ...]:
    """The matmul precisions of a device: fp32 and bf16 on a CPU; fp32 and fp16 on CUDA, and tf32
    and bf16 there from compute capability 8.0 (Ampere) on: below it torch emulates bf16, far
    slower, and tf32 does not exist (flowrate.execution.precision refuses bf16 there)."""
    if device.type != "cuda":
        return ("fp32", "bf16")
    major, _ = torch.cuda.get_device_capability(device)
    return ("fp32", "tf32", "bf16", "fp16") if major >= 8 else ("fp32", "fp16")


def run_survey(
    config: SurveyConfig,
    *,
    measure: Measure = run_config,
    generate: Generate = generate_with,
    argv: list[str] | None = None,
    on_figure: Callable[[SurveyFigure], None] | None = None,
) -> Result:
    """Measure every figure in turn (``measure`` runs one RunConfig, ``generate`` one generation)
    and return the survey record."""
    launch = launched()
    if launch is not None:
        return _collectives(config, launch.world_size, measure, on_figure)
    device = resolve_device(config.device)
    environment = environment_from(collect_environment(device, argv))
    name = environment.device_name or device.type
    figures: list[SurveyFigure] = []

    def add(figure: SurveyFigure) -> SurveyFigure:
        figures.append(figure)
        if on_figure is not None:
            on_figure(figure)
        return figure

    timing = Timing(device, name, config.timed_s, config.quick, config.threads, config.bands)
    kernels = KernelFigures(timing, measure)
    precisions = config.precisions or device_precisions(device)
    maxima = {p: add(kernels.matmul(p, config.shapes)).value for p in precisions}
    for precision in precisions:
        add(kernels.attention(precision, maxima[precision]))
    add(kernels.copy())
    for problem, pinned in LINKS:
        add(kernels.link(problem, pinned))
    add(kernels.launch(wait=False))
    if device.type == "cuda":
        add(kernels.launch(wait=True))
    add(kernels.allreduce())
    if config.model:
        model = ModelFigures(kernels, generate)
        for figure in (model.train, model.infer, model.generate, model.power):
            add(figure())
    section = Survey(device=name, quick=config.quick, seconds_per_measurement=config.timed_s, figures=figures)
    return _record(section, config, device, environment)


def survey_machine(
    config: SurveyConfig,
    *,
    argv: list[str] | None = None,
    on_figure: Callable[[SurveyFigure], None] | None = None,
    measure: Measure = run_config,
    generate: Generate = generate_with,
) -> MachineSurvey:
    """Run the survey (run_survey) and hold each figure to its band."""
    result = run_survey(config, measure=measure, generate=generate, argv=argv, on_figure=on_figure)
    assert result.survey is not None  # run_survey always writes it
    return MachineSurvey(result, result.survey, tuple(outside(result.survey.figures)))


def matmul_max(survey: Survey, precision: str) -> float | None:
    """The survey's maximum achievable matmul FLOP/s at ``precision``, None where it has none."""
    for figure in survey.figures:
        if figure.name == f"matmul {precision}" and figure.value:
            return figure.value
    return None


def _collectives(
    config: SurveyConfig, world: int, measure: Measure, on_figure: Callable[[SurveyFigure], None] | None
) -> Result:
    """The survey under torchrun: the all-reduce's bus bandwidth across the ranks."""
    kind = "cpu" if config.device == "cpu" or not torch.cuda.is_available() else "cuda"
    timing = Timing(torch.device(kind), kind, config.timed_s, config.quick, config.threads, config.bands)
    measured: list[Result] = []

    def keep(run: RunConfig) -> Result:
        measured.append(measure(run))
        return measured[-1]

    figure = KernelFigures(timing, keep).allreduce(world, config.device)
    if on_figure is not None:
        on_figure(figure)
    environment = measured[-1].environment if measured else environment_from({})
    name = environment.device_name or kind
    timed = config.timed_s
    section = Survey(device=name, quick=config.quick, seconds_per_measurement=timed, figures=[figure])
    return _record(section, config, config.device, environment)


# each figure is a run of its own: the survey record summarizes no loop (its rates are 0)
NO_THROUGHPUT = RunSummary(
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


def _record(
    section: Survey, config: SurveyConfig, device: torch.device | str, environment: Environment
) -> Result:
    return Result(
        config=SurveyRecordConfig(
            device=str(device), quick=config.quick, seconds=config.timed_s, threads=config.threads
        ),
        problem=ProblemInfo(name="survey", size="quick" if config.quick else "full"),
        batch_size=1,
        environment=environment,
        intervals=[],
        losses=[],
        summary=NO_THROUGHPUT,
        survey=section,
        kind=Kind.SURVEY,
        run_id=uuid.uuid4().hex[:12],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        flowrate_version=__version__,
    )
