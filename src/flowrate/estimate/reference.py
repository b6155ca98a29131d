"""The framework's time at a model's working set: the reference model that scales the overhead terms.

The overhead terms (flowrate.estimate.overheads) are timed on 4 x 4 tensors and 16-wide blocks, so
between two calls the dispatcher's code and data stay in the core's caches. In a model's step
every kernel streams its tensors through those caches between two dispatches, and each dispatch,
autograd node and module call then finds less of its own state there. How much that costs
depends on the machine and on who shares its caches: while other work shares them, a model's
step slows far more than a tiny model's, and a calibration made then prices models too fast
(benchmarks/notes/, thirteenth session).

So a calibration also times reference models whose steps are about half framework:
ReferenceModel, a 2-layer pre-norm transformer with 4 heads and its own embedding and head, at
batch 4, in two sizes (SIZES): 32 wide over 64 tokens of 8, whose training kernels move about
25 KB each (a working set inside a core's L2), and 96 wide over 500 tokens of 24, whose kernels
move about 270 KB each (beyond it). Each one's training step is traced and priced like any
model's; its measured time, less the priced terms that are not the framework's per-call work
(compute, memory, the optimizer), over the priced dispatch, autograd, module and step terms, is
its working-set factor. A model's step then pays those four terms at the factor for its own
bytes per kernel, training or inferring: linear in log bytes between the two references, and
the nearer one's beyond them (Overheads.working_set, Overheads.factor_at;
flowrate.estimate.calibrating times and prices the references). A factor is never below 1: a
reference faster than priced is the roofline's error, not the framework's. The references are
the calibration's own models; nothing is fitted on a model flowrate estimates.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.config import OptimizerName
from flowrate.estimate.trace import StepTrace
from flowrate.execution.resident import make_optimizer
from flowrate.problems.base import Batch, Problem

# The framework terms the factor scales (flowrate.estimate.cost's TERMS)
FRAMEWORK_TERMS = ("dispatch", "autograd", "modules", "step")


def bytes_per_kernel(trace: StepTrace) -> float:
    """The bytes a step's kernels move, on average, between two of its calls: what passes through
    the caches between one dispatch and the next."""
    kernels = [op for op in trace.ops if op.kernel]
    return sum(op.bytes for op in kernels) / max(len(kernels), 1)


class ReferenceBlock(nn.Module):
    """Pre-norm attention (causal) and a 2x MLP with GELU, each with its residual."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.act, self.down = nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(attended.transpose(1, 2).reshape(batch, tokens, width))
        return x + self.down(self.act(self.up(self.norm2(x))))


class ReferenceNet(nn.Module):
    """Embedding, ``layers`` ReferenceBlocks, a final LayerNorm and the head: logits per token."""

    def __init__(self, width: int, heads: int, layers: int, vocabulary: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, width)
        self.blocks = nn.Sequential(*[ReferenceBlock(width, heads) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, vocabulary)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.embedding(tokens))))


class ReferenceModel(Problem):
    """The calibration's reference: the module docstring's transformer, next-token loss; SIZES
    lists the two a calibration times."""

    name = "reference"
    default_batch_size = 4
    heads, layers = 4, 2

    def __init__(self, width: int = 96, vocabulary: int = 500, tokens: int = 24) -> None:
        self.width, self.vocabulary, self.tokens = width, vocabulary, tokens

    def build_model(self) -> nn.Module:
        return ReferenceNet(self.width, self.heads, self.layers, self.vocabulary)

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        shape = (batch_size, self.tokens + 1)
        tokens = torch.randint(0, self.vocabulary, shape, generator=generator, device=device)
        return (tokens[:, :-1], tokens[:, 1:])

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        inputs, targets = batch
        return F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())

    def parameter_count(self) -> int:
        w = self.width
        block = 2 * 2 * w + (3 * w * w + 3 * w) + (w * w + w) + (2 * w * w + 2 * w) + (2 * w * w + w)
        return self.vocabulary * w + self.layers * block + 2 * w + (w * self.vocabulary + self.vocabulary)

    def forward_flops_per_sample(self) -> int:
        w, t = self.width, self.tokens
        matmuls = self.layers * 8 * w * w + w * self.vocabulary  # weights each token multiplies
        attention = self.layers * 2 * t * w  # scores and mix, per token (the causal half counted whole)
        return 2 * t * (matmuls + attention)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.get_submodule("blocks").children())


def reference_step(problem: ReferenceModel, device: torch.device) -> Callable[[], None]:
    """A real training step of ``problem`` on ``device``: forward, backward, a fused AdamW update
    and ``zero_grad``, as flowrate's resident execution runs it."""
    torch.manual_seed(0)
    model = problem.build_model().to(device)
    batch = problem.make_batch(problem.default_batch_size, device, torch.Generator(device=device.type))
    optimizer = make_optimizer(OptimizerName.ADAMW, list(model.parameters()), 1e-4, device)

    def step() -> None:
        problem.loss(model, batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def working_set_factor(measured_s: float, terms: dict[str, float]) -> float:
    """The factor that makes the priced ``terms`` of the reference's step sum to ``measured_s`` by
    scaling the framework's (FRAMEWORK_TERMS) alone; at least 1 (module docstring)."""
    framework = sum(terms.get(name, 0.0) for name in FRAMEWORK_TERMS)
    rest = sum(seconds for name, seconds in terms.items() if name not in FRAMEWORK_TERMS)
    if framework <= 0:
        return 1.0
    return max(1.0, (measured_s - rest) / framework)


# The references a calibration times: one whose kernels move about 25 KB each in training (its
# working set stays in a core's L2), and one whose kernels move about 270 KB (it outgrows L2)
SIZES = (ReferenceModel(width=32, vocabulary=64, tokens=8), ReferenceModel())
