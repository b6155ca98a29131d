"""int8-weights, int8-dynamic and fp8: torchao's formats, their refusals, and their fidelity check."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from flowrate.config import Mode, Precision, RunConfig
from flowrate.errors import ConfigError
from flowrate.execution.precision import check_supported
from flowrate.execution.quantize import apply_format
from flowrate.harness.fidelity import run_check
from flowrate.problems.registry import get_problem

pytest.importorskip("torchao")
from torchao.quantization.utils import compute_error  # torchao's SQNR, in dB

# torchao's own bars (0.18.0), SQNR in dB of the quantized output against the high-precision one:
# int8 per-row weights, 40 (torchao/testing/utils.py, TorchAOBasicTestCase.LINEAR_MIN_SQNR); int8
# dynamic activations and weights on a two-linear toy model on the CPU, 20 (pytorch/ao's
# test_int8_tensor.py, TestInt8TensorCPU.test_int8_tensor_cpu).
MIN_SQNR = {Precision.INT8_WEIGHTS: 40.0, Precision.INT8_DYNAMIC: 20.0}


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32))


@pytest.mark.parametrize("precision", [Precision.INT8_WEIGHTS, Precision.INT8_DYNAMIC])
def test_int8_inference_matches_fp32_within_torchaos_tolerance(precision: Precision) -> None:
    model = tiny_model().eval()
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        reference = model(x)
        quantized = apply_format(copy.deepcopy(model), precision)
        out = quantized(x)
    assert type(quantized[0].weight).__name__ == "Int8Tensor"  # really quantized, not a no-op
    assert not torch.equal(out, reference)
    assert compute_error(reference, out).item() > MIN_SQNR[precision]


def test_a_format_that_rewrites_nothing_leaves_the_model_alone() -> None:
    model = tiny_model()
    assert apply_format(model, Precision.BF16) is model
    assert type(model[0].weight) is nn.Parameter


def test_a_model_without_linear_layers_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"nn\.Linear"):
        apply_format(nn.Sequential(nn.ReLU()), Precision.INT8_WEIGHTS)


@pytest.mark.parametrize("precision", ["int8-weights", "int8-dynamic"])
def test_int8_cannot_train_and_defaults_to_inference(precision: str) -> None:
    with pytest.raises(ConfigError, match="cannot train; use --mode infer"):
        RunConfig(precision=precision, mode="train")
    settled = RunConfig(precision=precision).for_problem((Mode.TRAIN, Mode.INFER), Mode.TRAIN, "fc_mnist")
    assert settled.mode is Mode.INFER


def test_quantized_formats_run_resident_only() -> None:
    with pytest.raises(ConfigError, match="resident only"):
        RunConfig(precision="int8-weights", mode="infer", execution="streaming")


def test_fp8_is_refused_off_cuda_naming_what_it_needs() -> None:
    with pytest.raises(ConfigError, match=r"compute capability 8\.9 or newer.*this run is on cpu"):
        check_supported(Precision.FP8, torch.device("cpu"))


def test_cli_refusals_are_one_line(run_cli) -> None:  # type: ignore[no-untyped-def]
    for args, says in [
        (("--precision", "int8-weights", "--mode", "train"), "cannot train"),
        (
            (
                "--precision",
                "fp8",
            ),
            "compute capability 8.9",
        ),
        (("-p", "gemm", "--precision", "int8-dynamic"), "a kernel has none"),
    ]:
        outcome = run_cli("run", "-p", "fc_mnist", "--size", "debug", "--no-store", *args)
        assert outcome.code == 2, outcome
        errors = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and says in errors[0], outcome.stderr
        assert "Traceback" not in outcome.stderr


def test_int8_weights_run_end_to_end(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "run",
        "-p",
        "fc_mnist",
        "--size",
        "debug",
        "--precision",
        "int8-weights",
        "--preheat",
        "1",
        "--steps",
        "3",
        "--no-store",
        "--json",
    )
    assert outcome.code == 0, outcome.stderr
    assert '"precision": "int8-weights"' in outcome.stdout and '"mode": "infer"' in outcome.stdout


def test_int8_fidelity_check_compares_the_trained_model_in_both_formats() -> None:
    config = RunConfig(
        problem="fc_mnist",
        size="debug",
        precision="int8-weights",
        steps=60,
        preheat_steps=0,
        learning_rate=1e-3,
    )
    result = run_check(config, get_problem("fc_mnist", "debug", {}))
    f = result.fidelity
    assert f is not None and result.config.precision == "int8-weights" and result.config.mode == "infer"
    assert f.fell and f.trained_in == "fp32" and f.eval_steps == 20 == len(result.losses)
    assert f.final_loss == pytest.approx(sum(result.losses) / len(result.losses))
    assert f.loss_increase == pytest.approx(f.final_loss - f.reference_loss)
    # quantizing a trained model costs it little of what training gained
    assert abs(f.loss_increase) < 0.05 * (f.initial_loss - f.reference_loss)


@pytest.mark.gpu
def test_fp8_trains_on_a_capable_gpu() -> None:
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 needs compute capability 8.9 or newer")
    import flowrate

    result = flowrate.benchmark(
        "transformer",
        size="debug",
        precision="fp8",
        device="cuda",
        steps=6,
        preheat_steps=2,
        problem_options={"d_model": 128},
    )
    assert all(torch.isfinite(torch.tensor(result.losses)))


@pytest.mark.parametrize(
    ("capability", "name", "refused"),
    [
        ((7, 0), "Tesla V100", True),
        ((7, 5), "Tesla T4", True),
        ((8, 0), "A100", False),
        ((9, 0), "H100", False),
    ],
)
def test_bf16_is_refused_below_ampere_even_where_torch_would_emulate_it(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], name: str, refused: bool
) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    for precision in (Precision.BF16, Precision.PURE_BF16):
        if refused:
            with pytest.raises(
                ConfigError, match=rf"{name} \(compute capability {capability[0]}\.\d\) has no bf16"
            ):
                check_supported(precision, torch.device("cuda", 0))
        else:
            check_supported(precision, torch.device("cuda", 0))
