"""Weight streaming's host side: what each streamed parameter keeps in host memory, and whether it fits.

Every parameter keeps its fp32 master weight (the host optimizer updates it), the copy sent to
the device (the master itself in fp32, a bf16 copy otherwise) and, when it trains, a landing
place for its gradient. For a CUDA device they are page-locked ("pinned"), which makes the copies
asynchronous and faster; pinned memory is limited, so a failed allocation falls back to pageable
memory with a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import torch
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.errors import OutOfMemory


def host_bytes_per_parameter(mode: Mode, precision: Precision, optimizer: OptimizerName) -> int:
    """Host memory a streamed parameter needs: what check_host_memory compares with RAM.

    Training: fp32 master (4) + optimizer state (AdamW 8, SGD momentum 4) + fp32 gradient (4)
    + a compute-precision copy to send (2 in bf16; fp32 sends the master) + its gradient staging
    in the compute precision (2 in bf16, 4 in fp32). Inference: master and the copy to send.
    """
    compute = 2 if precision is Precision.BF16 else 4
    shadow = compute if compute != 4 else 0
    if mode is Mode.INFER:
        return 4 + shadow
    state = 4 if optimizer is OptimizerName.SGD else 8
    return 4 + state + 4 + shadow + compute


def check_host_memory(parameters: int, per_parameter: int, available: int | None = None) -> int:
    """Refuse, with the numbers, a model whose host-side state does not fit in available RAM."""
    needed = parameters * per_parameter
    available = psutil.virtual_memory().available if available is None else available
    if needed > available:
        raise OutOfMemory(
            f"streaming needs {needed / 1e9:.2f} GB of host memory for {parameters:,} parameters "
            f"({per_parameter} bytes each: fp32 master weights, optimizer state, gradients and the "
            f"copy sent to the device) but {available / 1e9:.2f} GB is available: use a smaller model, "
            "--optimizer sgd, or a host with more memory"
        )
    return needed


@dataclass
class HostParam:
    """One parameter's host side."""

    master: nn.Parameter  # fp32 master weight; the host optimizer updates it
    send: torch.Tensor  # what is copied to the device: the master itself, or a bf16 copy of it
    grad_staging: torch.Tensor | None  # pinned landing place of the device gradient
    grad_copied: Any = None  # CUDA event: the gradient has landed
    has_grad: bool = False


class HostMemory:
    """The host side of every streamed parameter, by ``id(parameter)``."""

    def __init__(self, pin: bool) -> None:
        self.pinned = pin
        self.warnings: list[str] = []
        self._params: dict[int, HostParam] = {}

    def keep(self, param: nn.Parameter, send_dtype: torch.dtype, trains: bool) -> None:
        """Take ``param``'s master weight, its copy to send, and (``trains``) its gradient's landing place."""
        master = nn.Parameter(self._copy(param.detach().float()), requires_grad=False)
        send = master.data if send_dtype == torch.float32 else self._copy(master.data.to(send_dtype))
        staging = self._copy(torch.empty_like(param, dtype=send_dtype)) if trains else None
        self._params[id(param)] = HostParam(master, send, staging)

    def __getitem__(self, param: torch.Tensor) -> HostParam:
        return self._params[id(param)]

    def __iter__(self) -> Iterator[HostParam]:
        return iter(self._params.values())

    def nbytes(self) -> int:
        """Host bytes held: masters, copies to send that are not the master, gradient staging."""
        hosts = list(self._params.values())
        sends = sum(h.send.nbytes for h in hosts if h.send is not h.master.data)
        staging = sum(h.grad_staging.nbytes for h in hosts if h.grad_staging is not None)
        return sum(h.master.nbytes for h in hosts) + sends + staging

    def _copy(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.cpu().clone() if tensor.device.type != "cpu" or not tensor.is_contiguous() else tensor
        if not self.pinned:
            return tensor
        try:
            return tensor.pin_memory()
        except RuntimeError as error:  # page-locked memory is a limited resource
            self.pinned = False
            self.warnings.append(
                f"pinned host memory could not be allocated ({error}); streaming falls back to pageable "
                "memory, whose host-to-device copies are slower and not asynchronous"
            )
            return tensor
