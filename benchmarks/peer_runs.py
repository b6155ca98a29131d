"""serve_peers.py's runs: the command line each tool gets for the same load, running it, reading
its output into the five figures (peer_figures.py), and the report over rounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import peer_figures
from peer_figures import Figures

STARTUP_S = 180  # a tool's own start (AIPerf starts a dozen processes) beyond the load's length


@dataclass(frozen=True)
class Load:
    """The one load every tool sends: constant arrivals, fixed lengths, streamed completions."""

    url: str
    model: str  # the served model's folder: also the tokenizer every tool counts with
    rate: float
    requests: int
    input_len: int
    output_len: int

    @property
    def seconds(self) -> float:
        return self.requests / self.rate


def flowrate_command(load: Load, folder: Path) -> list[str]:
    return [
        sys.executable, "-m", "flowrate", "serve-bench", "--url", load.url, "--model", load.model,
        "--tokenizer", load.model, "--endpoint", "completions", "-n", str(load.requests),
        "--rate", str(load.rate), "--arrivals", "constant", "--input-len", str(load.input_len),
        "--output-len", str(load.output_len), "--no-store", "--quiet", "--out", str(folder / "flowrate.json"),
    ]  # fmt: skip


def aiperf_command(load: Load, folder: Path, bin_dir: Path) -> list[str]:
    """--use-server-token-count: tokens counted from the server's usage, as flowrate does;
    --use-legacy-max-tokens: /v1/completions takes max_tokens; --workers-max 1: one sender
    process is enough at a low rate, and the client shares the server's CPU."""
    return [
        str(bin_dir / "aiperf"), "profile", "--model", load.model, "--tokenizer", load.model,
        "--url", load.url, "--endpoint-type", "completions", "--streaming", "--use-legacy-max-tokens",
        "--use-server-token-count", "--request-rate", str(load.rate), "--arrival-pattern", "constant",
        "--request-count", str(load.requests), "--isl", str(load.input_len),
        "--prompt-input-tokens-stddev", "0", "--osl", str(load.output_len), "--output-tokens-stddev", "0",
        "--random-seed", "0", "--workers-max", "1", "--ui", "none", "--artifact-dir", str(folder / "aiperf"),
    ]  # fmt: skip


def guidellm_command(load: Load, folder: Path, bin_dir: Path) -> list[str]:
    return [
        str(bin_dir / "guidellm"), "run",
        "--backend", f"kind=openai_http,target={load.url},model={load.model},request_format=/v1/completions",
        "--profile", f"kind=constant,rate={load.rate}",
        "--constraint", f"kind=max_requests,count={load.requests}",
        "--tokenizer", f"kind=huggingface_auto,model={load.model}",
        "--data", f"kind=synthetic_text,prompt_tokens={load.input_len},output_tokens={load.output_len}",
        "--seed", "kind=static,value=0",
        "--output", f"kind=json,path={folder / 'benchmarks.json'}",
        "--disable-console-interactive",
    ]  # fmt: skip


def inference_perf_config(load: Load, folder: Path) -> dict[str, Any]:
    """One 'constant' stage of requests / rate seconds (inference-perf 0.7.0 sends that many
    requests at exponential gaps scaled to sum to the stage's length, not at equal gaps: the
    nearest it offers); output tokens from the server's usage."""

    def fixed(n: int) -> dict[str, Any]:
        return {"type": "fixed", "mean": n, "min": n, "max": n, "std_dev": 0}

    return {
        "api": {"type": "completion", "streaming": True},
        "data": {
            "type": "random",
            "input_distribution": fixed(load.input_len),
            "output_distribution": fixed(load.output_len),
        },
        "load": {
            "type": "constant",
            "stages": [{"rate": load.rate, "duration": round(load.seconds)}],
            "num_workers": 1,
        },
        "server": {"type": "vllm", "model_name": load.model, "base_url": load.url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": load.model},
        "report": {"request_lifecycle": {"use_server_output_tokens": True}},
        "storage": {"local_storage": {"path": str(folder / "reports")}},
    }


def inference_perf_command(load: Load, folder: Path, bin_dir: Path) -> list[str]:
    config = folder / "config.json"  # YAML is a superset of JSON
    config.write_text(json.dumps(inference_perf_config(load, folder), indent=2))
    return [str(bin_dir / "inference-perf"), "-c", str(config)]


def output_file(tool: str, folder: Path) -> Path:
    return {
        "flowrate": folder / "flowrate.json",
        "aiperf": folder / "aiperf" / "profile_export_aiperf.json",
        "guidellm": folder / "benchmarks.json",
        "inference-perf": folder / "reports" / "summary_lifecycle_metrics.json",
    }[tool]


def environment(tool: str) -> dict[str, str]:
    """Offline for every tool but AIPerf, whose offline mode looks a tokenizer up only in the hub's
    cache and so refuses a local folder (the folder needs no network either way)."""
    env = dict(os.environ)
    offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    if tool == "aiperf":
        for name in offline:
            env.pop(name, None)
    else:
        env.update(offline)
    return env


@dataclass
class Run:
    """One tool's run in one round: its command, its figures (or why there are none) and, for
    flowrate, its traces re-read under each peer's definitions."""

    tool: str
    command: list[str]
    seconds: float = 0.0
    figures: Figures | None = None
    error: str | None = None
    rereads: dict[str, Figures] = field(default_factory=dict)

    def summary(self) -> str:
        if self.figures is None:
            return f"failed: {self.error}"
        f = self.figures
        return (
            f"{f.request_rate:.3f} req/s, {f.output_tokens_per_s:.2f} tok/s, TTFT {f.ttft_ms:.1f} ms, "
            f"TPOT {f.tpot_ms:.2f} ms, E2E {f.e2e_ms:.1f} ms ({self.seconds:.0f} s)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "command": self.command,
            "seconds": self.seconds,
            "figures": self.figures.to_dict() if self.figures else None,
            "error": self.error,
            "rereads": {peer: f.to_dict() for peer, f in self.rereads.items()},
        }


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["(no output)"])[-1][:300]


def run(tool: str, load: Load, folder: Path, bin_dir: Path | None, peers: list[str]) -> Run:
    """Run one tool against the server and read its output; a failure is kept as its error line."""
    import time

    if tool == "flowrate":
        command = flowrate_command(load, folder)
    else:
        assert bin_dir is not None
        build = {
            "aiperf": aiperf_command,
            "guidellm": guidellm_command,
            "inference-perf": inference_perf_command,
        }
        command = build[tool](load, folder, bin_dir)
    result = Run(tool, command)
    start = time.monotonic()
    log = folder / "log.txt"
    try:
        done = subprocess.run(
            command, env=environment(tool), stdout=log.open("w"), stderr=subprocess.STDOUT,
            timeout=load.seconds + STARTUP_S, check=False, cwd=folder,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        result.error = f"did not finish within {load.seconds + STARTUP_S:.0f} s"
        return result
    finally:
        result.seconds = time.monotonic() - start
    out = output_file(tool, folder)
    if done.returncode != 0 or not out.exists():
        result.error = f"exit {done.returncode}: {_last_error(log.read_text(errors='replace'))}"
        return result
    data = json.loads(out.read_text())
    try:
        if tool == "flowrate":
            result.figures = peer_figures.read_flowrate(data)
            result.rereads = {peer: peer_figures.reread(data, peer) for peer in peers}
        else:
            result.figures = peer_figures.READERS[tool](data)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        result.error = f"its output has no {e!r}: {out}"
    return result


def report(
    rounds: list[dict[str, Any]], load: Load, versions: dict[str, str], skipped: dict[str, str]
) -> dict[str, Any]:
    """The JSON written: the load, each peer's version and command line, each round's figures,
    and per peer and figure the medians over rounds, ratios and verdicts."""
    rows: list[peer_figures.Verdict] = []
    for peer in versions:
        if peer in skipped:
            continue
        paired = [
            r["runs"]
            for r in rounds
            if r["runs"]["flowrate"].figures and getattr(r["runs"].get(peer), "figures", None)
        ]
        if not paired:
            continue
        rows += peer_figures.verdicts(
            peer,
            [p["flowrate"].figures for p in paired],
            [p[peer].figures for p in paired],
            [p["flowrate"].rereads[peer] for p in paired],
        )
    return {
        "load": {
            "url": load.url,
            "model": load.model,
            "rate": load.rate,
            "arrivals": "constant",
            "requests": load.requests,
            "input_len": load.input_len,
            "output_len": load.output_len,
            "endpoint": "/v1/completions",
            "streaming": True,
        },
        "peers": {
            name: {
                "version": v,
                "skipped": skipped.get(name),
                "command": next((r["runs"][name].command for r in rounds if name in r["runs"]), None),
            }
            for name, v in versions.items()
        },
        "rounds": [
            {
                **{k: v for k, v in r.items() if k != "runs"},
                "runs": {t: x.to_dict() for t, x in r["runs"].items()},
            }
            for r in rounds
        ],
        "verdict_rows": [v.to_dict() for v in rows],
        "all_hold": bool(rows) and all(v.holds for v in rows),
    }
