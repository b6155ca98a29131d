"""The framework's own time in a step, term by term, each calibrated by its own micro-measurement.

A small model's step goes to the framework rather than to FLOPs or bytes: dispatching each op,
autograd's bookkeeping, the optimizer's per-tensor work and the calls of the step itself. The
cost model (flowrate.estimate.cost) adds, beside each op's roofline time:

- **dispatch**, per op by class (``DISPATCH_CLASSES``: matmul, elementwise, reduction, copy,
  view): the time of one call of the class's ops on tiny tensors through the real dispatcher
  (the median of its ops, so one odd op cannot set the class), views and metadata ops included;
- **modules**, per ``nn.Module`` call, and **autograd**, per node in training (each forward op on
  a tensor that requires grad makes one, and each trained parameter one AccumulateGrad): from
  a model of N tiny blocks (LayerNorm, Linear, GELU and a residual add, 16 wide, batch 1), timed
  at two N. The model's own trace (flowrate.estimate.trace) counts each block's ops, module calls
  and nodes; an inference step's slope per block less its ops' dispatch, over its module calls,
  is the module term (a real module's ``forward`` runs Python of its own: attribute look-ups,
  functional wrappers), and a training step's (forward, backward, ``zero_grad``) slope less
  its ops' dispatch and module calls, over its nodes, is the node term (backward's engine,
  gradient buffers, the nodes' creation in the forward);
- **optimizer**, per ``step()``: a + b·k + c·bytes for k tensors of ``bytes`` parameter bytes
  in all, fitted (least squares on relative error) to fused updates over a grid of tensor counts
  and sizes;
- **step**, per step and mode: what is left of that model's step at N = 0 (``backward()``,
  ``zero_grad``, ``inference_mode``) once its loss's ops, nodes and module calls are priced.

Each term is timed with everything it touches in cache; flowrate.estimate.reference measures how
much longer dispatch, autograd, module calls and the step take at a model's working set, and
the cost model scales them by that factor at each step's bytes per kernel
(Overheads.at_working_set).

Nothing here is fitted on a model: the micro-measurements are the only fit. Each time is the
fastest of the Timer's rounds (flowrate.estimate.probes), in seconds.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.estimate.ops import OPTIMIZER
from flowrate.estimate.probes import Timer, TinyBlock
from flowrate.estimate.trace import StepTrace, trace_step
from flowrate.execution.resident import make_optimizer
from flowrate.problems.base import Batch, Problem

DISPATCH_CLASSES = ("matmul", "elementwise", "reduction", "copy", "view")
# (tensors, elements per tensor) of the optimizer's fit: few and many tensors, small and large
OPTIMIZER_GRID = ((1, 64), (8, 64), (64, 64), (8, 1 << 14), (64, 1 << 12), (4, 1 << 20))
MODES = ("train", "infer")
BLOCKS = (4, 16)  # tiny blocks of the model that prices module calls and autograd nodes


@dataclass(frozen=True)
class OptimizerCost:
    """Seconds of one ``optimizer.step()``: per_step + per_tensor·k + per_byte·bytes."""

    per_step: float
    per_tensor: float
    per_byte: float

    def seconds(self, tensors: int, nbytes: float) -> float:
        return self.per_step + self.per_tensor * tensors + self.per_byte * nbytes


@dataclass(frozen=True)
class Overheads:
    """One device's framework overheads, in seconds."""

    dispatch_s: dict[str, float]  # op class (DISPATCH_CLASSES) -> seconds per op
    autograd_node_s: float  # per autograd node, training
    module_s: float  # per nn.Module call
    optimizer: dict[str, OptimizerCost]  # adamw, sgd
    step_s: dict[str, float]  # mode (train, infer) -> seconds per step
    # [(bytes per kernel, factor)], ascending: how much longer dispatch, autograd, module calls and
    # the step's fixed cost take in a step whose kernels move that many bytes each than in these
    # micro-measurements (flowrate.estimate.reference); empty (a calibration made before the
    # reference existed): 1 at every working set
    working_set: tuple[tuple[float, float], ...] = ()

    def dispatch(self, op_class: str) -> float:
        return self.dispatch_s.get(op_class, 0.0) if op_class else 0.0

    def factor_at(self, bytes_per_kernel: float) -> float:
        """The working-set factor of a step whose kernels move ``bytes_per_kernel`` each: the
        measured points joined linearly in log bytes, the end points' beyond them."""
        points = self.working_set
        if not points:
            return 1.0
        if bytes_per_kernel <= points[0][0]:
            return points[0][1]
        for (b0, f0), (b1, f1) in itertools.pairwise(points):
            if bytes_per_kernel <= b1:
                t = math.log(bytes_per_kernel / b0) / math.log(b1 / b0)
                return f0 + t * (f1 - f0)
        return points[-1][1]

    def at_working_set(self, bytes_per_kernel: float) -> Overheads:
        """The terms a step whose kernels move ``bytes_per_kernel`` each pays: dispatch, autograd,
        module calls and the step's fixed cost times factor_at (the optimizer's fit is timed on
        real tensors)."""
        factor = self.factor_at(bytes_per_kernel)
        return Overheads(
            dispatch_s={name: seconds * factor for name, seconds in self.dispatch_s.items()},
            autograd_node_s=self.autograd_node_s * factor,
            module_s=self.module_s * factor,
            optimizer=self.optimizer,
            step_s={name: seconds * factor for name, seconds in self.step_s.items()},
        )

    def describe(self) -> str:
        """'dispatch 0.8-1.8 µs per op, autograd 8.7 µs per node, 3.5 µs per module call, x1 at 20
        KB per kernel to x1.4 at 270 KB'."""
        low, high = min(self.dispatch_s.values()), max(self.dispatch_s.values())
        text = (
            f"dispatch {low * 1e6:.2g}-{high * 1e6:.2g} µs per op, autograd "
            f"{self.autograd_node_s * 1e6:.2g} µs per node, {self.module_s * 1e6:.2g} µs per module call"
        )
        if self.working_set:
            ends = " to ".join(f"x{factor:.2g} at {size / 1e3:.0f} KB" for size, factor in self.working_set)
            text += f", {ends} per kernel"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "dispatch_s": dict(self.dispatch_s),
            "autograd_node_s": self.autograd_node_s,
            "module_s": self.module_s,
            "optimizer": {k: [v.per_step, v.per_tensor, v.per_byte] for k, v in self.optimizer.items()},
            "step_s": dict(self.step_s),
            "working_set": [list(point) for point in self.working_set],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Overheads:
        return cls(
            dispatch_s={k: float(v) for k, v in data["dispatch_s"].items()},
            autograd_node_s=float(data["autograd_node_s"]),
            module_s=float(data["module_s"]),
            optimizer={k: OptimizerCost(*map(float, v)) for k, v in data["optimizer"].items()},
            step_s={k: float(v) for k, v in data["step_s"].items()},
            # a calibration made before the reference models has none: 1 at every working set
            working_set=tuple((float(b), float(f)) for b, f in data.get("working_set", ())),
        )


def measure_overheads(device: torch.device, timer: Timer) -> Overheads:
    """Every term, on ``device`` (about 3 s on a CPU). Each time is the fastest of 9 short rounds:
    a microsecond call is easily slowed by another process, and more rounds find a quiet one."""
    timer = dataclasses.replace(timer, rounds=9)
    dispatch = {
        name: statistics.median(timer.seconds(call) for call in calls)
        for name, calls in dispatch_calls(device).items()
    }
    lines = {
        mode: _line(BLOCKS, [timer.seconds(_blocks_step(device, n, mode)) for n in BLOCKS]) for mode in MODES
    }
    infer = _priced(_trace(Mode.INFER), dispatch)
    train = _priced(_trace(Mode.TRAIN), dispatch)
    # per block (the second of the traced model's): dispatch, module calls, nodes
    module = max((lines["infer"][0] - infer[1][0]) / infer[1][1], 0.0)
    node = max((lines["train"][0] - train[1][0] - train[1][1] * module) / train[1][2], 0.0)
    step = {
        mode: max(lines[mode][1] - (d + m * module + n * node), 0.0)
        for mode, (d, m, n) in (("infer", infer[None]), ("train", train[None]))
    }
    optimizer = {}
    for name in OptimizerName:
        points = [
            (k, k * n * 4, timer.seconds(_optimizer_step(device, name, k, n))) for k, n in OPTIMIZER_GRID
        ]
        optimizer[name.value] = fit_optimizer(points)
    return Overheads(
        dispatch_s=dispatch, autograd_node_s=node, module_s=module, optimizer=optimizer, step_s=step
    )


def dispatch_calls(device: torch.device) -> dict[str, list[Callable[[], object]]]:
    """Calls of each class's common ops on 4 x 4 tensors that need no gradient: autograd is
    priced apart (and a ``no_grad`` block per call would cost more than the op)."""
    x, y = torch.randn(4, 4, device=device), torch.randn(4, 4, device=device)
    a3 = torch.randn(2, 4, 4, device=device)
    bias, weight = torch.zeros(4, device=device), torch.ones(4, device=device)
    return {
        "matmul": [lambda: torch.mm(x, y), lambda: torch.addmm(bias, x, y), lambda: torch.bmm(a3, a3)],
        "elementwise": [lambda: x + y, lambda: x * 2.0, lambda: torch.tanh(x), lambda: torch.relu(x)],
        "reduction": [
            x.sum,
            lambda: torch.softmax(x, -1),
            lambda: F.layer_norm(x, (4,), weight, bias),
            lambda: x.mean(-1),
        ],
        "copy": [x.clone, lambda: x.to(torch.float64), lambda: torch.cat([x, y])],
        "view": [lambda: x.view(16), x.t, lambda: x.transpose(0, 1), lambda: x.unsqueeze(0)],
    }


class _Blocks(Problem):
    """N tiny blocks, loss = the sum of the output: all overhead, no arithmetic."""

    name = "overheads"
    default_batch_size = 1
    width = 16

    def __init__(self, count: int = 2) -> None:
        self.count = count

    def build_model(self) -> nn.Module:
        return nn.Sequential(*(TinyBlock(self.width) for _ in range(self.count)))

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        return (torch.randn(batch_size, self.width, device=device, generator=generator),)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return model(batch[0]).sum()

    def parameter_count(self) -> int:
        return self.count * (self.width * self.width + 3 * self.width)

    def forward_flops_per_sample(self) -> int:
        return self.count * 2 * self.width * self.width

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.children())


def _blocks_step(device: torch.device, count: int, mode: str) -> Callable[[], None]:
    """A step of _Blocks(count): forward under inference_mode, or forward, backward and zero_grad."""
    problem = _Blocks(count)
    model = problem.build_model().to(device)
    batch = problem.make_batch(1, device, torch.Generator(device=device.type))

    def step() -> None:
        if mode == "infer":
            with torch.inference_mode():
                problem.loss(model, batch)
            return
        problem.loss(model, batch).backward()
        model.zero_grad(set_to_none=True)

    return step


def _trace(mode: Mode) -> StepTrace:
    return trace_step(
        _Blocks(), mode=mode, precision=Precision.FP32, optimizer=OptimizerName.ADAMW, batch_size=1
    )


def _priced(trace: StepTrace, dispatch: dict[str, float]) -> dict[int | None, tuple[float, int, int]]:
    """Per block (None: outside every block): the dispatch its ops cost, its module calls and its
    autograd nodes, the optimizer left out."""
    out: dict[int | None, tuple[float, int, int]] = {}
    for block in (None, *range(len(trace.blocks or ()))):
        ops = [op for op in trace.ops if op.block == block and op.phase != OPTIMIZER]
        out[block] = (
            sum(dispatch.get(op.dispatch, 0.0) for op in ops),
            trace.module_calls.get(block, 0),
            sum(op.node for op in ops) + trace.trained_tensors.get(block, 0),
        )
    return out


def _optimizer_step(
    device: torch.device, name: OptimizerName, tensors: int, size: int
) -> Callable[[], object]:
    params = [nn.Parameter(torch.randn(size, device=device)) for _ in range(tensors)]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = make_optimizer(name, params, 1e-4, device)
    optimizer.step()  # the first step makes the state
    return optimizer.step


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) of the line through two points."""
    (x0, x1), (y0, y1) = xs, ys
    slope = (y1 - y0) / (x1 - x0)
    return slope, y0 - slope * x0


def fit_optimizer(points: Sequence[tuple[float, float, float]]) -> OptimizerCost:
    """a + b·k + c·bytes through ``points`` = [(k, bytes, seconds)], least squares on relative
    error (a 20 µs step counts as much as a 20 ms one); a term the fit makes negative is dropped
    and the rest fitted again, so no term ever subtracts time."""
    active = [0, 1, 2]
    while True:
        rows = [[(1.0, k, b)[i] / t for i in active] for k, b, t in points]
        solution = torch.linalg.lstsq(
            torch.tensor(rows, dtype=torch.float64), torch.ones(len(points), 1, dtype=torch.float64)
        ).solution.flatten()
        coefficients = dict(zip(active, solution.tolist(), strict=True))
        negative = [i for i, value in coefficients.items() if value < 0]
        if not negative:
            return OptimizerCost(*(coefficients.get(i, 0.0) for i in range(3)))
        active = [i for i in active if i not in negative]
        if not active:
            return OptimizerCost(0.0, 0.0, 0.0)
