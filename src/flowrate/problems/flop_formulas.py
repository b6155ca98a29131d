"""FLOP formulas that correct PyTorch's own, shared by the problems that count FLOPs at build time
and by the run's per-operator counter (flowrate.measure.op_counter)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from torch.utils.flop_counter import conv_backward_flop


def grouped_conv_backward_flops(*args: Any, out_val: Any = None) -> int:
    """PyTorch's formula for a convolution's backward, with its weight gradient divided by the
    groups: torch 2.13's counts a grouped (depthwise) convolution's weight gradient ``groups``
    times over (its transposed shapes lose the group division; fixed upstream in PR 183405).

    Takes the op's tensors, as FlopCounterMode passes them to a formula marked ``_get_raw``.
    """
    *head, groups, mask = args
    formula = cast(Callable[..., int], conv_backward_flop)  # registered: it takes tensors and out_val
    inputs = formula(*head, groups, [mask[0], False, False], out_val=out_val)
    weights = formula(*head, groups, [False, mask[1], False], out_val=out_val)
    return int(inputs + weights // groups)


grouped_conv_backward_flops._get_raw = True  # type: ignore[attr-defined]
