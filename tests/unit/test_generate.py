"""flowrate generate's pieces: latency arithmetic on a fake clock, the zoo KV cache against a full
recompute, KV-cache bytes by formula and from the tensors, FLOPs against the zoo's own count."""

from __future__ import annotations

import pytest
import torch

from flowrate.config import GenerateConfig
from flowrate.errors import ConfigError
from flowrate.harness import generate_model as gm
from flowrate.harness.generate import generate_once, run_generation
from flowrate.harness.generate_timing import RequestTiming, WallClock
from flowrate.problems.registry import get_problem
from flowrate.results.schema import Result


class FakeClock:
    """Reads the next value of a list; counts the synchronizations asked for."""

    def __init__(self, values: list[float]) -> None:
        self.values = iter(values)
        self.syncs = 0

    def now(self) -> float:
        return next(self.values)

    def sync(self) -> None:
        self.syncs += 1


def test_ttft_tpot_e2e_from_fake_clock() -> None:
    fake = FakeClock([10.0, 10.5, 10.75, 11.0, 11.5])  # start, then four tokens
    clock = WallClock(fake.sync, fake.now)
    clock.start()
    for _ in range(4):
        clock.mark()
    timing = RequestTiming.from_token_times(clock.seconds())
    assert fake.syncs == 5  # the device is waited for before every reading
    assert timing.ttft_s == 0.5
    assert timing.gaps_s == [0.25, 0.25, 0.5]
    assert timing.e2e_s == 1.5
    assert timing.tpot_s == (1.5 - 0.5) / 3
    # B = 4 sequences of 8 prompt tokens: 32 prefill tokens in 0.5 s, 4 x 3 decode tokens in 1 s
    assert timing.rates(batch_size=4, prompt_len=8) == {
        "prefill_tokens_per_sec": 64.0,
        "decode_tokens_per_sec": 12.0,
    }


def test_one_token_has_no_tpot() -> None:
    timing = RequestTiming.from_token_times([0.25])
    assert (timing.ttft_s, timing.e2e_s, timing.tpot_s, timing.gaps_s) == (0.25, 0.25, None, [])
    assert timing.rates(2, 4)["decode_tokens_per_sec"] is None


def test_generate_once_marks_each_token_once() -> None:
    problem = get_problem("transformer", "debug")
    torch.manual_seed(0)
    decoder = gm.Decoder(problem, problem.build_model().eval())
    fake = FakeClock([float(i) for i in range(7)])
    with torch.inference_mode():
        tokens = generate_once(
            decoder, torch.zeros((2, 5), dtype=torch.long), 6, WallClock(fake.sync, fake.now)
        )
    assert tokens.shape == (2, 6)
    assert fake.syncs == 7  # start + 6 tokens


@pytest.mark.parametrize("prompt_len", [1, 5])
def test_zoo_cache_matches_full_recompute(prompt_len: int) -> None:
    problem = get_problem("transformer", "debug")
    torch.manual_seed(0)
    model = problem.build_model().eval()
    ids = torch.randint(0, problem.config.vocab_size, (3, prompt_len))
    with torch.no_grad():
        cache = model.new_cache(3, prompt_len + 8)
        logits = model.cached(ids, cache)[:, -1]
        cached_tokens, full_tokens, sequence = [], [], ids
        for _ in range(8):
            full = model(sequence)[:, -1]
            torch.testing.assert_close(logits, full, atol=1e-5, rtol=0)
            token = logits.argmax(-1, keepdim=True)
            cached_tokens.append(token)
            full_tokens.append(full.argmax(-1, keepdim=True))
            sequence = torch.cat([sequence, token], dim=1)
            logits = model.cached(token, cache)[:, -1]
    assert torch.equal(torch.cat(cached_tokens, 1), torch.cat(full_tokens, 1))
    assert cache.length == prompt_len + 8


def test_zoo_cache_continues_a_chunk_after_a_prefix() -> None:
    """Several new positions after cached ones (the explicit mask): the same logits as one pass."""
    problem = get_problem("transformer", "debug")
    model = problem.build_model().eval()
    ids = torch.randint(0, problem.config.vocab_size, (2, 12))
    with torch.no_grad():
        cache = model.new_cache(2, 12)
        model.cached(ids[:, :5], cache)
        torch.testing.assert_close(model.cached(ids[:, 5:], cache), model(ids)[:, 5:], atol=1e-5, rtol=0)


def test_zoo_cache_refuses_more_than_the_position_table() -> None:
    model = get_problem("transformer", "debug").build_model()
    with pytest.raises(ConfigError, match="exceed the context of 32"):
        model.new_cache(1, 33)


@pytest.mark.parametrize(
    ("spec", "dtype", "expected"),
    [
        ("transformer", torch.float32, 2 * 2 * 2 * 32 * 4),  # debug: 2 layers, 2 heads of 32
        ("transformer", torch.bfloat16, 2 * 2 * 2 * 32 * 2),
        ("hf:llama", torch.float32, 2 * 2 * 2 * 16 * 4),  # tiny llama: 2 layers, 2 kv heads of 16
    ],
)
def test_kv_bytes_per_token_formula_equals_the_tensors(spec: str, dtype: torch.dtype, expected: int) -> None:
    problem = get_problem(spec, "debug")
    shape = gm.shape_of(problem)
    assert shape.kv_bytes_per_token(dtype) == expected
    decoder = gm.Decoder(problem, problem.build_model().to(dtype).eval())
    with torch.inference_mode():
        decoder.begin(2, 7)
        decoder.step(torch.zeros((2, 4), dtype=torch.long))
        for _ in range(3):
            decoder.step(torch.zeros((2, 1), dtype=torch.long))
    assert decoder.cache_bytes_per_token() == expected


def test_prefill_flops_match_the_zoo_count() -> None:
    """2·N·T + attention over all T x T pairs is the zoo's own forward FLOPs per sample."""
    problem = get_problem("transformer", "debug")
    c, shape = problem.config, gm.shape_of(problem)
    n = gm.matmul_weights(problem, problem.build_model())
    assert 2 * n * c.seq_len + shape.attention_flops(c.seq_len**2) == problem.forward_flops_per_sample()


def test_hf_matmul_weights_count_the_head() -> None:
    problem = get_problem("hf:llama", "debug")
    model = problem.build_model()
    assert gm.matmul_weights(problem, model) == sum(
        m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)
    )


def test_lengths_defaults_and_refusals() -> None:
    shape = gm.shape_of(get_problem("transformer", "debug"))  # a 32-position context
    assert gm.lengths(shape, None, None) == (16, 16)
    assert gm.lengths(shape, 30, None) == (30, 2)
    with pytest.raises(ConfigError, match=r"prompt \(20\) \+ new tokens \(13\) = 33 exceed .* 32"):
        gm.lengths(shape, 20, 13)


@pytest.mark.parametrize("spec", ["resnet50", "bert-base", "hf:bert", "fc_mnist"])
def test_non_decoders_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match="generate needs a causal LM"):
        gm.shape_of(get_problem(spec, "debug"))


def test_memory_plan_rule() -> None:
    shape = gm.Shape(layers=2, heads=2, kv_heads=2, head_dim=32, context=32, vocab_size=512)
    plan = gm.memory_plan(shape, torch.float32, prompt=16, context=32, free_bytes=1_000_000)
    per_sequence = 32 * 1024 + 1 * 512 * 4  # the KV cache at full context + the last position's logits
    assert plan["max_batch_size"] == int(0.9 * 1_000_000 // per_sequence)
    every = gm.memory_plan(shape, torch.float32, 16, 32, 1_000_000, logits_positions=16)
    assert every["max_batch_size"] == int(0.9 * 1_000_000 // (32 * 1024 + 16 * 512 * 4))
    assert plan["max_context_at_batch_1"] == 32  # capped by the model's context
    assert gm.memory_plan(shape, torch.float32, 16, 32, None)["max_batch_size"] is None


def test_run_generation_result_round_trips() -> None:
    config = GenerateConfig(
        problem="transformer", size="debug", batch_size=2, prompt_len=4, new_tokens=3, repeats=2
    )
    problem = get_problem("transformer", "debug")
    result = run_generation(config, problem)
    g = result.generation
    assert g is not None
    assert (g.batch_size, g.prompt_len, g.new_tokens, len(g.requests)) == (2, 4, 3, 2)
    assert all(len(r.itl_s) == 2 for r in g.requests)
    assert g.ttft_s.n == 2 and g.itl_s.n == 4
    assert result.summary.timed_samples == 4
    assert result.intervals[-1].elapsed_s == pytest.approx(sum(r.e2e_s for r in g.requests))
    assert g.memory.kv_bytes_per_token == g.memory.kv_bytes_per_token_measured == 1024
    assert Result.from_json(result.to_json()).generation == g


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"repeats": 0}, "repeats"),
        ({"precision": "int8-weights"}, "precision"),
    ],
)
def test_config_refusals(change: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GenerateConfig(**change)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_work_formulas_exactly() -> None:
    shape = gm.Shape(layers=2, heads=2, kv_heads=1, head_dim=32, context=64, vocab_size=512)
    assert shape.attention_flops(1) == 2 * 4 * 64  # 4·d per (query, key) pair per layer
    work = gm.Work.of(shape, n=1000, weights=4000, kv=1024, batch=2, prompt=3, new=3)
    # prefill: 2 sequences x (2·N·3 + 512 x 6 pairs); decode steps put positions 3 and 4
    assert work.prefill_flops == 2 * (2 * 1000 * 3 + 512 * 6)
    assert work.decode_flops == 2 * ((2000 + 512 * 4) + (2000 + 512 * 5))
    assert work.decode_bytes == (4000 + 2 * 4 * 1024) + (4000 + 2 * 5 * 1024)


def test_a_last_position_prefill_runs_the_head_once_per_sequence() -> None:
    shape = gm.Shape(layers=2, heads=2, kv_heads=1, head_dim=32, context=64, vocab_size=512)
    last = gm.Work.of(
        shape, n=1000, weights=4000, kv=1024, batch=2, prompt=3, new=3, head=300, logits_positions=1
    )
    # 2 sequences x (2·(N − H)·3 + 2·H·1 + 512 x 6 pairs); decode is the same either way
    assert last.prefill_flops == 2 * (2 * 700 * 3 + 2 * 300 * 1 + 512 * 6)
    every = gm.Work.of(shape, n=1000, weights=4000, kv=1024, batch=2, prompt=3, new=3, head=300)
    assert every.prefill_flops == 2 * (2 * 1000 * 3 + 512 * 6)
    assert last.decode_flops == every.decode_flops


@pytest.mark.parametrize("name", ["transformer", "hf:llama"])
def test_the_prefill_computes_the_last_positions_logits_and_generates_the_same_tokens(name: str) -> None:
    problem = get_problem(name, "debug")
    torch.manual_seed(0)
    model = problem.build_model().eval()
    decoder = gm.Decoder(problem, model)
    prompts = torch.randint(0, decoder.shape.vocab_size, (2, 7))
    clock = WallClock(lambda: None)
    with torch.inference_mode():
        decoder.begin(2, 8)
        last = decoder.step(prompts)
        decoder.begin(2, 8)
        every = decoder.step(prompts, last_only=False)
        assert last.shape == (2, 1, decoder.shape.vocab_size) and every.shape[1] == 7
        torch.testing.assert_close(last[:, 0], every[:, -1])
        tokens = generate_once(decoder, prompts, 5, clock)
        assert torch.equal(tokens, generate_once(decoder, prompts, 5, clock, all_logits=True))
    head = gm.head_weights(problem, model)
    assert (
        head == decoder.shape.vocab_size * model.get_input_embeddings().weight.shape[1]
        if name != "transformer"
        else head == problem.config.hidden * problem.config.vocab_size
    )


def test_repeats_then_duration() -> None:
    from flowrate.harness.generate import _more

    plain = GenerateConfig(repeats=3)
    assert [_more(plain, done, 100.0) for done in (0, 2, 3)] == [True, True, False]
    timed = GenerateConfig(repeats=3, duration_s=2.0)
    assert _more(timed, 1, 5.0)  # fewer than --repeats: on, whatever the time
    assert _more(timed, 3, 1.5) and not _more(timed, 3, 2.0)


def test_the_precisions_a_generation_takes_are_the_dtypes_it_casts_to() -> None:
    from flowrate.config.generate import GENERATE_PRECISIONS

    assert tuple(gm.WEIGHT_DTYPES) == GENERATE_PRECISIONS
    assert GenerateConfig(precision="BF16").precision == "bf16"  # one spelling, as a run's
    with pytest.raises(ConfigError, match="generate takes fp32, bf16, pure-bf16, fp16; got 'tf32'"):
        GenerateConfig(precision="tf32")
