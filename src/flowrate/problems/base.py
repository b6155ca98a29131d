"""The Problem interface: what every zoo entry and every user problem provides.

A problem owns its model factory, its synthetic batches, its loss, and its analytic costs
(parameter count and model FLOPs per sample), plus the ordered blocks of its model that weight
streaming will load one at a time. Executors and the measurement loop see nothing else.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flowrate.config import Mode, Precision
from flowrate.errors import FlowrateError
from flowrate.problems.sample import SampleField

# A batch is a tuple of tensors on the device: inputs first, then targets.
Batch = tuple[torch.Tensor, ...]


class Problem(abc.ABC):
    """A benchmark problem. Subclass it for your own model (see examples/custom_problem.py)."""

    #: Family name shown in results and `flowrate list`, e.g. "transformer".
    name: str = "custom"
    #: Named size within the family, e.g. "gpt2" or "debug".
    size: str = "default"
    #: Batch size used when the user gives none.
    default_batch_size: int = 8
    #: Modes the problem can run; kernel problems are forward-only.
    modes: tuple[Mode, ...] = (Mode.TRAIN, Mode.INFER)
    #: Mode used when the user gives none.
    default_mode: Mode = Mode.TRAIN
    #: The link whose datasheet bandwidth bytes_per_sample is compared with: "memory" (device
    #: memory) or "host_link" (host<->device, per direction).
    bandwidth_kind: str = "memory"

    @abc.abstractmethod
    def build_model(self) -> nn.Module:
        """Create the model in fp32 on the current default device, with its own initialisation."""

    @abc.abstractmethod
    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """Synthetic data with realistic statistics, made directly on ``device``.

        ``generator`` lives on ``device`` and is the only source of randomness, so a seed gives
        the same batch every time.
        """

    @abc.abstractmethod
    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """Run the model on ``batch`` and return the scalar loss (mean over the batch)."""

    @abc.abstractmethod
    def parameter_count(self) -> int:
        """Trainable parameters, computed analytically from the configuration (no model built)."""

    @abc.abstractmethod
    def forward_flops_per_sample(self) -> int:
        """Model FLOPs of one forward pass per sample; one multiply-add counts 2 FLOPs."""

    def train_flops_per_sample(self) -> int:
        """Model FLOPs of one training step per sample.

        The backward pass costs twice the forward (a gradient for the weights and one for the
        inputs of each matmul), so training is 3 x forward. Problems whose first layer reads the
        data directly override this: no gradient flows into the data.
        """
        return 3 * self.forward_flops_per_sample()

    def flops_per_sample(self, mode: Mode) -> int:
        if mode is Mode.TRAIN:
            return self.train_flops_per_sample()
        return self.forward_flops_per_sample()

    def flops_by_op_class(self, mode: Mode) -> dict[str, int] | None:
        """Model FLOPs per sample by op class ("matmul", "attention", "convolution"), or None.

        Where a problem gives them, a disagreement with the counted FLOPs names the class.
        """
        return None

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        """The model's blocks in execution order; together they hold every parameter.

        By default, the modules of the model's ``blocks`` ModuleList (the zoo's convention).
        Weight streaming loads the model one block at a time, so override this when your model
        keeps its layers elsewhere.
        """
        blocks = getattr(model, "blocks", None)
        if not isinstance(blocks, nn.ModuleList):
            raise FlowrateError(
                f"{type(self).__name__} declares no blocks: give {type(model).__name__} a "
                "`self.blocks = nn.ModuleList([...])` that forward() runs in order, or override "
                "Problem.blocks(model) to return its blocks in execution order"
            )
        return list(blocks)

    def tied_parameters(self, model: nn.Module) -> dict[int, list[nn.Parameter]]:
        """Parameters a block uses but another block holds (tied weights), by block index.

        Weight streaming copies them to the device with the block that uses them. By default,
        the parameters of the modules a block keeps in a ``_tied`` tuple (the zoo's convention:
        an LM head reuses the embedding's weight without registering it twice).
        """
        tied: dict[int, list[nn.Parameter]] = {}
        for index, block in enumerate(self.blocks(model)):
            params = [p for m in block.modules() for t in getattr(m, "_tied", ()) for p in t.parameters()]
            if params:
                tied[index] = params
        return tied

    def set_precision(self, precision: Precision) -> None:
        """Called before the model is built. Models ignore it (autocast and the executor apply the
        precision); kernel problems make their operands in the precision's dtype."""
        return None

    def bytes_per_sample(self, mode: Mode) -> int | None:
        """Bytes moved per sample by memory-bound kernels (bytes/s is reported); None otherwise."""
        return None

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """A batch of a synthetic task the model can really learn, for `flowrate check`.

        Same shapes and dtypes as make_batch, but structured (class clusters, a copy language)
        so the loss falls when training works. Optional: problems without one cannot be checked.
        """
        raise FlowrateError(
            f"{type(self).__name__} has no learnable task for `flowrate check`: implement "
            "Problem.learnable_batch(batch_size, device, generator)"
        )

    # Real data (`--data DIR`). A dataset stores each sample as the fields of sample_spec() (on
    # disk, in those dtypes); the loader hands batches of them to batch_from_samples on the device.
    # `flowrate data make` writes a problem's synthetic batches through samples_from_batch.
    # Optional: a problem without them runs on synthetic data only.

    def sample_spec(self) -> tuple[SampleField, ...]:
        """The fields of one stored sample: name, shape, dtype and value bound (vocabulary, classes)."""
        raise FlowrateError(
            f"{type(self).__name__} does not read datasets: implement Problem.sample_spec(), "
            "samples_from_batch() and batch_from_samples() to run it with --data"
        )

    def samples_from_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The stored form of a batch from make_batch: a (B, *shape) tensor per field of sample_spec()."""
        self.sample_spec()
        raise NotImplementedError(f"{type(self).__name__}.samples_from_batch")

    def batch_from_samples(self, samples: Mapping[str, torch.Tensor], generator: torch.Generator) -> Batch:
        """The Batch make_batch would give, from a batch of stored samples already on the device.

        Conversions (dtype, normalisation, masking) run here, on the device; ``generator`` lives
        there too and is the only source of randomness.
        """
        self.sample_spec()
        raise NotImplementedError(f"{type(self).__name__}.batch_from_samples")

    @property
    def tokens_per_sample(self) -> int | None:
        """Tokens in one sample for language problems (tokens/s is reported); None otherwise."""
        return None

    def describe(self) -> dict[str, Any]:
        """Shape settings recorded in every result (sequence length, hidden size, …)."""
        return {}


@dataclass(frozen=True)
class Family:
    """A zoo entry: named sizes of one model family and how to build a Problem from one."""

    name: str
    summary: str
    # size name -> the family's frozen config dataclass; every family has a "debug" size
    sizes: Mapping[str, Any]
    default_size: str
    build: Callable[[Any], Problem]
    # config fields a user may override from the command line, e.g. ("seq_len", "layers")
    options: tuple[str, ...] = ()
    # which option --sample-shape sets (sequence length or image side)
    sample_shape_option: str | None = None
