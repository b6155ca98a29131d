"""The environment and serving sections are typed, and open: every key a record holds, named or
not, is written again with its value in its place, so a record read and written is the same JSON."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from factories import make_result
from flowrate.results.codec import encode
from flowrate.results.environment import (
    CpuInfo,
    Environment,
    MachineLoadInfo,
    environment_fingerprint,
    environment_from,
)
from flowrate.results.schema import Result
from flowrate.results.serving import Chunk, RequestTrace, Serving, length_spec, serving_from
from flowrate.serving.result import build_result, serving_section

GPU_ENVIRONMENT: dict[str, Any] = {
    "hostname": "node-3",  # not the order collect_environment writes: kept as read
    "flowrate": {"version": "0.9.0", "commit": "ab" * 20, "dirty": False},
    "torch": {"version": "2.13.0", "cuda": "12.8", "num_threads": 16, "future_pool": 2},
    "device": {
        "type": "cuda",
        "name": "NVIDIA H100 80GB HBM3",
        "index": 0,
        "memory_bytes": 85_000_000_000,
        "sm_clock_mhz": 1980,
        "nvml": {"available": True},
    },
    "cpu": "an old flowrate wrote a string here",
    "command_line": ["flowrate", "run"],
    "a_later_key": {"nested": [1, 2.5, None]},
}


def test_an_environment_reads_by_attribute_and_writes_every_key_back_in_its_place() -> None:
    env = environment_from(GPU_ENVIRONMENT)
    assert env.device_name == "NVIDIA H100 80GB HBM3" and env.device_type == "cuda"
    assert env.device is not None and env.device.memory_bytes == 85_000_000_000
    assert env.device.extra == {"sm_clock_mhz": 1980, "nvml": {"available": True}}
    assert env.torch is not None and env.torch.num_threads == 16 and env.commit == "ab" * 20
    assert env.cpu is None and env.extra["cpu"] == GPU_ENVIRONMENT["cpu"]  # not an object: kept
    assert env.process_id is None  # a key the record lacks reads as None
    assert json.dumps(encode(env)) == json.dumps(GPU_ENVIRONMENT)
    assert environment_fingerprint(env) == {
        "device_name": "NVIDIA H100 80GB HBM3",
        "cpu_model": None,
        "torch_version": "2.13.0",
        "cuda_version": "12.8",
        "flowrate_version": "0.9.0",
        "num_threads": 16,
    }


def test_a_key_set_after_reading_is_written_after_the_keys_read() -> None:
    env = environment_from({"hostname": "h", "device": {"type": "cpu", "name": "EPYC"}})
    load = MachineLoadInfo(seconds=2.0, cpus=2, others_cpus=0.5, steal_share=0.0)
    changed = dataclasses.replace(env, machine_load=load, cpu=CpuInfo(model="EPYC"))
    written = encode(changed)
    assert list(written) == ["hostname", "device", "cpu", "machine_load"]  # then in field order
    assert written["cpu"]["model"] == "EPYC" and written["machine_load"]["cpus"] == 2
    built = encode(Environment(hostname="h"))  # built in code: every named key
    assert built["hostname"] == "h" and built["device"] is None and "client_device" in built


def _section(**more: Any) -> Serving:
    trace = RequestTrace(0, 0.0, sent_s=0.01, max_tokens=3, status=200, output_tokens=3)
    trace.chunks = [Chunk(0.1, "a", 1), Chunk(0.2, "b", 1), Chunk(0.3, "", 1)]
    trace.end_s = 0.3
    settings = {"url": "http://127.0.0.1:8000", "model": "tiny", "rate": 2.0, "input_len": "8", **more}
    return serving_section([trace], None, settings, False)


def test_a_serving_record_reads_back_typed_and_writes_the_same_json() -> None:
    section = _section(multi_turn={"turns": 3})  # a key this flowrate does not name
    result = build_result(section.traces, section, make_result().environment)
    text = result.to_json()
    again = Result.from_json(text)
    assert again.to_json() == text and again == result
    serving = again.serving
    assert serving is not None and serving.extra == {"multi_turn": {"turns": 3}}
    assert serving.figures().completed == 1 and serving.figures().output_tokens == 3
    assert serving.traces[0].chunks[1].t_s == 0.2 and serving.rate == 2.0
    assert list(json.loads(text)["serving"])[:5] == ["url", "model", "rate", "input_len", "multi_turn"]


def test_a_stored_trace_keeps_keys_this_flowrate_does_not_name() -> None:
    data = encode(_section())
    data["traces"][0] = {"priority": 2, **data["traces"][0]}
    read = serving_from(data)
    assert read.traces[0].extra == {"priority": 2} and read.traces[0].output_tokens == 3
    assert json.dumps(encode(read)) == json.dumps(data)


def test_a_sweep_point_and_its_turns_read_by_attribute_and_write_the_same_json() -> None:
    sweep = {"id": "abc", "point": 1, "loads": ["2 req/s", "4 req/s"], "stopped": "every load"}
    sweep |= {"cut": None, "verdict": "pass", "slo_latency_ms": {"ttft_ms": {"n": 4}}, "shard": 0}
    turn = {"turn": 1, "requests": 2, "completed": 2, "ttft_ms_median": 7.5, "prompt_tokens_median": 9.0}
    data = {"rate": 4.0, "turns": "2", "conversations": 2, "think_time_s": 0.5, "per_turn": [turn]}
    data |= {"sweep": sweep, "traces": [{"index": 0, "scheduled_s": 0.0, "conversation": 1, "turn": 0}]}
    read = serving_from(data)
    assert (read.turns, read.conversations, read.think_time_s) == ("2", 2, 0.5)
    assert read.per_turn is not None and read.per_turn[0].prompt_tokens_median == 9.0
    assert read.sweep is not None and (read.sweep.point, read.sweep.verdict) == (1, "pass")
    assert read.sweep.loads == ["2 req/s", "4 req/s"] and read.sweep.extra == {"shard": 0}
    assert read.sweep.slo_latency_ms is not None and read.sweep.slo_latency_ms["ttft_ms"].n == 4
    assert (read.traces[0].conversation, read.traces[0].turn) == (1, 0)
    assert read.extra == {} and json.dumps(encode(read)) == json.dumps(data)


def test_a_rate_search_and_the_servers_own_figures_read_by_attribute_and_write_the_same_json() -> None:
    bounded = {"n": 22, "quantile": 40.0, "upper": 45.0, "tail": 3}
    point = {"rate": 4.0, "partial": False, "completed": 22, "request_throughput": 3.9, "traces": []}
    point |= {"verdict": "pass", "latency_ms": {"ttft_ms": bounded}, "note": "x"}
    search = {"max_rate": 4.0, "percentile": 99.0, "stopped": "resolution", "headline_point": 0}
    search |= {"points": [point, {"rate": 8.0, "partial": True, "cut": "interrupted"}], "seed": 7}
    family = {"type": "histogram", "count": 22.0, "sum": 1.5, "mean": 1.5 / 22, "buckets": [1]}
    scraped = {"available": True, "families": {"vllm:e2e_request_latency_seconds": family}}
    calibration = {"calibrated": True, "first": {"the": 1}, "after": {"the": 1}, "probes": 4}
    data = {"model": "m", "search": search, "server_metrics": scraped, "prompt_calibration": calibration}
    read = serving_from(data)
    assert read.search is not None and (read.search.max_rate, read.search.extra) == (4.0, {"seed": 7})
    first, cut = read.search.points
    assert first.latency_ms is not None and first.latency_ms["ttft_ms"].upper == 45.0
    assert first.latency_ms["ttft_ms"].extra == {"tail": 3} and first.extra == {"traces": [], "note": "x"}
    assert (cut.partial, cut.cut, cut.verdict) == (True, "interrupted", None)
    assert read.server_metrics is not None and read.server_metrics.families is not None
    histogram = read.server_metrics.families["vllm:e2e_request_latency_seconds"]
    assert (histogram.type, histogram.count, histogram.extra) == ("histogram", 22.0, {"buckets": [1]})
    assert read.prompt_calibration is not None and read.prompt_calibration.first == {"the": 1}
    assert read.prompt_calibration.extra == {"probes": 4}
    assert read.extra == {} and json.dumps(encode(read)) == json.dumps(data)


def test_a_mistyped_serving_key_is_kept_and_named() -> None:
    """A hand-edited record reads (its plot says it is malformed) and writes back as it was."""
    for traces in ("y", [{"bad": 1}]):
        data = {"metrics": "x", "traces": traces, "model": "m"}
        read = serving_from(data)
        assert read.mistyped == ["metrics", "traces"] and read.traces == [] and read.model == "m"
        assert encode(read) == data
    chunks = [{"t_s": 1.0}]  # no text, no tokens: kept beside the trace's named keys
    data = {"traces": [{"index": 0, "scheduled_s": 0.0, "chunks": chunks}]}
    read = serving_from(data)
    assert read.traces[0].chunks == [] and read.traces[0].extra == {"chunks": chunks}
    assert encode(read) == data


def test_each_length_distribution_has_one_spelling() -> None:
    assert (
        length_spec("64:256")
        == length_spec("uniform:64,256")
        == length_spec(" uniform: 64 , 256")
        == "64:256"
    )
    assert length_spec("128") == length_spec("128:128") == length_spec("uniform:128,128") == "128"
    assert length_spec("normal:100.0,10") == "normal:100,10"
    assert length_spec("lognormal:200,0.50") == "lognormal:200,0.5"
    assert length_spec("file:lengths.csv#n") == "file:lengths.csv#n"
    assert length_spec(None) is None and length_spec("uniform:x,y") == "uniform:x,y"
