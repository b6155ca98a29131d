"""flowrate serve-bench against its peers on one server: AIPerf, guidellm and inference-perf, each
installed from PyPI at a pinned version into its own virtual environment (cached under
~/.cache/flowrate-peers/<peer>-<version>), so none of their dependencies touch flowrate's.

One `transformers serve` on loopback serves a tiny random-weight Llama with a tokenizer trained
here (the recipe of tests/integration/test_serve_bench.py; its model never emits EOS, so every
request yields exactly --output-len tokens), with one change: a WordPiece tokenizer over ASCII
instead of byte-level BPE, so every generated token streams as text (byte-level tokens that do
not complete a character stream nothing, and AIPerf counts a stream without text as an error).
Every tool sends the same load to it: constant
arrivals at --rate (inference-perf's nearest: its 'constant' load, Poisson gaps scaled to sum to
-n / --rate seconds), --input-len prompt tokens by the same tokenizer, --output-len max_tokens,
-n requests, streamed from /v1/completions. The tools run interleaved in rounds, the order
rotated each round. Each reads the same five figures: request rate, output tokens/s and the
medians of TTFT, TPOT and E2E (peer_figures.py). Per figure and peer it prints the medians over
rounds, flowrate ÷ peer and whether they are within 10%; where not, the peer's definition that
differs, and flowrate's own traces read under it, within 3%. A peer that cannot be installed or
run is skipped with its error line. Everything goes to one JSON (--out).

    python benchmarks/serve_peers.py                           # 3 rounds, 20 requests at 0.5/s
    python benchmarks/serve_peers.py --rounds 1 -n 6 --peers aiperf
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_figures  # beside this script
import peer_runs
from record import Figure, Target, record

CACHE = Path.home() / ".cache" / "flowrate-peers"
CONTEXT = 128  # the served model's max_position_embeddings (BUILD)
STARTUP_S = 180

# `transformers serve` through a launcher that lets a torchvision whose compiled operators do not
# load import anyway (transformers imports torchvision when it is installed), and that makes
# /v1/completions accept and ignore vLLM's `ignore_eos`, which inference-perf and guidellm send
# in every request and transformers serve otherwise refuses (422): this model never emits EOS, so
# ignoring it changes no response
LAUNCHER = (
    "import sys; from flowrate.problems.sources.vision_source import load_torchvision; "
    "load_torchvision(); from transformers.cli.serving import completion as c; "
    "p = c.TransformersTextCompletionCreateParams; "
    "p.__mutable_keys__ = frozenset({*p.__mutable_keys__, 'ignore_eos'}); "
    "c.UNUSED_LEGACY_COMPLETION_FIELDS.add('ignore_eos'); "
    "from transformers.cli.transformers import main; "
    "sys.argv = ['transformers', 'serve', *sys.argv[1:]]; main()"
)
BUILD = """
import string
import sys
from flowrate.problems.sources.vision_source import load_torchvision
load_torchvision()
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
folder = sys.argv[1]
tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.decoder = decoders.WordPiece()
alphabet = list(string.ascii_letters + string.digits + string.punctuation)
trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                    initial_alphabet=alphabet)
pairs = " ".join("a" + c for c in alphabet)  # every character after another: any ASCII word encodes
tok.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 20 + [pairs], trainer)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
fast.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
fast.save_pretrained(folder)
torch.manual_seed(0)
config = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                     bos_token_id=1, eos_token_id=None)
LlamaForCausalLM(config).save_pretrained(folder)
"""
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


@dataclass(frozen=True)
class Peer:
    name: str
    version: str
    python: str  # the interpreter its venv is made from (inference-perf needs Python >= 3.12)
    extra: tuple[str, ...] = ()  # installed with it, e.g. the CPU torch flowrate runs

    @property
    def venv(self) -> Path:
        return CACHE / f"{self.name}-{self.version}"

    def bin(self, command: str) -> Path:
        return self.venv / "bin" / command


def peers() -> dict[str, Peer]:
    """The peers at their pinned versions. guidellm depends on torch: the torch flowrate runs is
    pinned beside it, so a CPU machine gets no CUDA build."""
    torch_pin = f"torch=={_version('torch')}"
    return {
        "aiperf": Peer("aiperf", "0.13.0", sys.executable),
        "guidellm": Peer("guidellm", "0.8.1", sys.executable, (torch_pin,)),
        "inference-perf": Peer("inference-perf", "0.7.0", shutil.which("python3.12") or ""),
    }


def install(peer: Peer) -> str | None:
    """Make (or reuse) the peer's venv and pip-install it there; None when ready, else why not
    (one line)."""
    marker = peer.venv / "installed.txt"
    if marker.exists():
        return None
    if not peer.python:
        return f"{peer.name} {peer.version} needs an interpreter that is not on PATH (python3.12)"
    CACHE.mkdir(parents=True, exist_ok=True)
    steps = [
        [peer.python, "-m", "venv", "--clear", str(peer.venv)],
        [str(peer.bin("pip")), "install", "-q", f"{peer.name}=={peer.version}", *peer.extra],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=3600, check=False)
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            errors = [ln for ln in lines if "ERROR" in ln or "Error" in ln] or lines or ["(no output)"]
            return f"`{' '.join(step[-3:])}` failed: {errors[-1].strip()}"
    marker.write_text(f"{peer.name}=={peer.version}\n")
    return None


def build_model(folder: Path) -> None:
    if not (folder / "config.json").exists():
        env = {**os.environ, **OFFLINE}
        subprocess.run([sys.executable, "-c", BUILD, str(folder)], check=True, env=env, timeout=600)


def start_server(folder: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    url = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-c", LAUNCHER, str(folder), "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(
        args, env={**os.environ, **OFFLINE}, stdout=log.open("w"), stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as answer:
                if answer.status == 200:
                    return server, url
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            sys.exit(f"transformers serve did not start: {log.read_text()[-2000:]}")
        time.sleep(0.5)


def warm(url: str, model: str, requests: int = 5) -> None:
    """transformers serve loads the model on its first request: a few requests first, so no tool's
    first round pays for the load."""
    body = json.dumps({"model": model, "prompt": "the quick brown fox", "max_tokens": 8}).encode()
    for _ in range(requests):
        request = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=STARTUP_S) as answer:
            answer.read()


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", "--num-requests", type=int, default=20)
    parser.add_argument("--rate", type=float, default=0.5, help="constant arrivals, requests/s")
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=16)
    parser.add_argument("--peers", default="aiperf,guidellm,inference-perf", help="comma-separated")
    parser.add_argument("--work", type=Path, default=CACHE / "work", help="model, logs, outputs")
    parser.add_argument("--out", type=Path, default=Path("serve_peers.json"))
    args = parser.parse_args()
    known = peers()
    chosen = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = sorted(set(chosen) - set(known))
    if unknown or args.rounds < 1 or args.num_requests < 2 or not 0 < args.rate < float("inf"):
        print(f"error: --peers takes {', '.join(known)}; --rounds >= 1, -n >= 2, --rate > 0", file=sys.stderr)
        sys.exit(2)
    if args.input_len < 1 or args.output_len < 2 or args.input_len + args.output_len > CONTEXT:
        print(f"error: --input-len >= 1, --output-len >= 2, their sum <= {CONTEXT} (the model's context)",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    args.work.mkdir(parents=True, exist_ok=True)
    skipped: dict[str, str] = {}
    for name in chosen:
        reason = install(known[name])
        if reason:
            skipped[name] = reason
            print(f"skipping {name}: {reason}", file=sys.stderr)
    model = args.work / "tiny-llama"
    build_model(model)
    # a SIGTERM unwinds like Ctrl-C, so the server and a running tool are stopped with the script
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    server, url = start_server(model, args.work / "server.log")
    warm(url, str(model))
    load = peer_runs.Load(url, str(model), args.rate, args.num_requests, args.input_len, args.output_len)
    tools = ["flowrate", *[n for n in chosen if n not in skipped]]
    rounds: list[dict[str, Any]] = []
    try:
        for index in range(args.rounds):
            order = tools[index % len(tools) :] + tools[: index % len(tools)]
            this: dict[str, Any] = {"order": order, "load_average": _load_average(), "runs": {}}
            for tool in order:
                folder = args.work / f"round{index}" / tool
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                bin_dir = known[tool].venv / "bin" if tool in known else None
                run = peer_runs.run(tool, load, folder, bin_dir, tools[1:])
                print(f"round {index + 1} {tool}: {run.summary()}", file=sys.stderr)
                this["runs"][tool] = run
            this["load_average_after"] = _load_average()
            rounds.append(this)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    result = peer_runs.report(rounds, load, {n: known[n].version for n in chosen}, skipped)
    result["transformers"] = _version("transformers")
    result["torch"] = _version("torch")
    result["command"] = " ".join(["python", *sys.argv])
    args.out.write_text(json.dumps(result, indent=2))
    rows = [{k: v for k, v in row.items() if k != "holds"} for row in result["verdict_rows"]]
    for row in rows:
        row["rounds"] = tuple(tuple(pair) for pair in row["rounds"])
    print(peer_figures.table([peer_figures.Verdict(**row) for row in rows]))
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}")
    for index, this in enumerate(rounds):
        for tool, run in this["runs"].items():
            if run.error:
                print(f"round {index + 1}: {tool} failed: {run.error}")
    print(f"written to {args.out}")
    load_note = f"{len(rounds)} rounds; load {result['load']}"
    record("serve_peers", _figures(result["verdict_rows"]), note=load_note)


def _figures(rows: list[dict[str, Any]]) -> list[Figure]:
    """Per peer and figure, flowrate's median against the peer's: within 10%, or where a
    definition differs, flowrate's traces re-read under the peer's within 3%."""
    figures = []
    for row in rows:
        name = f"{row['peer']} {row['figure']}"
        medians = f"flowrate {row['flowrate']:.4g}, {row['peer']} {row['peer_value']:.4g} (medians)"
        figures.append(Figure(f"{name}: flowrate / peer", round(row["ratio"], 4), "ratio", note=medians))
        off = round(abs(row["ratio"] - 1), 4)
        figures.append(Figure(f"{name}: flowrate / peer, off 1 by", off, "fraction", Target("<=", 0.1)))
        if row["reread_ratio"] is not None:
            figures.append(
                Figure(
                    f"{name}: flowrate re-read / peer, off 1 by",
                    round(abs(row["reread_ratio"] - 1), 4),
                    "fraction",
                    Target("<=", 0.03),
                    f"flowrate's traces read as {row['peer']} defines it: {row['definition']}",
                )
            )
    return figures


if __name__ == "__main__":
    main()
