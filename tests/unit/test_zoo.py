"""The problem zoo: analytic counts against built models and FlopCounterMode, batches, blocks."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from flowrate.errors import ConfigError
from flowrate.problems import kernels
from flowrate.problems.base import Batch, Problem
from flowrate.problems.encoder import MaskedLM
from flowrate.problems.registry import FAMILIES, get_problem

CPU = torch.device("cpu")
META = torch.device("meta")
# Model families: kernels are forward-only, label-free and blockless (tests/unit/test_kernels.py).
MODELS = [name for name in FAMILIES if name not in {family.name for family in kernels.FAMILIES}]
ALL_SIZES = [(FAMILIES[name].name, size) for name in MODELS for size in FAMILIES[name].sizes]
# Analytic FLOPs against FlopCounterMode: both count only matmuls, convolutions and attention at
# 2 FLOPs per multiply-add, so they agree exactly (measured: 0 difference); 1% is the margin.
FLOP_MARGIN = 0.01
# One real (non-debug) size per family for the meta-device FLOP check.
REAL_SIZES = {
    "fc_mnist": "default",
    "transformer": "gpt2",
    "bert-base": "default",
    "roberta-large": "default",
    "resnet50": "default",
}


def _debug(family: str) -> Problem:
    return get_problem(family, "debug")


def _batch(problem: Problem, seed: int, batch_size: int | None = None) -> Batch:
    generator = torch.Generator(CPU).manual_seed(seed)
    return problem.make_batch(batch_size or problem.default_batch_size, CPU, generator)


def _classes(problem: Problem) -> int:
    settings = problem.describe()
    return int(settings.get("vocab_size", settings.get("classes", 0)))


def _meta_batch(problem: Problem, batch_size: int) -> Batch:
    """A batch of the right shapes and dtypes on the meta device (no generator there)."""
    settings = problem.describe()
    labels = torch.zeros(batch_size, dtype=torch.long, device=META)
    if "seq_len" in settings:
        ids = torch.zeros((batch_size, settings["seq_len"]), dtype=torch.long, device=META)
        return ids, ids.clone()
    if "image_size" in settings:
        side = settings["image_size"]
        return torch.empty((batch_size, 3, side, side), device=META), labels
    return torch.empty((batch_size, settings["inputs"]), device=META), labels


def _count_flops(problem: Problem, model: nn.Module, batch: Batch, train: bool) -> int:
    # On the CPU, SDPA's fused kernel is invisible to FlopCounterMode (it counts 0); the math
    # backend runs the same attention as two counted batched matmuls over the full T x T.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        if train:
            problem.loss(model, batch).backward()
        else:
            with torch.no_grad():
                problem.loss(model, batch)
    return counter.get_total_flops()


@pytest.mark.parametrize("family", MODELS)
def test_debug_model_has_the_analytic_parameter_count(family: str) -> None:
    problem = _debug(family)
    model = problem.build_model()
    assert sum(p.numel() for p in model.parameters()) == problem.parameter_count()


@pytest.mark.parametrize("family", MODELS)
def test_batch_is_on_the_device_with_labels_in_range(family: str) -> None:
    problem = _debug(family)
    batch = _batch(problem, seed=0, batch_size=16)
    classes = _classes(problem)
    assert all(t.device == CPU and t.shape[0] == 16 for t in batch)
    labels = batch[-1]
    assert labels.dtype == torch.long
    predicted = labels[labels != -100]  # masked-LM labels ignore unmasked positions
    assert predicted.numel() > 0
    assert int(predicted.min()) >= 0 and int(predicted.max()) < classes
    if problem.tokens_per_sample is not None:
        ids = batch[0]
        assert ids.dtype == torch.long and ids.shape[1] == problem.tokens_per_sample
        assert int(ids.min()) >= 0 and int(ids.max()) < classes
        # Spread over the vocabulary: 512 tokens drawn from a 512-id vocabulary cover most of
        # its range and at least a quarter of its ids (half the draws are uniform).
        assert int(ids.max()) - int(ids.min()) > classes // 2
        assert ids.unique().numel() > classes // 4
    else:
        images = batch[0]
        assert images.is_floating_point()
        assert abs(float(images.mean())) < 0.3 and 0.5 < float(images.std()) < 1.5


@pytest.mark.parametrize("family", ["bert-base", "roberta-large"])
def test_masked_lm_batch_masks_about_15_percent_and_every_sample(family: str) -> None:
    problem = _debug(family)
    ids, labels = _batch(problem, seed=0, batch_size=64)
    masked = labels != -100
    assert bool(masked.any(dim=1).all())
    assert 0.10 < float(masked.float().mean()) < 0.22
    assert bool((labels[~masked] == -100).all())
    assert isinstance(problem, MaskedLM)
    mask_token_id = problem.config.mask_token_id
    assert bool((ids[~masked] != mask_token_id).any())
    assert float((ids[masked] == mask_token_id).float().mean()) > 0.6


def test_transformer_targets_are_the_inputs_shifted_by_one() -> None:
    ids, targets = _batch(_debug("transformer"), seed=0)
    assert torch.equal(ids[:, 1:], targets[:, :-1])


@pytest.mark.parametrize("family", MODELS)
def test_initial_loss_is_finite_and_near_ln_classes(family: str) -> None:
    problem = _debug(family)
    torch.manual_seed(0)
    with torch.no_grad():
        loss = problem.loss(problem.build_model(), _batch(problem, seed=0))
    assert torch.isfinite(loss)
    expected = math.log(_classes(problem))
    assert 0.7 * expected < float(loss) < 1.5 * expected


@pytest.mark.parametrize("family", MODELS)
def test_batches_depend_only_on_the_seed(family: str) -> None:
    problem = _debug(family)
    first, again, other = (_batch(problem, seed) for seed in (1, 1, 2))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize("family", MODELS)
def test_blocks_hold_every_parameter_once_in_forward_order(family: str) -> None:
    problem = _debug(family)
    model = problem.build_model()
    blocks = problem.blocks(model)
    owned = [id(p) for block in blocks for p in block.parameters()]
    assert len(owned) == len(set(owned))
    assert set(owned) == {id(p) for p in model.parameters()}
    calls: list[int] = []
    for index, block in enumerate(blocks):
        block.register_forward_pre_hook(lambda _m, _a, index=index: calls.append(index))
    problem.loss(model, _batch(problem, seed=0))
    assert calls == list(range(len(blocks)))


@pytest.mark.parametrize("family", MODELS)
@pytest.mark.parametrize("train", [False, True], ids=["infer", "train"])
def test_analytic_flops_match_flop_counter(family: str, train: bool) -> None:
    problem = _debug(family)
    batch = _batch(problem, seed=0)
    counted = _count_flops(problem, problem.build_model(), batch, train)
    per_sample = problem.train_flops_per_sample() if train else problem.forward_flops_per_sample()
    analytic = per_sample * batch[0].shape[0]
    assert abs(counted - analytic) <= FLOP_MARGIN * analytic, (counted, analytic)


@pytest.mark.parametrize("family", MODELS)
@pytest.mark.parametrize("train", [False, True], ids=["infer", "train"])
def test_analytic_flops_of_a_real_size_on_meta(family: str, train: bool) -> None:
    problem = get_problem(family, REAL_SIZES[family])
    with torch.device("meta"):
        model = problem.build_model()
    counted = _count_flops(problem, model, _meta_batch(problem, batch_size=2), train)
    per_sample = problem.train_flops_per_sample() if train else problem.forward_flops_per_sample()
    assert abs(counted - 2 * per_sample) <= FLOP_MARGIN * 2 * per_sample, (counted, per_sample)


@pytest.mark.parametrize(("family", "size"), ALL_SIZES)
def test_parameter_count_of_every_size_matches_a_meta_model(family: str, size: str) -> None:
    problem = get_problem(family, size)
    with torch.device("meta"):
        model = problem.build_model()
    assert sum(p.numel() for p in model.parameters()) == problem.parameter_count()


@pytest.mark.parametrize(
    ("name", "size", "count"),
    [
        ("transformer", "gpt2", 124_439_808),  # HF GPT2LMHeadModel (tied head)
        ("transformer", "gpt2-medium", 354_823_168),
        ("transformer", "gpt2-large", 774_030_080),
        ("transformer", "gpt2-xl", 1_557_611_200),
        ("bert-base", "default", 109_514_298),  # HF BertForMaskedLM (bert-base-uncased)
        ("roberta-large", "default", 355_412_057),  # HF RobertaForMaskedLM
        ("resnet50", "default", 25_557_032),  # torchvision resnet50
        ("fc_mnist", "default", 669_706),
    ],
)
def test_well_known_parameter_counts(name: str, size: str, count: int) -> None:
    assert get_problem(name, size).parameter_count() == count


def test_bert_checkpoint_count_adds_the_pooler_and_next_sentence_head() -> None:
    # The bert-base-uncased checkpoint (BertForPreTraining, 110,106,428) also holds the pooler
    # (h² + h) and the next-sentence classifier (2h + 2), which masked-LM training does not use.
    h = 768
    pooler, next_sentence = h * h + h, 2 * h + 2
    assert get_problem("bert-base").parameter_count() + pooler + next_sentence == 110_106_428


@pytest.mark.parametrize("family", MODELS)
def test_debug_models_run_under_autocast_and_in_pure_bf16(family: str) -> None:
    problem = _debug(family)
    model = problem.build_model()
    batch = _batch(problem, seed=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = problem.loss(model, batch)
    model.to(torch.bfloat16)
    pure = problem.loss(model, batch)
    pure.backward()
    assert torch.isfinite(mixed) and torch.isfinite(pure)
    assert all(p.grad is not None and p.grad.dtype == torch.bfloat16 for p in model.parameters())


def test_size_alias_names_a_family_size() -> None:
    problem = get_problem("gpt2")
    assert (problem.name, problem.size) == ("transformer", "gpt2")
    assert problem.describe() == {
        "layers": 12,
        "heads": 12,
        "hidden": 768,
        "seq_len": 1024,
        "vocab_size": 50257,
    }
    assert problem.tokens_per_sample == 1024


def test_options_change_the_shape() -> None:
    problem = get_problem("transformer", options={"layers": 3})
    assert problem.describe()["layers"] == 3
    with torch.device("meta"):
        blocks = problem.blocks(problem.build_model())
    assert len(blocks) == 3 + 2  # embeddings, 3 layers, head
    assert get_problem("resnet50", options={"image_size": 128}).describe()["image_size"] == 128


def test_misspelt_problem_suggests_the_right_name() -> None:
    with pytest.raises(ConfigError, match="did you mean 'transformer'"):
        get_problem("tranformer")


def test_option_that_does_not_apply_is_refused() -> None:
    with pytest.raises(ConfigError, match="does not apply to resnet50"):
        get_problem("resnet50", options={"seq_len": 128})


def test_heads_must_divide_hidden() -> None:
    with pytest.raises(ConfigError, match="heads"):
        get_problem("transformer", options={"heads": 5})


def test_encoder_seq_len_must_fit_the_position_table() -> None:
    assert get_problem("roberta-large", options={"seq_len": 512}).describe()["seq_len"] == 512
    with pytest.raises(ConfigError, match="at most 512 tokens"):
        get_problem("roberta-large", options={"seq_len": 513})
    with pytest.raises(ConfigError, match="seq_len"):
        get_problem("bert-base", options={"seq_len": 1024})


def test_a_model_without_blocks_is_told_how_to_declare_them() -> None:
    from flowrate.errors import FlowrateError
    from flowrate.problems.base import Problem

    class Plain(Problem):
        def build_model(self) -> torch.nn.Module:
            return torch.nn.Linear(2, 2)

        def make_batch(self, batch_size, device, generator):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def loss(self, model, batch):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def parameter_count(self) -> int:
            return 6

        def forward_flops_per_sample(self) -> int:
            return 8

    with pytest.raises(FlowrateError, match=r"self.blocks = nn.ModuleList"):
        Plain().blocks(Plain().build_model())
