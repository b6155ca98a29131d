"""timm:NAME — timm's own models with random weights: the library's parameter count, the FLOPs a
real step executes, blocks that stream to the resident step, and one-line errors."""

from __future__ import annotations

import sys

import pytest
import torch
from streaming_pair import train_both

from flowrate.config import Precision
from flowrate.errors import ConfigError, FlowrateError
from flowrate.measure.flops import count_step
from flowrate.problems.base import Problem
from flowrate.problems.sources import timm_source
from flowrate.problems.sources.base import MissingExtra, SourceSettings

timm = timm_source.library()

CPU = torch.device("cpu")
# A two-block ViT at 32 x 32 (4 patches of 16): every part of the architecture, tiny.
VIT = ("vit_tiny_patch16_224", SourceSettings(image_size=32, overrides={"depth": "2"}))
CONVNET = ("resnet10t", SourceSettings(image_size=64, overrides={"num_classes": "10"}))


def build(name: str, settings: SourceSettings) -> Problem:
    return timm_source.build_problem(name, settings)


# Executed minus declared training FLOPs per sample: the CPU's fused attention recomputes Q·Kᵀ in
# its backward (2·T²·D per layer: T = 5 tokens, D = 192), which model FLOPs do not count.
RECOMPUTED = {"vit_tiny_patch16_224": 2 * (2 * 5 * 5 * 192), "resnet10t": 0}


@pytest.mark.parametrize(("name", "settings"), [VIT, CONVNET])
def test_parameter_count_and_flops_are_the_librarys_and_the_executed_ones(
    name: str, settings: SourceSettings
) -> None:
    problem = build(name, settings)
    kwargs = {k: int(v) for k, v in settings.overrides.items()}
    if name.startswith("vit"):
        kwargs["img_size"] = 32
    reference = timm.create_model(name, pretrained=False, **kwargs)
    assert problem.parameter_count() == sum(p.numel() for p in reference.parameters())

    torch.manual_seed(0)
    model = problem.build_model()
    batch = problem.make_batch(2, CPU, torch.Generator().manual_seed(0))
    model.train()
    trained = count_step(lambda b: problem.loss(model, b).backward(), batch).total_flops
    model.eval()
    with torch.no_grad():
        forward = count_step(lambda b: problem.loss(model, b), batch).total_flops
    # the problem counts one sample on the meta device; a real batch of two executes twice that
    assert problem.forward_flops_per_sample() * 2 == forward > 0
    assert problem.train_flops_per_sample() * 2 + 2 * RECOMPUTED[name] == trained
    assert trained <= 1.02 * 2 * problem.train_flops_per_sample()


def test_resnet50_costs_equal_the_zoos_hand_derived_formulas() -> None:
    from flowrate.problems.resnet import ResNet50, ResNetConfig

    ours, zoo = build("resnet50", SourceSettings()), ResNet50(ResNetConfig())
    assert ours.parameter_count() == zoo.parameter_count() == 25_557_032
    assert ours.forward_flops_per_sample() == zoo.forward_flops_per_sample()


def test_a_vits_blocks_are_patches_tokens_each_transformer_block_norm_and_head() -> None:
    problem = build(*VIT)
    model = problem.build_model()
    blocks = problem.blocks(model)
    names = {id(m): n for n, m in model.named_modules()}
    assert [names[id(b)] for b in blocks] == ["patch_embed", "tokens", "blocks.0", "blocks.1", "norm", "head"]
    # the class and position tokens are the tokens block's own, and still the ViT's attributes
    assert {n for n, _ in blocks[1].named_parameters()} == {"cls_token", "pos_embed"}
    assert model.cls_token is blocks[1].cls_token
    owned = [id(p) for b in blocks for p in b.parameters()]
    assert sorted(owned) == sorted(id(p) for p in model.parameters())  # each exactly once


def test_a_convnets_blocks_are_its_stem_layers_each_residual_block_and_head() -> None:
    problem = build(*CONVNET)
    model = problem.build_model()
    names = {id(m): n for n, m in model.named_modules()}
    layout = [names[id(b)] for b in problem.blocks(model)]
    assert layout[0] == "conv1.0" and layout[-1] == "fc"  # its deep stem is a Sequential
    assert [n for n in layout if n.startswith("layer")] == ["layer1.0", "layer2.0", "layer3.0", "layer4.0"]


def _train_both(problem: Problem, precision: Precision, steps: int = 4) -> tuple[list[float], list[float]]:
    theirs, ours, _, streamed = train_both(problem, precision, steps)
    streamed.finish()
    return theirs, ours


def test_a_streamed_vit_computes_the_resident_steps_bit_for_bit_in_fp32() -> None:
    theirs, ours = _train_both(build(*VIT), Precision.FP32, steps=3)
    assert ours == theirs
    assert theirs[2] < theirs[0]  # it trained (steps 0 and 2 see the same batch)


def test_a_streamed_vit_matches_the_resident_steps_in_bf16() -> None:
    theirs, ours = _train_both(build(*VIT), Precision.BF16, steps=2)
    assert max(abs(a - b) / abs(a) for a, b in zip(theirs, ours, strict=True)) <= 1e-4


def test_images_have_the_models_statistics_and_labels_are_in_range() -> None:
    problem = build(*CONVNET)
    images, labels = problem.make_batch(64, CPU, torch.Generator().manual_seed(0))
    assert images.shape == (64, 3, 64, 64) and labels.shape == (64,)
    assert int(labels.min()) >= 0 and int(labels.max()) < 10
    assert abs(float(images.mean())) < 0.1  # normalised: zero-centred per channel
    # the stored form round-trips to the same images (to 8-bit resolution)
    restored, again = problem.batch_from_samples(
        problem.samples_from_batch((images, labels)), torch.Generator()
    )
    assert torch.equal(again, labels)
    assert float((restored - images).abs().max()) <= 0.5 / 255 / 0.224 + 1e-6


def test_an_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown timm model 'resnet5O' \(did you mean 'resnet50'"
    ) as caught:
        build("resnet5O", SourceSettings())
    assert "\n" not in str(caught.value)


def test_an_override_the_model_does_not_take_is_one_line() -> None:
    with pytest.raises(ConfigError, match="unexpected keyword argument 'no_such_knob'") as caught:
        build("resnet10t", SourceSettings(overrides={"no_such_knob": "3"}))
    assert caught.value.field == "--hf-config no_such_knob=3" and "\n" not in str(caught.value)


def test_without_timm_the_prefix_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "timm", None)  # `import timm` raises ImportError
    with pytest.raises(MissingExtra, match=r"timm:resnet50 needs the `timm` extra") as caught:
        build("resnet50", SourceSettings())
    assert isinstance(caught.value, FlowrateError) and "\n" not in str(caught.value)


def test_list_names_is_timms_list() -> None:
    names = [name for name, _ in timm_source.list_names()]
    assert names == timm.list_models() and "vit_tiny_patch16_224" in names


@pytest.mark.parametrize(
    ("settings", "field"),
    [(SourceSettings(seq_len=128), "seq_len"), (SourceSettings(preset="large"), "size")],
)
def test_a_sequence_length_or_a_preset_is_refused_in_one_line(settings: SourceSettings, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build("resnet50", settings)
    assert caught.value.field == field and "\n" not in str(caught.value)


def test_a_depthwise_convolutions_backward_counts_each_group_once() -> None:
    from torch import nn

    from flowrate.problems.sources.vision_tasks import COUNTED, count_costs

    params, forward, train = count_costs(
        lambda: nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
        lambda device: (torch.zeros((COUNTED, 8, 16, 16), device=device, requires_grad=True),),
        lambda model, batch: model(batch[0]).sum(),
        lambda model, batch: model(batch[0]),
    )
    assert params == 8 * 9
    assert forward == 2 * 8 * 9 * 16 * 16  # per sample: 9 multiply-adds per output value
    assert train == 3 * forward  # forward, input gradient, weight gradient: not 2 + groups


def test_a_timm_efficientnets_training_step_is_about_three_forwards() -> None:
    problem = build("test_efficientnet", SourceSettings(image_size=32))
    assert 2.9 * problem.forward_flops_per_sample() <= problem.train_flops_per_sample()
    assert problem.train_flops_per_sample() <= 3 * problem.forward_flops_per_sample()


def test_an_override_value_the_model_cannot_run_with_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"timm:resnet10t cannot be built with this value") as caught:
        build("resnet10t", SourceSettings(overrides={"drop_rate": "abc"}))
    assert caught.value.field == "--hf-config drop_rate=abc" and "\n" not in str(caught.value)
