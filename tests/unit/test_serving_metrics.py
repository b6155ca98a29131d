"""Serving metrics under flowrate's, vLLM's and genai-perf's definitions, on hand-made traces
whose every figure is worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from flowrate.serving.metrics import Slo, all_definitions, summarize
from flowrate.serving.stats import describe, quantile_ci
from flowrate.serving.trace import Chunk, RequestTrace


def traces() -> list[RequestTrace]:
    a = RequestTrace(0, 0.0, sent_s=0.0, prompt_tokens=4, max_tokens=3, end_s=0.5, status=200)
    a.chunks = [Chunk(0.1, "a", 1), Chunk(0.3, "bc", 2), Chunk(0.4, "", 0)]
    a.usage_prompt_tokens, a.usage_completion_tokens = 4, 3
    b = RequestTrace(1, 1.0, sent_s=1.0, prompt_tokens=2, max_tokens=2, end_s=1.5, status=200)
    b.chunks = [Chunk(1.05, "", 0), Chunk(1.2, "x", 1), Chunk(1.4, "y", 1)]  # no usage sent
    c = RequestTrace(2, 2.0, sent_s=2.0, max_tokens=2, status=500, error="HTTP 500: boom")
    return [a, b, c]


def test_flowrate_places_tokens_at_their_chunk_and_uses_usage_counts() -> None:
    m = summarize(traces(), "flowrate")
    # a: tokens at 0.1, 0.3, 0.3 -> TTFT 100, E2E 500, TPOT (500-100)/2; b: tokens at 1.2, 1.4
    assert m["ttft_ms"]["mean"] == pytest.approx((100 + 200) / 2)
    assert m["e2e_ms"]["mean"] == pytest.approx(500)
    assert m["tpot_ms"]["mean"] == pytest.approx((200 + 300) / 2)
    assert m["itl_ms"]["n"] == 3 and m["itl_ms"]["mean"] == pytest.approx((200 + 0 + 200) / 3)
    assert m["duration_s"] == pytest.approx(1.5) and m["completed"] == 2
    assert m["request_throughput"] == pytest.approx(2 / 1.5)
    assert m["output_token_throughput"] == pytest.approx(5 / 1.5)
    assert m["total_token_throughput"] == pytest.approx((5 + 6) / 1.5)
    assert m["error_rate"] == pytest.approx(1 / 3)


def test_vllm_counts_every_choice_chunk_and_gaps_per_chunk() -> None:
    m = summarize(traces(), "vllm")
    # a: TTFT 100, latency 400 (last chunk), TPOT (400-100)/2; b: the empty first chunk is TTFT 50
    assert m["ttft_ms"]["mean"] == pytest.approx((100 + 50) / 2)
    assert m["e2e_ms"]["mean"] == pytest.approx(400)
    assert m["tpot_ms"]["mean"] == pytest.approx((150 + 350) / 2)
    assert m["itl_ms"]["n"] == 4 and m["itl_ms"]["mean"] == pytest.approx((200 + 100 + 150 + 200) / 4)
    assert m["duration_s"] == pytest.approx(1.5)


def test_genai_perf_skips_empty_first_responses_and_its_itl_is_a_per_request_tpot() -> None:
    m = summarize(traces(), "genai_perf")
    assert m["ttft_ms"]["mean"] == pytest.approx((100 + 200) / 2)
    assert m["e2e_ms"]["mean"] == pytest.approx(400)
    assert m["tpot_ms"]["mean"] == pytest.approx((150 + 200) / 2)
    assert m["itl_ms"]["n"] == 2 and m["itl_ms"]["mean"] == m["tpot_ms"]["mean"]
    assert m["duration_s"] == pytest.approx(1.4)  # first send to the last response
    assert m["request_throughput"] == pytest.approx(2 / 1.4)


def test_goodput_counts_requests_meeting_every_limit() -> None:
    result = all_definitions(traces(), Slo(ttft_ms=150, tpot_ms=250))
    assert result["flowrate"]["goodput"] == pytest.approx(1 / 1.5)  # a meets both, b's TTFT is 200
    assert result["flowrate"]["slo_attainment"] == pytest.approx(1 / 3)
    assert result["vllm"]["goodput"] == pytest.approx(1 / 1.5)  # a (100, 150); b's TPOT is 350
    assert result["genai_perf"]["goodput"] == pytest.approx(1 / 1.4)  # a only: b's TTFT is 200


def test_without_a_tokenizer_each_nonempty_chunk_is_one_token() -> None:
    trace = RequestTrace(0, 0.0, end_s=1.0, status=200)
    trace.chunks = [Chunk(0.2, "ab", None), Chunk(0.6, "cd", None)]
    m = summarize([trace], "flowrate")
    assert m["tpot_ms"]["mean"] == pytest.approx(800) and m["output_tokens"] == 2
    assert summarize([trace], "vllm")["tpot_ms"] is None  # no usage, no tokenizer: unknown length


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
