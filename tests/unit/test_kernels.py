"""Kernel problems: end-to-end runs, FLOPs against FlopCounterMode, bytes, dtypes, options."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import flowrate
from flowrate.config import Mode, Precision
from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems import kernels
from flowrate.problems.base import Batch, Problem
from flowrate.problems.kernels.base import KernelProblem, KernelWeights
from flowrate.problems.kernels.collectives import OPERATIONS
from flowrate.problems.registry import FAMILIES, get_problem

CPU = torch.device("cpu")
KERNELS = [family.name for family in kernels.FAMILIES]
HOST_LINK = ["h2d", "d2h", "duplex"]
ON_CPU = [name for name in KERNELS if name not in (*HOST_LINK, *OPERATIONS)]  # collectives: torchrun
COMPUTE = ["gemm", "bmm", "conv2d", "attention"]


def _batch(problem: Problem, batch_size: int = 1, seed: int = 0) -> Batch:
    return problem.make_batch(batch_size, CPU, torch.Generator(CPU).manual_seed(seed))


def _counted_flops(problem: Problem, batch_size: int = 1) -> int:
    """FlopCounterMode over one loss() of the debug size. On the CPU the default SDPA kernel is
    invisible to it (counts 0); the math backend runs attention as two counted bmms."""
    model = problem.build_model()
    batch = _batch(problem, batch_size)
    with torch.inference_mode(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        problem.loss(model, batch)
    return counter.get_total_flops()


def test_every_kernel_family_is_in_the_zoo() -> None:
    single = {"gemm", "bmm", "conv2d", "attention", "layernorm", "copy", "launch"}
    assert set(KERNELS) == {*single, *HOST_LINK, *OPERATIONS}
    assert set(KERNELS) <= set(FAMILIES)


@pytest.mark.parametrize("name", ON_CPU)
def test_debug_size_runs_end_to_end_on_cpu(name: str) -> None:
    result = flowrate.benchmark(name, size="debug", steps=3, preheat_steps=1, device="cpu")
    assert result.config.mode == "infer"
    calls = 1000 if name == "launch" else 1  # launch makes 1000 calls a step, to amortise the step's own
    assert result.batch_size == calls
    assert len(result.losses) == 3 and all(math.isfinite(v) for v in result.losses)
    assert result.problem.blocks is None  # kernels have no blocks
    assert result.problem.parameters == result.problem.parameters_built
    s = result.summary  # 3 steps of `calls` calls: GlobalRate is 3·calls samples over the timed seconds
    assert s.timed_samples == 3 * calls and s.samples_per_sec == pytest.approx(3 * calls / s.timed_duration_s)


@pytest.mark.parametrize("precision", ["bf16", "fp16", "pure-bf16"])
@pytest.mark.parametrize("name", ["gemm", "conv2d", "attention", "layernorm", "copy"])
def test_debug_size_runs_in_low_precision(name: str, precision: str) -> None:
    result = flowrate.benchmark(
        name, size="debug", precision=precision, batch_size=2, steps=2, preheat_steps=0, device="cpu"
    )
    assert all(math.isfinite(v) for v in result.losses)


@pytest.mark.parametrize("name", HOST_LINK)
def test_host_link_refuses_the_cpu_in_one_line(name: str) -> None:
    with pytest.raises(ConfigError, match="needs a CUDA device; use --device cuda") as raised:
        flowrate.benchmark(name, size="debug", steps=3, preheat_steps=1, device="cpu")
    assert raised.value.field == "device"
    assert name in str(raised.value) and "\n" not in str(raised.value)


def test_host_link_refusal_names_the_link() -> None:
    with pytest.raises(ConfigError, match="h2d measures the host-to-device link"):
        _batch(get_problem("h2d", "debug"))


@pytest.mark.parametrize("name", COMPUTE)
def test_flops_formula_equals_flop_counter(name: str) -> None:
    problem = get_problem(name, "debug")
    assert problem.forward_flops_per_sample() > 0
    assert _counted_flops(problem) == problem.forward_flops_per_sample()


def test_flops_formulas_by_hand() -> None:
    assert get_problem("gemm", options={"m": 2, "n": 3, "k": 5}).forward_flops_per_sample() == 60
    assert get_problem("bmm", options={"batch": 7, "m": 2, "n": 3, "k": 5}).forward_flops_per_sample() == 420
    conv = get_problem("conv2d", "debug", options={"stride": 2, "image_size": 9})
    assert conv.describe()["output_size"] == 5  # (9 + 2 - 3) // 2 + 1
    assert conv.forward_flops_per_sample() == 2 * 2 * 8 * 5 * 5 * 4 * 9
    attention = get_problem("attention", "debug")
    assert attention.forward_flops_per_sample() == 4 * 2 * 2 * 32**2 * 16


def test_causal_attention_counts_the_kept_pairs_while_flop_counter_counts_the_square() -> None:
    full = get_problem("attention", "debug")
    causal = get_problem("attention", "debug", options={"causal": 1})
    assert causal.describe()["causal"] == 1
    assert 64 * causal.forward_flops_per_sample() == 33 * full.forward_flops_per_sample()  # S = 32
    assert _counted_flops(causal) == full.forward_flops_per_sample()


@pytest.mark.parametrize("name", COMPUTE)
def test_batch_size_is_the_number_of_calls(name: str) -> None:
    problem = get_problem(name, "debug")
    batch = _batch(problem, batch_size=3)
    calls = batch[-1]
    assert calls.device == CPU and calls.dim() == 0 and calls.dtype == torch.int64 and int(calls) == 3
    assert _counted_flops(problem, batch_size=3) == 3 * problem.forward_flops_per_sample()


def test_memory_bound_kernels_count_bytes_not_flops() -> None:
    layernorm = get_problem("layernorm", options={"rows": 10, "hidden": 6})
    copy = get_problem("copy", options={"mib": 3})
    assert layernorm.forward_flops_per_sample() == copy.forward_flops_per_sample() == 0
    # input read + output written + weight and bias read, 4 bytes each in fp32
    assert layernorm.bytes_per_sample(Mode.INFER) == (2 * 10 * 6 + 2 * 6) * 4
    assert copy.bytes_per_sample(Mode.INFER) == 2 * 3 * 2**20  # read + write
    layernorm.set_precision(Precision.BF16)
    assert layernorm.bytes_per_sample(Mode.INFER) == (2 * 10 * 6 + 2 * 6) * 2
    copy.set_precision(Precision.BF16)
    assert copy.bytes_per_sample(Mode.INFER) == 2 * 3 * 2**20  # a size in MiB, whatever the dtype
    assert _batch(copy)[0].numel() == 3 * 2**20 // 2


def test_host_link_bytes() -> None:
    assert get_problem("h2d", options={"mib": 2}).bytes_per_sample(Mode.INFER) == 2 * 2**20
    assert get_problem("d2h", options={"mib": 2}).bytes_per_sample(Mode.INFER) == 2 * 2**20
    assert get_problem("duplex", options={"mib": 2}).bytes_per_sample(Mode.INFER) == 2 * 2 * 2**20


@pytest.mark.parametrize("name", COMPUTE)
def test_compute_kernels_report_flops_not_bytes(name: str) -> None:
    problem = get_problem(name, "debug")
    assert problem.bytes_per_sample(Mode.INFER) is None  # no bandwidth fraction beside FLOP/s
    assert problem.bandwidth_kind == "memory"


def test_host_link_bandwidth_is_compared_with_the_host_link() -> None:
    assert all(get_problem(name).bandwidth_kind == "host_link" for name in HOST_LINK)
    assert get_problem("copy").bandwidth_kind == get_problem("layernorm").bandwidth_kind == "memory"


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [
        ("fp32", torch.float32),
        ("tf32", torch.float32),
        ("bf16", torch.bfloat16),
        ("pure-bf16", torch.bfloat16),
        ("fp16", torch.float16),
    ],
)
@pytest.mark.parametrize("name", ON_CPU)
def test_operands_are_made_in_the_precisions_dtype(name: str, precision: str, dtype: torch.dtype) -> None:
    problem = get_problem(name, "debug")
    problem.set_precision(Precision.parse(precision))
    operands = _batch(problem)[:-1]
    assert all(t.dtype == dtype for t in operands)
    assert isinstance(problem, KernelProblem) and problem.element_size == dtype.itemsize


@pytest.mark.parametrize("name", ["conv2d", "layernorm"])
def test_weights_are_cast_once_not_per_call_under_autocast(name: str) -> None:
    problem = get_problem(name, "debug")
    problem.set_precision(Precision.BF16)
    model = problem.build_model()
    assert all(p.dtype == torch.float32 for p in model.parameters())  # built like a model's
    batch = _batch(problem, batch_size=2)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        first = problem.loss(model, batch)
        assert isinstance(model, KernelWeights)
        cast = model.as_dtype(torch.bfloat16)
        problem.loss(model, batch)
        assert all(a is b for a, b in zip(cast, model.as_dtype(torch.bfloat16), strict=True))
    assert first.dtype == torch.bfloat16 and first.dim() == 0


def test_loss_is_a_small_copy_not_a_view_of_the_output() -> None:
    problem = get_problem("gemm", "debug")
    with torch.inference_mode():
        value = problem.loss(problem.build_model(), _batch(problem))
    assert value.dim() == 0 and value.untyped_storage().nbytes() == value.element_size()


def test_parameter_counts() -> None:
    conv = get_problem("conv2d", "debug")
    assert conv.parameter_count() == 4 * 8 * 3 * 3
    assert sum(p.numel() for p in conv.build_model().parameters()) == conv.parameter_count()
    layernorm = get_problem("layernorm", "debug")
    assert layernorm.parameter_count() == 2 * 64
    assert get_problem("gemm").parameter_count() == 0


def test_train_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="gemm runs infer only") as raised:
        flowrate.benchmark("gemm", size="debug", mode="train", steps=1, device="cpu")
    assert raised.value.field == "mode"


def test_kernels_cannot_stream() -> None:
    problem = get_problem("gemm", "debug")
    with pytest.raises(FlowrateError, match="no blocks"):
        problem.blocks(problem.build_model())


@pytest.mark.parametrize(
    ("name", "options", "field"),
    [
        ("gemm", {"m": 0}, "m"),
        ("bmm", {"batch": 0}, "batch"),
        ("conv2d", {"stride": 0}, "stride"),
        ("attention", {"causal": 2}, "causal"),
        ("layernorm", {"hidden": 0}, "hidden"),
        ("copy", {"mib": 0}, "mib"),
        ("h2d", {"pinned": 3}, "pinned"),
    ],
)
def test_bad_options_are_refused_naming_the_field(name: str, options: dict[str, int], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        get_problem(name, options=options)
    assert raised.value.field == field


def test_an_option_of_another_kernel_is_refused() -> None:
    with pytest.raises(ConfigError, match="does not apply to gemm"):
        get_problem("gemm", options={"batch": 2})


def test_shape_option_from_the_cli(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "run",
        *("--problem", "gemm", "--size", "debug", "-O", "m=8"),
        *("--steps", "2", "--preheat", "0", "--device", "cpu", "--json"),
    )
    assert out.code == 0, out.stderr
    data = out.json()
    problem = data["problem"]
    assert problem["settings"] == {"m": 8, "n": 64, "k": 64}
    assert problem["size"] == "debug+custom"
    assert problem["forward_flops_per_sample"] == 2 * 8 * 64 * 64
    assert data["config"]["mode"] == "infer"


def test_every_kernel_has_a_large_size() -> None:
    for name in set(KERNELS) - {"launch"}:  # every kernel has a large size for GPUs; a launch stays tiny
        assert "large" in FAMILIES[name].sizes
    assert get_problem("gemm", "xl").describe() == {"m": 16384, "n": 16384, "k": 16384}


def test_list_shows_the_kernels(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("list", "--json")
    assert out.code == 0, out.stderr
    rows = out.json()
    assert {row["family"] for row in rows} >= set(KERNELS)
    gemm = next(r for r in rows if r["family"] == "gemm" and r["is_default"])
    assert gemm["settings"] == {"m": 4096, "n": 4096, "k": 4096}


class _CountCasts(TorchDispatchMode):
    """Counts dtype conversions the dispatcher runs (autocast's casts arrive here as _to_copy)."""

    def __init__(self) -> None:
        super().__init__()
        self.casts = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func in (torch.ops.aten._to_copy.default, torch.ops.aten.to.dtype):
            self.casts += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("name", ON_CPU)
def test_no_cast_runs_inside_the_timed_loop_under_autocast(name: str, precision: str) -> None:
    problem = get_problem(name, "debug")
    problem.set_precision(Precision.parse(precision))
    model = problem.build_model()
    batch = _batch(problem, batch_size=3)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    with torch.inference_mode(), torch.autocast("cpu", dtype=dtype):
        problem.loss(model, batch)  # the first step may cast the weights, once
        with _CountCasts() as counter:
            problem.loss(model, batch)
    assert counter.casts == 0
