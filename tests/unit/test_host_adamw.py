"""The one-pass host update equals torch.optim's AdamW and SGD, bit for bit.

The reference is the optimizer flowrate trains resident models with (resident.make_optimizer:
PyTorch's fused CPU kernels) given ``grad_in.float() * grad_scale``; against the unfused foreach
implementation the update agrees to a few ulps (it orders the same arithmetic differently).
CHUNK is made small so that a few thousand elements span several chunks and a partial last one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import torch

from flowrate.config import OptimizerName
from flowrate.execution import host_adamw
from flowrate.execution.host_adamw import adamw_step_, sgd_step_
from flowrate.execution.resident import make_optimizer

N = 2500  # 2 full chunks of 1000 and a partial one
STEPS = 6


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_adamw, "CHUNK", 1000)
    monkeypatch.setattr(host_adamw._local, "scratch", None, raising=False)


def gradients(dtype: torch.dtype, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [(torch.randn(N, generator=generator) * 10.0 ** -(k % 3)).to(dtype) for k in range(STEPS)]


def reference(
    make: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer], grads: list[torch.Tensor], scale: float
) -> tuple[torch.nn.Parameter, torch.optim.Optimizer]:
    """The weights and optimizer after one torch.optim step per gradient (``grad.float() * scale``)."""
    param = torch.nn.Parameter(torch.randn(N, generator=torch.Generator().manual_seed(1)))
    opt = make([param])
    for grad in grads:
        param.grad = grad.float() * scale
        opt.step()
    return param, opt


def flowrates(name: OptimizerName, lr: float) -> Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]:
    return lambda params: make_optimizer(name, params, lr, torch.device("cpu"))


def one_pass_adamw(
    grads: list[torch.Tensor], scale: float, send_dtype: torch.dtype | None, **hyper: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    master = torch.randn(N, generator=torch.Generator().manual_seed(1))
    m, v = torch.zeros(N), torch.zeros(N)
    send = None if send_dtype is None else torch.empty(N, dtype=send_dtype)
    for step, grad in enumerate(grads, start=1):
        adamw_step_(master, grad, m, v, send, step=step, grad_scale=scale, **hyper)  # type: ignore[arg-type]
    return master, m, v, send


FLOWRATE_ADAMW = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("scale", [1.0, 0.37])
def test_adamw_equals_flowrates_resident_optimizer_bit_for_bit(dtype: torch.dtype, scale: float) -> None:
    grads = gradients(dtype)
    param, opt = reference(flowrates(OptimizerName.ADAMW, FLOWRATE_ADAMW["lr"]), grads, scale)
    master, m, v, send = one_pass_adamw(grads, scale, torch.bfloat16, **FLOWRATE_ADAMW)
    state = opt.state[param]
    assert torch.equal(master, param.detach())
    assert torch.equal(m, state["exp_avg"]) and torch.equal(v, state["exp_avg_sq"])
    assert int(state["step"]) == STEPS
    assert send is not None and torch.equal(send, master.to(torch.bfloat16))


def test_adamw_with_other_hyper_parameters_equals_torch_and_the_unfused_one_within_ulps() -> None:
    hyper = {"lr": 3e-3, "beta1": 0.8, "beta2": 0.95, "eps": 1e-6, "weight_decay": 0.1}
    grads = gradients(torch.bfloat16, seed=5)
    torch_hyper = {"lr": 3e-3, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}
    fused, _ = reference(lambda p: torch.optim.AdamW(p, fused=True, **torch_hyper), grads, 1.0)  # type: ignore[arg-type]
    loop, _ = reference(lambda p: torch.optim.AdamW(p, foreach=True, **torch_hyper), grads, 1.0)  # type: ignore[arg-type]
    master, _, _, send = one_pass_adamw(grads, 1.0, None, **hyper)
    assert send is None
    assert torch.equal(master, fused.detach())
    # the foreach implementation orders the arithmetic differently: a few ulps of each weight, or a
    # millionth of a step (lr) for weights near zero
    torch.testing.assert_close(master, loop.detach(), rtol=4e-7, atol=1e-6 * hyper["lr"])


def test_the_real_chunk_size_over_the_real_pool_equals_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_adamw, "CHUNK", 1 << 18)
    n = 3 * host_adamw.CHUNK + 17  # ranges of 2 chunks and of 1 chunk + 17 on 2 threads
    generator = torch.Generator().manual_seed(7)
    param = torch.nn.Parameter(torch.randn(n, generator=generator))
    master, m, v = param.detach().clone(), torch.zeros(n), torch.zeros(n)
    opt = make_optimizer(OptimizerName.ADAMW, [param], 1e-3, torch.device("cpu"))
    send = torch.empty(n, dtype=torch.bfloat16)
    for step in (1, 2):
        grad = torch.randn(n, generator=generator).bfloat16()
        param.grad = grad.float()
        opt.step()
        adamw_step_(master, grad, m, v, send, step=step, **{**FLOWRATE_ADAMW, "lr": 1e-3})
    assert torch.equal(master, param.detach()) and torch.equal(send, master.bfloat16())


def test_a_fp32_gradient_is_read_in_place_and_left_unchanged() -> None:
    grad = gradients(torch.float32)[0]
    kept = grad.clone()
    master, m, v = torch.ones(N), torch.zeros(N), torch.zeros(N)
    adamw_step_(master, grad, m, v, None, step=1, **FLOWRATE_ADAMW)
    assert torch.equal(grad, kept)
    assert not torch.equal(master, torch.ones(N))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_sgd_with_momentum_equals_torch_sgd_bit_for_bit(dtype: torch.dtype, weight_decay: float) -> None:
    grads = gradients(dtype, seed=3)
    if weight_decay == 0.0:  # flowrate's own SGD: momentum 0.9
        param, opt = reference(flowrates(OptimizerName.SGD, 1e-2), grads, 0.5)
    else:
        param, opt = reference(
            lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, weight_decay=weight_decay, fused=True),
            grads,
            0.5,
        )
    master = torch.randn(N, generator=torch.Generator().manual_seed(1))
    buf, send = torch.zeros(N), torch.empty(N, dtype=torch.bfloat16)
    for grad in grads:
        sgd_step_(master, grad, buf, send, lr=1e-2, momentum=0.9, weight_decay=weight_decay, grad_scale=0.5)
    assert torch.equal(master, param.detach())
    assert torch.equal(buf, opt.state[param]["momentum_buffer"])
    assert torch.equal(send, master.to(torch.bfloat16))


def test_sgd_without_momentum_takes_no_buffer() -> None:
    grads = gradients(torch.float32, seed=4)
    param, _ = reference(lambda p: torch.optim.SGD(p, lr=0.1, fused=True), grads, 1.0)
    master = torch.randn(N, generator=torch.Generator().manual_seed(1))
    for grad in grads:
        sgd_step_(master, grad, None, None, lr=0.1, momentum=0.0, weight_decay=0.0)
    assert torch.equal(master, param.detach())
    with pytest.raises(ValueError, match="momentum buffer exactly when momentum is not 0"):
        sgd_step_(master, grads[0], None, None, lr=0.1, momentum=0.9, weight_decay=0.0)


def test_after_the_first_call_nothing_is_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    master, m, v = torch.zeros(N), torch.zeros(N), torch.zeros(N)
    grad = torch.ones(N, dtype=torch.bfloat16)
    adamw_step_(master, grad, m, v, None, step=1, **FLOWRATE_ADAMW)
    allocations = []
    empty = torch.empty

    def counted(*args: object, **kwargs: object) -> torch.Tensor:
        allocations.append(args)
        return empty(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "empty", counted)
    for step in (2, 3):
        adamw_step_(master, grad, m, v, None, step=step, **FLOWRATE_ADAMW)
    assert allocations == []


def test_the_update_runs_on_its_own_threads_and_changes_no_other_threads_count() -> None:
    before = torch.get_num_threads()
    host_adamw.set_update_threads(3)
    try:
        assert host_adamw.update_threads() == 3
        seen: list[int] = []
        master, m, v = torch.zeros(N), torch.zeros(N), torch.zeros(N)
        grad = torch.ones(N)

        def watched(i: int, j: int) -> None:
            seen.append(torch.get_num_threads())

        host_adamw.in_ranges(N, watched)
        assert seen == [1, 1, 1]  # one range per worker (1000, 1000, 500), one intra-op thread each
        adamw_step_(master, grad, m, v, None, step=1, **FLOWRATE_ADAMW)
        later: list[int] = []
        thread = threading.Thread(target=lambda: later.append(torch.get_num_threads()))
        thread.start()
        thread.join()
        assert torch.get_num_threads() == before and later == [before]
    finally:
        host_adamw.set_update_threads(before)


def test_buffers_of_the_wrong_layout_are_refused_in_one_line() -> None:
    master, m, v = torch.zeros(N), torch.zeros(N), torch.zeros(N)
    with pytest.raises(ValueError, match="flat and contiguous with 2500 elements"):
        adamw_step_(master, torch.zeros(N - 1), m, v, None, step=1, **FLOWRATE_ADAMW)
    with pytest.raises(ValueError, match="must be fp32"):
        adamw_step_(master, torch.zeros(N), m.bfloat16(), v, None, step=1, **FLOWRATE_ADAMW)
    with pytest.raises(ValueError, match="counts updates from 1"):
        adamw_step_(master, torch.zeros(N), m, v, None, step=0, **FLOWRATE_ADAMW)
