"""The survey's reference-model figures: a model's training step, its inference step, greedy
generation's decode rate, and the power drawn during the training step.

- train MODEL: the training step's model FLOP/s against the datasheet peak (its MFU); GPT-2 124M
  in bf16 on a GPU, fc_mnist in fp32 on a CPU (the debug transformer with --quick);
- infer MODEL: the same model's forward step, the same way;
- generate MODEL: `flowrate generate`'s decode tokens/s with a KV cache (GPT-2 124M in bf16 on a
  GPU; the debug transformer on a CPU, seconds long); tokens/s has no datasheet value;
- power: the training step's mean power from the run's energy meter (NVML's energy counter on
  CUDA; RAPL on a CPU where readable), against the GPU's power limit where NVML reads one; where
  no counter exists the figure is empty with the meter's reason. NVML's counter steps every 20-100
  ms, so over a window of w seconds the mean may read up to 0.1/w above the truth: the band's
  upper end grows by that share (an H200's 0.23 s window read 1.07 of its 700 W limit, 2026-11-28).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flowrate.config import RunConfig
from flowrate.errors import FlowrateError
from flowrate.harness.generate import GenerateConfig, run_generation
from flowrate.harness.survey_bands import POWER_BAND
from flowrate.harness.survey_figures import KernelFigures
from flowrate.measure.energy.meter import METHOD_NVML_COUNTER
from flowrate.measure.energy.nvml import counter_error
from flowrate.problems.registry import get_problem
from flowrate.results.schema import Result
from flowrate.results.sections import SurveyFigure

Generate = Callable[[GenerateConfig], Result]


@dataclass(frozen=True)
class Reference:
    """A reference model: problem, size, precision and batch size."""

    problem: str
    size: str
    precision: str
    batch: int

    @property
    def label(self) -> str:
        return f"{self.problem}/{self.size}"


# The reference model of each device type, and --quick's on a CPU
MODEL: dict[str, Reference] = {
    "cuda": Reference("transformer", "gpt2", "bf16", 16),
    "cpu": Reference("fc_mnist", "default", "fp32", 64),
}
MODEL_QUICK_CPU = Reference("transformer", "debug", "fp32", 4)
# a model step's untimed warm-up, --quick or not: `flowrate run`'s own
MODEL_PREHEAT_STEPS = RunConfig.preheat_steps
# generation: the model, its batch, prompt and new tokens
GENERATOR: dict[str, tuple[Reference, int, int]] = {
    "cuda": (Reference("transformer", "gpt2", "bf16", 8), 128, 128),
    "cpu": (Reference("transformer", "debug", "fp32", 1), 8, 16),
}


def generate_with(config: GenerateConfig) -> Result:
    """`flowrate generate`'s measurement of ``config``."""
    return run_generation(config, get_problem(config.problem, config.size, config.problem_options))


class ModelFigures:
    """The reference model's figures; train() keeps its Result for power()."""

    def __init__(self, kernels: KernelFigures, generate: Generate) -> None:
        self.kernels = kernels
        self.generate_run = generate
        device = kernels.timing.device.type
        quick_cpu = kernels.timing.quick and device != "cuda"
        self.reference = MODEL_QUICK_CPU if quick_cpu else MODEL.get(device, MODEL["cpu"])
        self.trained: Result | None = None
        self.train_reason = "the training step did not run"

    def _step(self, mode: str) -> SurveyFigure:
        ref = self.reference
        name = f"{mode} {ref.label}"
        try:
            result = self.kernels.run(
                ref.problem,
                ref.precision,
                size=ref.size,
                mode=mode,
                batch_size=ref.batch,
                preheat_steps=MODEL_PREHEAT_STEPS,
            )
        except FlowrateError as error:
            if mode == "train":
                self.train_reason = f"the training step failed: {error}"
            return self.kernels.figure(name, None, "FLOP/s", reason=str(error))
        if mode == "train":
            self.trained = result
        f = result.flops
        detail = f"{result.summary.samples_per_sec:.4g} samples/s, batch {ref.batch}, {ref.precision}"
        return self.kernels.figure(
            name,
            f.model_flops_per_sec,
            "FLOP/s",
            datasheet=f.peak_flops,
            reason=f.reason,
            detail=detail,
            cv=result.summary.cv,
        )

    def train(self) -> SurveyFigure:
        return self._step("train")

    def infer(self) -> SurveyFigure:
        return self._step("infer")

    def generate(self) -> SurveyFigure:
        t = self.kernels.timing
        ref, prompt, new = GENERATOR.get(t.device.type, GENERATOR["cpu"])
        name = f"generate {ref.label}"
        config = GenerateConfig(
            problem=ref.problem,
            size=ref.size,
            batch_size=ref.batch,
            prompt_len=prompt,
            new_tokens=new,
            repeats=2,
            duration_s=t.seconds,
            warmup=1,
            precision=ref.precision,
            device=str(t.device),
            threads=t.threads,
        )
        try:
            generation = self.generate_run(config).generation
        except FlowrateError as error:
            return self.kernels.figure(name, None, "tokens/s", reason=str(error))
        if generation is None or generation.decode_tokens_per_sec is None:
            return self.kernels.figure(name, None, "tokens/s", reason="the generation decoded no token")
        detail = f"decode, batch {ref.batch}, prompt {prompt}, {new} new tokens, {ref.precision}"
        if generation.decode_bandwidth_utilization is not None:
            detail += f", {generation.decode_bandwidth_utilization:.2f} of memory bandwidth"
        return self.kernels.figure(
            name,
            generation.decode_tokens_per_sec,
            "tokens/s",
            reason="tokens/s has no datasheet value",
            detail=detail,
        )

    def power(self) -> SurveyFigure:
        """The training step's mean power, against the GPU's power limit where NVML reads one."""
        if self.trained is None:
            return self.kernels.figure("power", None, "W", reason=self.train_reason)
        energy = self.trained.energy
        if energy.average_watts is None:
            return self.kernels.figure("power", None, "W", reason=energy.reason or "no energy counter")
        limit = _power_limit(self.trained)
        reason = None if limit else "no power limit readable (NVML reads a GPU's)"
        detail = f"{energy.joules:.4g} J over {energy.seconds:.3g} s of train {self.reference.label}"
        if energy.samples_per_joule is not None:
            detail += f", {energy.samples_per_joule:.4g} samples/J"
        detail += f", {energy.method or 'meter'} ({', '.join(energy.domains) or 'no domains'})"
        band = POWER_BAND
        if energy.method == METHOD_NVML_COUNTER and energy.seconds:
            band = (band[0], band[1] * (1 + counter_error(energy.seconds)))
        return self.kernels.figure(
            "power", energy.average_watts, "W", datasheet=limit, reason=reason, detail=detail, band=band
        )


def _power_limit(result: Result) -> float | None:
    limit = result.environment.device.power_limit_w if result.environment.device else None
    return float(limit) if isinstance(limit, int | float) and limit > 0 else None
