"""Kernel problems: single operations (GEMM, convolution, attention, memory copies) beside the models.

Semantics shared by every kernel:

- **A sample is one kernel call.** ``batch_size`` is the number of calls per step (default 1), so
  samples/s = calls/s, FLOP/s = calls/s × forward_flops_per_sample(), and bytes/s = calls/s ×
  bytes_per_sample(). The call count travels in the batch as a trailing 0-dim int64 tensor on
  the CPU (reading it does not synchronize the device); loss() runs the operation that many times.
- **Forward only**: kernels run in infer mode (``torch.inference_mode()`` plus the precision's
  autocast); ``--mode train`` is refused.
- **Operand dtype follows the precision** (set_precision): fp32 and tf32 → float32 (TF32 off or on,
  as flowrate sets it), bf16 and pure-bf16 → bfloat16, fp16 → float16. Operands are made in that
  dtype on the device in make_batch, so autocast finds them already in its dtype and casts nothing
  inside the timed loop. Weights (conv2d, layernorm) are fp32 parameters of the "model", like a
  model's; they are cast to the operand dtype once per model and kept (see KernelWeights).
- **The loss** is one element of the last call's output (copied out of outputs made per call, so
  the loop's pending values do not keep whole outputs alive; a view for the copy kernels, whose
  outputs live in the batch). No reduction: it would add a memory-bound kernel to every step. The
  one-element copy is one tiny kernel per step, not per call; raise --batch-size to amortise it.
- **FLOPs** are exact formulas with one multiply-add = 2 FLOPs, and agree with
  ``torch.utils.flop_counter.FlopCounterMode`` except for causal attention (below). Memory-bound
  kernels (layernorm, copy, host link) count 0 FLOPs and report bytes_per_sample(), which the
  runner turns into bytes/s against the device memory (or host link) bandwidth; compute kernels
  report no bytes, so no bandwidth fraction that means nothing appears beside their FLOP/s.
- **No blocks**: a kernel has nothing to stream, so blocks() raises FlowrateError (the runner
  records "no blocks").

The kernels, each module with its FLOP or byte formulas: ``compute`` (gemm, bmm, conv2d,
attention), ``memory`` (layernorm, copy on the device), ``link`` (h2d, d2h, duplex over the host
link), ``launch`` (dispatch and launch latency, µs per call); ``base`` holds what they share.
"""

from __future__ import annotations

from flowrate.problems.base import Family
from flowrate.problems.kernels import collectives, compute, launch, link, memory

# The order `flowrate list` shows them in.
FAMILIES: tuple[Family, ...] = (
    *compute.FAMILIES,
    *memory.FAMILIES,
    *link.FAMILIES,
    *launch.FAMILIES,
    *collectives.FAMILIES,
)
