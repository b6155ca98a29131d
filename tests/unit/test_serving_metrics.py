"""Serving metrics under flowrate's, vLLM's and genai-perf's definitions, on hand-made traces
whose every figure is worked out by hand; and the identity that reconciles them."""

from __future__ import annotations

import numpy as np
import pytest

from flowrate.results.serving import Chunk, RequestTrace
from flowrate.results.serving_metrics import DEFINITIONS, per_request, placed
from flowrate.serving.metrics import Slo, all_definitions, summarize
from flowrate.serving.stats import describe, quantile_ci
from flowrate.serving.usage import settle


def traces() -> list[RequestTrace]:
    """a: 4 tokens (usage): 1, then "bcd" with 2, and the last with the finish chunk; b: a chat
    role chunk first, then 3 chunks of 1 token, no usage; c: failed. Settled as usage.settle
    settles them: output_tokens, and each chunk's share of it."""
    a = RequestTrace(0, 0.0, sent_s=0.0, prompt_tokens=4, max_tokens=8, end_s=0.5, status=200)
    a.chunks = [Chunk(0.1, "a", 1), Chunk(0.3, "bcd", 2), Chunk(0.4, "", 1)]
    a.usage_prompt_tokens, a.usage_completion_tokens, a.output_tokens = 4, 4, 4
    b = RequestTrace(1, 1.0, sent_s=1.0, prompt_tokens=2, max_tokens=3, end_s=1.6, status=200)
    b.chunks = [Chunk(1.05, "", 0), Chunk(1.2, "x", 1), Chunk(1.4, "y", 1), Chunk(1.5, "z", 1)]
    b.output_tokens = 3
    c = RequestTrace(2, 2.0, sent_s=2.0, max_tokens=2, status=500, error="HTTP 500: boom")
    return [a, b, c]


def test_flowrate_times_each_token_at_its_chunk_and_shares_a_chunks_gap_among_its_tokens() -> None:
    m = summarize(traces(), "flowrate")
    # a: tokens at 0.1, 2 at 0.3, 0.4 -> TTFT 100, E2E 400, ITL 200/2, 200/2, 100, TPOT 100;
    # b: tokens at 1.2, 1.4, 1.5 -> TTFT 200, E2E 500, ITL 200, 100, TPOT 150
    assert m["ttft_ms"]["mean"] == pytest.approx((100 + 200) / 2)
    assert m["e2e_ms"]["mean"] == pytest.approx((400 + 500) / 2)
    assert m["tpot_ms"]["mean"] == pytest.approx((100 + 150) / 2)
    assert m["itl_ms"]["n"] == 5 and m["itl_ms"]["mean"] == pytest.approx((300 + 300) / 5)
    assert m["itl_ms"]["median"] == pytest.approx(100)  # no zero gaps inside a chunk
    assert m["duration_s"] == pytest.approx(1.6) and m["completed"] == 2
    assert m["request_throughput"] == pytest.approx(2 / 1.6)
    assert m["output_tokens"] == 7 and m["output_token_throughput"] == pytest.approx(7 / 1.6)
    assert m["total_token_throughput"] == pytest.approx((7 + 6) / 1.6)
    assert m["error_rate"] == pytest.approx(1 / 3)


def test_vllm_times_every_choice_chunk_and_its_itl_is_per_chunk() -> None:
    m = summarize(traces(), "vllm")
    # a: TTFT 100, latency 400 (the finish chunk), chunk gaps 200, 100, TPOT (400-100)/(4-1);
    # b: the empty role chunk is the first token (TTFT 50), latency 500, gaps 150, 200, 100,
    # TPOT (500-50)/(3-1)
    assert m["ttft_ms"]["mean"] == pytest.approx((100 + 50) / 2)
    assert m["e2e_ms"]["mean"] == pytest.approx((400 + 500) / 2)
    assert m["tpot_ms"]["mean"] == pytest.approx((100 + 225) / 2)
    assert m["itl_ms"]["n"] == 5 and m["itl_ms"]["mean"] == pytest.approx((200 + 100 + 150 + 200 + 100) / 5)
    assert m["output_tokens"] == 7 and m["duration_s"] == pytest.approx(1.6)


def test_genai_perf_skips_empty_first_responses_and_its_itl_is_a_per_request_tpot() -> None:
    m = summarize(traces(), "genai_perf")
    # a: TTFT 100, latency 400, ITL (400-100)/3; b: TTFT 200 (first content), latency 500, ITL 150
    assert m["ttft_ms"]["mean"] == pytest.approx((100 + 200) / 2)
    assert m["e2e_ms"]["mean"] == pytest.approx((400 + 500) / 2)
    assert m["tpot_ms"]["mean"] == pytest.approx((100 + 150) / 2)
    assert m["itl_ms"]["n"] == 2 and m["itl_ms"]["mean"] == m["tpot_ms"]["mean"]
    assert m["duration_s"] == pytest.approx(1.5)  # first send to the last response
    assert m["request_throughput"] == pytest.approx(2 / 1.5)
    assert m["output_token_throughput"] == pytest.approx(7 / 1.5)


def test_every_definition_counts_the_same_tokens() -> None:
    figures = all_definitions(traces())
    assert {figures[name]["output_tokens"] for name in DEFINITIONS} == {7}


def _identity_traces() -> list[RequestTrace]:
    """Streams of every shape, settled as serve-bench settles them: chunks of several tokens,
    usage spread over fewer chunks (a server that buffers), empty role and finish chunks, one
    token."""
    shapes = [
        ([(0.1, "a"), (0.25, "bc"), (0.3, ""), (0.7, "d")], 9),  # usage 9 over 3 chunks with text
        ([(0.05, ""), (0.2, "x"), (0.45, "y"), (0.5, "z"), (0.52, "")], None),
        ([(0.3, "w"), (0.31, "v")], 2),
        ([(0.4, "only")], 1),
        ([(0.1, "p"), (0.9, "q"), (1.0, "r"), (1.6, "s")], 16),  # 16 tokens in 4 chunks
    ]
    out = []
    for index, (chunks, said) in enumerate(shapes):
        trace = RequestTrace(index, 0.0, sent_s=0.0, max_tokens=16, status=200, end_s=2.0)
        trace.chunks = [Chunk(t, text, None) for t, text in chunks]
        trace.usage_completion_tokens = said
        settle(trace)
        out.append(trace)
    return out


def test_a_requests_mean_itl_is_its_e2e_less_ttft_over_its_gaps_under_every_definition() -> None:
    """mean ITL = (E2E - TTFT) / (n - 1), n counted as each definition counts: output tokens for
    flowrate and genai-perf (where it is also the TPOT), chunks for vLLM, whose TPOT uses tokens
    and so equals its ITL only when every chunk carries one token."""
    settled = _identity_traces()
    assert [t.output_tokens for t in settled] == [9, 3, 2, 1, 16]
    for name in DEFINITIONS:
        for trace, row in zip(settled, per_request(settled, name), strict=True):
            n = len(trace.chunks) if name == "vllm" else sum(placed(trace))
            if n < 2:
                assert row.itl_ms == [] and row.tpot_ms is None
                continue
            expected = (row.e2e_ms - row.ttft_ms) / (n - 1)
            gaps = row.itl_ms if name != "genai_perf" else [row.tpot_ms] * (n - 1)
            assert len(gaps) == n - 1 and np.mean(gaps) == pytest.approx(expected)
            if name != "vllm":
                assert row.tpot_ms == pytest.approx(expected)
    one_per_chunk = per_request([settled[1]], "vllm")[0]  # x, y, z: one token a chunk
    assert one_per_chunk.tpot_ms != pytest.approx(np.mean(one_per_chunk.itl_ms))  # 5 chunks
    flowrate = per_request([settled[1]], "flowrate")[0]
    # the last token arrives with the finish chunk at 0.52: gaps 250, 70
    assert flowrate.itl_ms == pytest.approx([250, 70]) and flowrate.tpot_ms == pytest.approx(160)


def test_usage_spread_over_buffered_chunks_keeps_itl_and_tpot_together() -> None:
    """A server that sends 16 tokens in 4 chunks (transformers serve buffers so): the ITL was
    per chunk (mean 500 ms against a TPOT of 100) and is now per token, equal to the TPOT."""
    m = summarize([_identity_traces()[4]], "flowrate")
    assert m["tpot_ms"]["mean"] == pytest.approx(1500 / 15)
    assert m["itl_ms"]["n"] == 15 and m["itl_ms"]["mean"] == pytest.approx(m["tpot_ms"]["mean"])
    assert m["output_tokens"] == 16


def test_goodput_counts_requests_meeting_every_limit() -> None:
    result = all_definitions(traces(), Slo(ttft_ms=150, tpot_ms=120))
    assert result["flowrate"]["goodput"] == pytest.approx(1 / 1.6)  # a (100, 100); b's TTFT is 200
    assert result["flowrate"]["slo_attainment"] == pytest.approx(1 / 3)
    assert result["vllm"]["goodput"] == pytest.approx(1 / 1.6)  # a (100, 100); b's TPOT is 225
    assert result["genai_perf"]["goodput"] == pytest.approx(1 / 1.5)  # a only: b's TTFT is 200


def test_without_a_tokenizer_or_usage_each_chunk_with_text_is_one_token() -> None:
    trace = RequestTrace(0, 0.0, max_tokens=8, end_s=1.0, status=200)
    trace.chunks = [Chunk(0.2, "ab", None), Chunk(0.6, "cd", None)]
    settle(trace)
    m = summarize([trace], "flowrate")
    assert m["tpot_ms"]["mean"] == pytest.approx(400) and m["output_tokens"] == 2
    assert summarize([trace], "vllm")["tpot_ms"]["mean"] == pytest.approx(400)


def test_a_trace_recorded_before_counts_were_settled_is_settled_alike() -> None:
    """Records of schema 6 and before: no output_tokens, a chunk's tokens the tokenizer's (or
    None): their usage, when kept, is placed on the chunks as serve-bench places it now."""
    old = RequestTrace(0, 0.0, max_tokens=8, end_s=1.0, status=200, usage_completion_tokens=4)
    old.chunks = [Chunk(0.2, "ab", None), Chunk(0.6, "cd", None), Chunk(0.7, "", None)]
    assert placed(old) == [2, 1, 1]  # ceil: 2, 4, 4; the last token with the last chunk
    tokenized = RequestTrace(0, 0.0, max_tokens=8, end_s=1.0, status=200)
    tokenized.chunks = [Chunk(0.2, "ab", 3), Chunk(0.6, "cd", 0)]
    assert placed(tokenized) == [2, 1]


def test_quantile_intervals_are_order_statistics() -> None:
    values = [float(v) for v in range(1, 11)]
    assert quantile_ci(np.array(values), 0.5) == [2.0, 9.0]
    summary = describe(values)
    assert summary is not None
    assert summary["median"] == 5.5 and summary["p99"] == pytest.approx(9.91)
    assert summary["p99_ci"] is None  # 10 samples cannot bound a p99
    small = describe([1.0, 2.0, 3.0])
    assert small is not None and small["mean_ci"] == pytest.approx([2 - 2.4841377, 2 + 2.4841377])
    assert describe([]) is None
