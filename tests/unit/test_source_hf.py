"""hf: models built offline from their config classes: counts equal the library's, FLOPs equal the
counter's, overrides are typed, presets are the published shapes, folders round-trip, and every
mistake is one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from flowrate.errors import ConfigError, FlowrateError
from flowrate.measure.flops import count_step
from flowrate.problems.base import Problem
from flowrate.problems.registry import get_problem, is_user_problem, sample_shape_field, source_of
from flowrate.problems.sources.base import MissingExtra
from flowrate.problems.sources.hf_text import IGNORE

pytest.importorskip("transformers")

CPU = torch.device("cpu")
FAMILIES = ["llama", "qwen2", "mistral", "gpt2", "bert", "roberta", "t5", "vit"]
TASKS = {
    "llama": "CausalLM",
    "qwen2": "CausalLM",
    "mistral": "CausalLM",
    "gpt2": "CausalLM",
    "bert": "MaskedLM",
    "roberta": "MaskedLM",
    "t5": "Seq2SeqLM",
    "vit": "ImageClassificationProblem",
}


def _batch(problem: Problem, size: int = 2) -> tuple[torch.Tensor, ...]:
    return problem.make_batch(size, CPU, torch.Generator().manual_seed(0))


def _forward_flops(problem: Problem, model: torch.nn.Module) -> float:
    """What flowrate's counter counts for one forward, per sample."""

    def forward(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        with torch.no_grad():
            return problem.loss(model, batch)

    return count_step(forward, _batch(problem)).total_flops / 2


@pytest.mark.parametrize("arch", FAMILIES)
def test_each_family_builds_tiny_with_the_librarys_own_parameter_count(arch: str) -> None:
    problem = get_problem(f"hf:{arch}")
    assert type(problem).__name__ == TASKS[arch] and problem.size == "debug"
    torch.manual_seed(0)
    model = problem.build_model()
    assert problem.parameter_count() == sum(p.numel() for p in model.parameters()) < 300_000
    loss = problem.loss(model, _batch(problem))
    assert loss.dim() == 0 and torch.isfinite(loss)
    blocks = problem.blocks(model)  # every parameter in some block, each layer its own
    covered = {id(p) for block in blocks for p in block.parameters()}
    assert covered == {id(p) for p in model.parameters()} and len(blocks) >= 4


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral", "bert", "roberta"])
def test_model_flops_equal_the_counted_forward_exactly(arch: str) -> None:
    # causal decoders: the counter counts what SDPA's causal kernel computes, (T + 1)/2 keys per query
    problem = get_problem(f"hf:{arch}")
    assert _forward_flops(problem, problem.build_model()) == problem.forward_flops_per_sample()


@pytest.mark.parametrize("arch", ["gpt2", "t5"])
def test_where_the_mask_is_a_tensor_the_counter_counts_the_masked_half_too(arch: str) -> None:
    # GPT-2 and T5's decoder hand SDPA their causal mask as a tensor, so the counter counts the
    # whole T x T square; the formula counts the (T + 1)/2 keys a query sees. The gap is exactly
    # the masked part: per decoder layer 4·d·(T − (T + 1)/2) per token.
    problem = get_problem(f"hf:{arch}")
    layers = int(getattr(problem.config, "num_decoder_layers", None) or problem.config.num_hidden_layers)
    t, d = problem.seq_len, 64
    masked = layers * t * 4 * d * (t - (t + 1) / 2)
    assert _forward_flops(problem, problem.build_model()) == problem.forward_flops_per_sample() + masked


def test_a_sliding_window_counts_the_band_a_query_sees() -> None:
    full = get_problem("hf:mistral", options={"seq_len": 32})
    windowed = get_problem("hf:mistral", options={"seq_len": 32, "sliding_window": "8"})
    layers, d = 2, 64
    band = (8 * 9 / 2 + 24 * 8) / 32  # query i sees min(i + 1, 8) keys
    difference = 32 * layers * 4 * d * ((32 + 1) / 2 - band)
    assert full.forward_flops_per_sample() - windowed.forward_flops_per_sample() == round(difference)


@pytest.mark.parametrize(
    ("preset", "parameters"),
    [  # the published totals (model cards / the library's own count of the released weights)
        ("llama-3.2-1b", 1_235_814_400),
        ("llama-3.1-8b", 8_030_261_248),
        ("qwen2.5-0.5b", 494_032_768),
        ("mistral-7b", 7_241_732_096),
        ("gpt2", 124_439_808),
        ("vit-base-patch16-224", 86_567_656),
    ],
)
def test_presets_have_the_published_parameter_counts_counted_without_allocating(
    preset: str, parameters: int
) -> None:
    from flowrate.problems.sources.hf_presets import PRESETS

    problem = get_problem(f"hf:{PRESETS[preset].model_type}", preset)
    assert problem.size == preset and problem.parameter_count() == parameters


def test_a_preset_can_be_named_as_the_problem() -> None:
    assert get_problem("hf:llama-3.2-1b").size == "llama-3.2-1b"


def test_overrides_are_typed_by_the_config_class() -> None:
    problem = get_problem(
        "hf:llama",
        options={
            "num_hidden_layers": 3,
            "rms_norm_eps": "1e-6",
            "tie_word_embeddings": "true",
            "seq_len": 16,
        },
    )
    c = problem.config
    assert (c.num_hidden_layers, c.rms_norm_eps, c.tie_word_embeddings) == (3, 1e-6, True)
    assert problem.size == "debug+custom" and problem.seq_len == 16
    model = problem.build_model()
    assert len(problem.blocks(model)) == 6 and list(problem.tied_parameters(model)) == [5]


@pytest.mark.parametrize(
    ("options", "preset", "says"),
    [
        ({"num_layers": "3"}, None, "llama's config has no 'num_layers' (did you mean 'num_hidden_layers'?)"),
        ({"rms_norm_eps": "small"}, None, "--hf-config rms_norm_eps=small: must be float"),
        ({"task": "translation"}, None, "unknown task 'translation'"),
        (
            {"task": "masked-lm"},
            None,
            "llama has no masked-lm model; its tasks: causal-lm, sequence-classification",
        ),
        ({}, "llama-9b", "unknown preset 'llama-9b'"),
        ({}, "bert-base-uncased", "bert-base-uncased is a bert: use hf:bert"),
    ],
)
def test_mistakes_are_one_line(options: dict[str, int | str], preset: str | None, says: str) -> None:
    with pytest.raises(ConfigError) as error:
        get_problem("hf:llama", preset, options)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_an_unknown_architecture_suggests_close_ones() -> None:
    with pytest.raises(ConfigError, match="did you mean 'llama'"):
        get_problem("hf:lama")


def test_a_missing_transformers_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails
    with pytest.raises(MissingExtra) as error:
        get_problem("hf:llama")
    assert str(error.value) == "hf:llama needs the `hf` extra: pip install -e '.[hf]'"
    assert error.value.exit_code == 2


def test_prefixes_are_not_user_files() -> None:
    assert source_of("hf:llama") == "hf" and not is_user_problem("hf:llama")
    assert is_user_problem("model.py:factory") and source_of("model.py:factory") is None
    assert sample_shape_field("hf:bert") == "seq_len" and sample_shape_field("hf:vit") == "image_size"


def test_a_save_pretrained_folder_round_trips_config_and_weights(tmp_path: Path) -> None:
    original = get_problem("hf:llama", options={"num_hidden_layers": 1})
    torch.manual_seed(3)
    model = original.build_model()
    model.save_pretrained(tmp_path / "saved")
    loaded = get_problem(f"hf:{tmp_path / 'saved'}", options={"seq_len": 32})
    assert loaded.size == "folder" and loaded.config.num_hidden_layers == 1
    again = loaded.build_model()
    for (name, ours), (_, theirs) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name
    assert loaded.forward_flops_per_sample() == original.forward_flops_per_sample()


def test_a_folder_without_config_json_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no config\.json: give a folder written by save_pretrained"):
        get_problem(f"hf:{tmp_path}")


def test_masked_lm_batches_predict_in_range_tokens() -> None:
    problem = get_problem("hf:bert")
    ids, mask, labels = _batch(problem, 8)
    assert ids.shape == (8, 32) and bool((mask == 1).all())
    assert int(ids.min()) >= 0 and int(ids.max()) < 512
    predicted = labels != IGNORE
    assert bool(predicted.any(dim=1).all()) and int(labels[predicted].max()) < 512


def test_causal_batches_round_trip_through_stored_samples() -> None:
    problem = get_problem("hf:llama")
    batch = _batch(problem, 3)
    samples = problem.samples_from_batch(batch)
    assert samples["tokens"].shape == (3, 33)
    again = problem.batch_from_samples(samples, torch.Generator())
    assert all(torch.equal(a, b) for a, b in zip(batch, again, strict=True))


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_sequence_classification_by_task_override(arch: str) -> None:
    problem = get_problem(f"hf:{arch}", options={"task": "sequence-classification", "num_labels": 3})
    ids, _, labels = problem.learnable_batch(6, CPU, torch.Generator().manual_seed(0))
    assert labels.shape == (6,) and torch.equal(labels, ids[:, 0] % 3)
    model = problem.build_model()
    assert torch.isfinite(problem.loss(model, (ids, torch.ones_like(ids), labels)))
    assert _forward_flops(problem, model) == problem.forward_flops_per_sample()


def test_every_task_has_a_learnable_batch_shaped_like_its_batch() -> None:
    for arch in ("llama", "bert", "t5", "vit"):
        problem = get_problem(f"hf:{arch}")
        made, learnable = (
            _batch(problem, 4),
            problem.learnable_batch(4, CPU, torch.Generator().manual_seed(0)),
        )
        assert [t.shape for t in made] == [t.shape for t in learnable], arch


def test_a_broken_dependency_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowrate.problems.sources import hf

    def broken(name: str, *args: object, **kwargs: object) -> object:
        if name == "transformers":
            raise RuntimeError("operator torchvision::nms does not exist")
        return real_import(name, *args, **kwargs)

    real_import = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
    monkeypatch.setattr("builtins.__import__", broken)
    with pytest.raises(
        FlowrateError, match="transformers is installed but does not load: operator torchvision::nms"
    ):
        hf.library("hf:llama")


def test_a_sweep_keeps_a_library_prefix_and_absolutises_only_user_files() -> None:
    from flowrate.campaigns.sweep.spec import parse_value

    assert parse_value("problem", "hf:llama") == ["hf:llama"]
    assert parse_value("problem", "model.py:make")[0] == f"{Path('model.py').resolve()}:make"
