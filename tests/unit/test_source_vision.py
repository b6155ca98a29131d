"""torchvision:NAME — classification, segmentation and detection models with random weights: the
library's parameter count, executed FLOPs, streamed blocks, targets in range, one-line errors.

Detection needs torchvision's compiled operators; where the installed torchvision was built for
another torch they do not load, and the tests check the one-line error instead.
"""

from __future__ import annotations

import sys

import pytest
import torch

from flowrate.config import Mode, OptimizerName, Precision, RunConfig
from flowrate.errors import ConfigError
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.resident import ResidentExecutor
from flowrate.execution.streaming import StreamingExecutor
from flowrate.harness.fidelity import run_check
from flowrate.measure.flops import count_step
from flowrate.problems.sources import vision_source
from flowrate.problems.sources.base import MissingExtra, SourceSettings

torchvision = vision_source.load_torchvision()

CPU = torch.device("cpu")
SMALL = SourceSettings(image_size=32, overrides={"num_classes": "10"})
LEARNABLE = SourceSettings(image_size=64, overrides={"num_classes": "4"})


def test_a_classifier_has_the_librarys_parameters_and_the_executed_flops() -> None:
    problem = vision_source.build_problem("resnet18", SMALL)
    reference = torchvision.models.resnet18(num_classes=10)
    assert problem.parameter_count() == sum(p.numel() for p in reference.parameters()) == 11_181_642
    model = problem.build_model().train()
    batch = problem.make_batch(2, CPU, torch.Generator().manual_seed(0))
    trained = count_step(lambda b: problem.loss(model, b).backward(), batch).total_flops
    assert problem.train_flops_per_sample() * 2 == trained
    model.eval()
    with torch.no_grad():
        assert (
            problem.forward_flops_per_sample() * 2
            == count_step(lambda b: problem.loss(model, b), batch).total_flops
        )


def test_a_classifiers_blocks_are_its_children_in_order() -> None:
    problem = vision_source.build_problem("resnet18", SMALL)
    model = problem.build_model()
    names = {id(m): n for n, m in model.named_modules()}
    layout = [names[id(b)] for b in problem.blocks(model)]
    stages = [f"layer{i}.{j}" for i in range(1, 5) for j in range(2)]
    assert layout == ["conv1", "bn1", *stages, "fc"]


@pytest.mark.slow
def test_a_streamed_torchvision_classifier_computes_the_resident_steps() -> None:
    problem = vision_source.build_problem("shufflenet_v2_x0_5", SMALL)  # no dropout: deterministic
    policy = PrecisionPolicy(Precision.FP32, CPU)
    torch.manual_seed(0)
    resident = ResidentExecutor(problem, problem.build_model(), policy, Mode.TRAIN, OptimizerName.ADAMW, 1e-3)
    torch.manual_seed(0)
    streamed = StreamingExecutor(
        problem, problem.build_model(), policy, Mode.TRAIN, OptimizerName.ADAMW, 1e-3
    )
    batch = problem.make_batch(4, CPU, torch.Generator().manual_seed(1))
    theirs = [float(resident.step(batch)) for _ in range(3)]
    ours = [float(streamed.step(batch)) for _ in range(3)]
    streamed.finish()
    assert ours == theirs and theirs[-1] < theirs[0]


@pytest.mark.slow
def test_segmentation_masks_are_regions_of_classes_in_range_and_flops_are_counted() -> None:
    settings = SourceSettings(image_size=32, overrides={"num_classes": "5"})
    # a backbone without grouped convolutions: PyTorch's counter overcounts their weight gradient
    # (see test_source_timm.py), and the executed count below is PyTorch's
    problem = vision_source.build_problem("fcn_resnet50", settings)
    images, masks = problem.make_batch(2, CPU, torch.Generator().manual_seed(0))
    assert images.shape == (2, 3, 32, 32) and masks.shape == (2, 32, 32) and masks.dtype == torch.long
    assert int(masks.min()) >= 0 and int(masks.max()) < 5
    reference = torchvision.models.get_model(
        "fcn_resnet50", weights=None, weights_backbone=None, num_classes=5
    )
    assert problem.parameter_count() == sum(p.numel() for p in reference.parameters())
    model = problem.build_model().train()
    trained = count_step(lambda b: problem.loss(model, b).backward(), (images, masks)).total_flops
    assert problem.train_flops_per_sample() * 2 == trained
    assert {id(p) for b in problem.blocks(model) for p in b.parameters()} == {
        id(p) for p in model.parameters()
    }


def test_segmentations_learnable_pixels_are_nearest_their_classs_colour() -> None:
    problem = vision_source.build_problem("lraspp_mobilenet_v3_large", LEARNABLE)
    images, masks = problem.learnable_batch(2, CPU, torch.Generator().manual_seed(0))
    shapes = [t.shape for t in problem.make_batch(2, CPU, torch.Generator().manual_seed(0))]
    assert [images.shape, masks.shape] == shapes and masks.dtype == torch.long
    colours = vision_source._colours(4, CPU)  # (4, 3)
    pixels = images.permute(0, 2, 3, 1).reshape(-1, 3)
    nearest = torch.cdist(pixels, colours).argmin(dim=1)
    assert (nearest == masks.reshape(-1)).float().mean() > 0.8  # noise 0.5 blurs a few
    assert len(masks.unique()) == 4


@pytest.mark.slow
def test_check_learns_a_torchvision_segmentation_model() -> None:
    problem = vision_source.build_problem("lraspp_mobilenet_v3_large", LEARNABLE)
    config = RunConfig(
        problem=problem.name, device="cpu", steps=30, preheat_steps=0, batch_size=4, learning_rate=3e-3
    )
    fidelity = run_check(config, problem).fidelity
    assert fidelity is not None and fidelity["task"].startswith("Coloured regions")
    assert fidelity["initial_loss"] > 1.0  # ≈ ln 4 ≈ 1.39 with random weights
    assert fidelity["final_loss"] < 0.7 and fidelity["fell"] is True


def test_detections_learnable_boxes_are_painted_in_their_labels_colour() -> None:
    # detection cannot be built without the compiled operators; its batches need no model
    problem = vision_source.DetectionProblem(
        "torchvision:fasterrcnn", lambda: None, image_size=32, classes=5, name="fasterrcnn"
    )
    images, boxes, labels = problem.learnable_batch(3, CPU, torch.Generator().manual_seed(0))
    made = problem.make_batch(3, CPU, torch.Generator().manual_seed(0))
    assert [t.shape for t in (images, boxes, labels)] == [t.shape for t in made]
    assert torch.equal(boxes, made[1]) and torch.equal(labels, made[2])
    colours = vision_source._colours(5, CPU)
    for b in range(3):  # the last box is painted over the others: its pixels are its label's colour
        x1, y1 = boxes[b, -1, :2].ceil().long().tolist()
        x2, y2 = boxes[b, -1, 2:].floor().long().tolist()
        pixels = images[b, :, y1 : y2 + 1, x1 : x2 + 1].reshape(3, -1).T  # (N, 3)
        assert len(pixels) >= 16
        nearest = torch.cdist(pixels.mean(dim=0, keepdim=True), colours).argmin()
        assert int(nearest) == int(labels[b, -1])
        assert float((pixels - colours[labels[b, -1]]).std()) == pytest.approx(0.5, abs=0.1)


@pytest.mark.skipif(not vision_source.has_ops(), reason="this torchvision's compiled operators do not load")
def test_detection_trains_on_boxes_inside_the_image() -> None:
    settings = SourceSettings(image_size=64, overrides={"num_classes": "5"})
    problem = vision_source.build_problem("fasterrcnn_mobilenet_v3_large_320_fpn", settings)
    images, boxes, labels = problem.make_batch(2, CPU, torch.Generator().manual_seed(0))
    assert boxes.shape == (2, 4, 4) and labels.shape == (2, 4)
    assert (
        bool((boxes[..., 2:] > boxes[..., :2]).all()) and float(boxes.min()) >= 0 and float(boxes.max()) <= 63
    )
    assert int(labels.min()) >= 1 and int(labels.max()) < 5
    model = problem.build_model().train()
    loss = problem.loss(model, (images, boxes, labels))
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert problem.train_flops_per_sample() > problem.forward_flops_per_sample() > 0


@pytest.mark.skipif(vision_source.has_ops(), reason="this torchvision's compiled operators load")
def test_without_compiled_operators_detection_is_one_line_and_classification_still_runs() -> None:
    with pytest.raises(
        vision_source.TorchvisionOpsMissing, match="compiled operators, which did not load"
    ) as caught:
        vision_source.build_problem("fasterrcnn_resnet50_fpn", SourceSettings())
    assert "\n" not in str(caught.value) and "torchvision==0.28.0" in str(caught.value)
    with pytest.raises(RuntimeError, match="Couldn't load custom C\\+\\+ ops"):  # torchvision's own message
        torchvision.ops.nms(torch.zeros((1, 4)), torch.zeros(1), 0.5)


def test_an_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown torchvision model 'resnet19' \(did you mean 'resnet18'"):
        vision_source.build_problem("resnet19", SourceSettings())


def test_without_torchvision_the_prefix_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchvision", None)  # `import torchvision` raises ImportError
    with pytest.raises(MissingExtra, match=r"torchvision:resnet18 needs the `vision` extra") as caught:
        vision_source.build_problem("resnet18", SourceSettings())
    assert "\n" not in str(caught.value)


def test_list_names_covers_the_three_tasks() -> None:
    names = dict(vision_source.list_names())
    assert "classification" in names["resnet50"] and "segmentation" in names["fcn_resnet50"]
    assert "detection" in names["fasterrcnn_resnet50_fpn"]
