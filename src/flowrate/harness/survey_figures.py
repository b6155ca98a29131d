"""The survey's kernel figures: each a short run of a zoo kernel through the harness.

- matmul, per precision: the maximum achievable FLOP/s over a few GEMM shapes (the MAMF finder's
  idea: a datasheet peak is not reached by every shape, so search shapes and keep the best),
  against the dense datasheet peak;
- attention, per precision: F.scaled_dot_product_attention's forward FLOP/s at one standard shape
  (the zoo's attention kernel runs forward only), against the datasheet peak and, in its detail,
  against the survey's matmul maximum at the same precision. tf32 is held to the fp32 peak: SDPA's
  fused kernels compute fp32 inputs without TF32 (an H200 ran attention tf32 and fp32 at 40 and
  42 TFLOP/s, 2026-11-28), so the tf32 peak is one its kernel cannot reach;
- copy: device memory bandwidth (read + write), against the datasheet's;
- h2d, d2h pinned and pageable, duplex (both directions at once, pinned): the host link, against
  its theoretical rate per direction (twice that for duplex; CUDA only);
- launch: seconds per eager op call (dispatch) and, on CUDA, launch to completion;
- allreduce busbw: under torchrun (and only there: the survey then measures the collectives
  alone), an all-reduce across the ranks, its bus bandwidth as nccl-tests defines it
  (flowrate.problems.kernels.collectives); without torchrun the figure says how to measure it.

On a GPU a step of matmul, attention or copy holds as many calls as last STEP_S at the datasheet
rate (calls_per_step), so that whatever a step costs besides its kernel is spread over many
calls: an H200's 256 MiB copy, 0.13 ms at its bandwidth, measured 1.2 of 4.2 TB/s at one call a
step and 3.8 at 32 (2026-11-28; what the rest was is not established: flowrate's loop costs some
3 µs a step on a CPU). A CPU's calls last milliseconds: one a step.

A figure that cannot be measured here keeps its name with an empty value and the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from flowrate.config import Mode, Precision, RunConfig
from flowrate.errors import FlowrateError
from flowrate.harness.survey_bands import Band, default_band, make_figure
from flowrate.measure.peaks import peak_for
from flowrate.problems.kernels.collectives import collective_bandwidths
from flowrate.problems.registry import get_problem
from flowrate.results.schema import Result
from flowrate.results.sections import SurveyFigure
from flowrate.units import si

Shape = tuple[int, int, int]  # m, n, k: (m x k) @ (k x n)
Measure = Callable[[RunConfig], Result]

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
# Attention's standard shape, (batch, heads, seq_len, head_dim), not causal: FlashAttention-2's
# benchmark shape (head_dim 128, sequence 2k, batch 8) on a GPU; one small enough for seconds on a CPU.
ATTENTION: dict[tuple[str, bool], tuple[int, int, int, int]] = {
    ("cuda", False): (8, 16, 2048, 128),
    ("cuda", True): (8, 16, 2048, 128),
    ("cpu", False): (1, 8, 512, 64),
    ("cpu", True): (1, 8, 256, 64),
}
COPY_MIB = {"cuda": 1024, "cpu": 256}
# A GPU step's length at the datasheet rate, and the most calls a step; the rate assumed where the
# peak table does not know the GPU (above any GPU's, so that a step is never too short)
STEP_S = 0.005
MAX_CALLS = 256
UNKNOWN_GPU_FLOPS = 2e15
UNKNOWN_GPU_BANDWIDTH = 1e13
LINK_MIB = 256
# The host-link figures: (problem, pinned)
LINKS: tuple[tuple[str, bool], ...] = (
    ("h2d", True),
    ("d2h", True),
    ("h2d", False),
    ("d2h", False),
    ("duplex", True),
)
# the all-reduce's size (nccl-tests' S) by device type and quick: large enough for the bus
# bandwidth's plateau on NVLink or PCIe; a CPU's gloo plateaus far sooner
COLLECTIVE_BYTES = {
    ("cuda", False): 2**30,
    ("cuda", True): 2**28,
    ("cpu", False): 2**26,
    ("cpu", True): 2**24,
}
COLLECTIVE_HOWTO = "collectives run under torchrun: `torchrun --nproc-per-node N -m flowrate survey`"


def calls_per_step(device_type: str, problem: str, options: Mapping[str, int], rate: float | None) -> int:
    """How many calls of zoo kernel ``problem`` with ``options`` a step makes: on a GPU, enough to
    last STEP_S at ``rate`` (its FLOP/s, or bytes/s for a kernel counted in bytes; where the peak
    table has none, UNKNOWN_GPU_FLOPS or UNKNOWN_GPU_BANDWIDTH), at most MAX_CALLS; elsewhere one."""
    if device_type != "cuda":
        return 1
    kernel = get_problem(problem, None, options)
    flops = kernel.forward_flops_per_sample()
    work, unknown = (
        (flops, UNKNOWN_GPU_FLOPS) if flops else (kernel.bytes_per_sample(Mode.INFER), UNKNOWN_GPU_BANDWIDTH)
    )
    if not work:
        return 1
    return max(1, min(MAX_CALLS, math.ceil(STEP_S * (rate or unknown) / work)))


@dataclass(frozen=True)
class Timing:
    """How long each measurement lasts and where it runs (from the survey's configuration)."""

    device: torch.device
    name: str  # the device name the peak table is searched for
    seconds: float
    quick: bool
    threads: int | None
    bands: Mapping[str, Band]


class KernelFigures:
    """One measurement per method, each a figure (an empty one with the reason when it fails)."""

    def __init__(self, timing: Timing, measure: Measure) -> None:
        self.timing = timing
        self.measure = measure

    def run(
        self, problem: str, precision: str = "fp32", device: str | None = None, **options: object
    ) -> Result:
        """One run of ``problem`` for this survey's window; ``options`` are RunConfig fields by
        name and win over the survey's (a model's training step takes `flowrate run`'s own
        preheat: a kernel is warm after a call or two, a model's first steps still allocate)."""
        t = self.timing
        settings: dict[str, object] = {
            "preheat_steps": 1 if t.quick else 2,
            "min_steps": 2,
            "duration_s": t.seconds,
            "target_interval_s": max(t.seconds / 4, 0.01),
        }
        settings.update(options)
        return self.measure(
            RunConfig(
                problem=problem,
                precision=Precision.parse(precision),
                device=device or str(t.device),
                threads=t.threads,
                **settings,  # type: ignore[arg-type]  # RunConfig fields by name
            )
        )

    def figure(self, name: str, value: float | None, unit: str, **kw: object) -> SurveyFigure:
        """The figure, in the band ``--bands`` gives it, else in ``band`` (a figure's own), else in
        its default band."""
        datasheet = kw.get("datasheet")
        own = kw.pop("band", None) or default_band(name, datasheet is not None)
        band = self.timing.bands.get(name, own)
        return make_figure(name, value, unit, band=band, **kw)  # type: ignore[arg-type]

    def matmul(self, precision: str, shapes: tuple[Shape, ...]) -> SurveyFigure:
        name = f"matmul {precision}"
        peak = peak_for(self.timing.name, precision)
        shapes = shapes or SHAPES[(self.timing.device.type, self.timing.quick)]
        best: tuple[float, Shape, float | None] | None = None
        failures: list[str] = []
        for m, n, k in shapes:
            options = {"m": m, "n": n, "k": k}
            calls = calls_per_step(self.timing.device.type, "gemm", options, peak.flops)
            try:
                result = self.run("gemm", precision, batch_size=calls, problem_options=options)
            except FlowrateError as error:
                failures.append(f"{m}x{n}x{k}: {error}")
                continue
            rate = result.summary.model_flops_per_sec
            if best is None or rate > best[0]:
                best = (rate, (m, n, k), result.summary.cv)
        if best is None:
            return self.figure(name, None, "FLOP/s", reason="; ".join(failures))
        m, n, k = best[1]
        tried = f"best of {len(shapes) - len(failures)} shapes: {m}x{n}x{k} (m x n x k)"
        return self.figure(
            name, best[0], "FLOP/s", datasheet=peak.flops, reason=peak.reason, detail=tried, cv=best[2]
        )

    def attention(self, precision: str, matmul: float | None) -> SurveyFigure:
        name = f"attention {precision}"
        batch, heads, seq, dim = ATTENTION[(self.timing.device.type, self.timing.quick)]
        shape = {"batch": batch, "heads": heads, "seq_len": seq, "head_dim": dim}
        held_to = "fp32" if precision == "tf32" and self.timing.device.type == "cuda" else precision
        peak = peak_for(self.timing.name, held_to)
        calls = calls_per_step(self.timing.device.type, "attention", shape, peak.flops)
        try:
            result = self.run("attention", precision, batch_size=calls, problem_options=shape)
        except FlowrateError as error:
            return self.figure(name, None, "FLOP/s", reason=str(error))
        rate = result.summary.model_flops_per_sec
        detail = f"forward, {batch}x{heads}x{seq}x{dim} (batch x heads x seq x head_dim)"
        if matmul:
            detail += f", {rate / matmul:.2f} of the matmul {precision} max"
        if held_to != precision:
            detail += "; SDPA computes fp32 without TF32: held to the fp32 peak"
        found = {"reason": peak.reason, "detail": detail, "cv": result.summary.cv}
        return self.figure(name, rate, "FLOP/s", datasheet=peak.flops, **found)

    def copy(self) -> SurveyFigure:
        t = self.timing
        mib = COPY_MIB.get(t.device.type, 256) // (4 if t.quick else 1)
        peak = peak_for(t.name, "fp32")
        calls = calls_per_step(t.device.type, "copy", {"mib": mib}, peak.memory_bandwidth)
        try:
            result = self.run("copy", batch_size=calls, problem_options={"mib": mib})
        except FlowrateError as error:
            return self.figure("copy", None, "B/s", reason=str(error))
        reason = None if peak.memory_bandwidth else peak.reason or f"no memory bandwidth for {t.name}"
        return self.figure(
            "copy",
            result.flops.bytes_per_sec,
            "B/s",
            datasheet=peak.memory_bandwidth,
            reason=reason,
            detail=f"{mib} MiB, read + write",
            cv=result.summary.cv,
        )

    def link(self, problem: str, pinned: bool) -> SurveyFigure:
        """A host-link figure: bytes/s of ``problem`` (h2d, d2h or duplex), against the link's
        rate per direction (both directions' for duplex, which moves bytes both ways at once)."""
        name = f"{problem} {'pinned' if pinned else 'pageable'}"
        if self.timing.device.type != "cuda":
            return self.figure(name, None, "B/s", reason="the host link is measured on a CUDA device")
        peak = peak_for(self.timing.name, "fp32")
        try:
            result = self.run(problem, problem_options={"mib": LINK_MIB, "pinned": int(pinned)})
        except FlowrateError as error:
            return self.figure(name, None, "B/s", reason=str(error))
        directions = 2 if problem == "duplex" else 1
        link = peak.host_link_bandwidth * directions if peak.host_link_bandwidth else None
        reason = None if link else peak.reason or f"no host link figure for {self.timing.name}"
        detail = f"{LINK_MIB} MiB" + (" each way, both directions at once" if directions == 2 else "")
        rate, cv = result.flops.bytes_per_sec, result.summary.cv
        return self.figure(name, rate, "B/s", datasheet=link, reason=reason, detail=detail, cv=cv)

    def launch(self, wait: bool) -> SurveyFigure:
        name = "launch to completion" if wait else "launch"
        try:
            result = self.run("launch", problem_options={"wait": int(wait)})
        except FlowrateError as error:
            return self.figure(name, None, "s", reason=str(error))
        per_call = 1 / result.summary.median_samples_per_sec
        detail = "seconds per call, median interval"
        return self.figure(name, per_call, "s", detail=detail, cv=result.summary.cv)

    def allreduce(self, world: int | None = None, device: str = "auto") -> SurveyFigure:
        """The all-reduce's bus bandwidth across ``world`` ranks (torchrun's), each on ``device`` as
        a data-parallel run places it; without a world, the figure says how to measure it. A rank
        that fails fails the survey (RunFailed, one line): it is the survey's one figure."""
        name = "allreduce busbw"
        if world is None:
            return self.figure(name, None, "B/s", reason=COLLECTIVE_HOWTO)
        size = COLLECTIVE_BYTES[(self.timing.device.type, self.timing.quick)]
        result = self.run("allreduce", device=device, problem_options={"bytes": size})
        algbw, busbw = collective_bandwidths("allreduce", result.flops.bytes_per_sec or 0.0, world)
        backend = result.distributed.backend if result.distributed else None
        detail = f"{size // 2**20} MiB a call, {world} ranks ({backend or '?'}), algbw {si(algbw, 'B/s')}"
        reason = "busbw has no datasheet value: read it against the link between the ranks"
        return self.figure(name, busbw, "B/s", reason=reason, detail=detail, cv=result.summary.cv)
