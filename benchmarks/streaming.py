"""Weight streaming against the physics: how close to resident, how it compares with FSDP2's CPU
offload, what it achieves, how much larger a model it trains, and how fast its host optimizer is.

Parts (each prints a table; all measured side by side in one run):

  optimizer   host optimizer throughput, parameters/s, on this machine's cores (CPU or GPU host)
  ratio       streaming ÷ resident samples/s, GPT of ~1.3B parameters, bf16, at 2k, 8k, 16k and 32k
              tokens per step (seq 1024 × batch 2, 8, 16, 32). Target ≥ 0.90 from 16k on (H100).
  fsdp        streaming ÷ FSDP2 (fully_shard with CPUOffloadPolicy) at world size 1, same model,
              tokens and precision. Target ≥ 1.5.
  largest     achieved model TFLOP/s streaming the largest zoo GPT the host memory holds.
              Target > 272 TFLOP/s on one H100.
  limit       the largest zoo GPT that trains under --device-memory-limit 16, resident and
              streaming. Target ≥ 4× the parameters.

GPU parts need CUDA and skip with the reason elsewhere. `--smoke` runs the ratio part on a tiny
GPT on any device, to check the plumbing (its figures are not the benchmark).

    python benchmarks/streaming.py                    # every part this machine can run
    python benchmarks/streaming.py --parts optimizer ratio
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator

import torch

import flowrate
from flowrate.config import OptimizerName
from flowrate.errors import FlowrateError
from flowrate.execution.host_optimizer import BlockUpdater
from flowrate.execution.resident import make_optimizer

GPT = "gpt-1.3b"
SEQ = 1024
TOKENS_PER_STEP = (2048, 8192, 16384, 32768)
LADDER = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt-1.3b", "gpt-2.7b", "gpt-6.7b")


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n## {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def host_optimizer_throughput(parameters: int = 200_000_000, blocks: int = 24, rounds: int = 5) -> None:
    """AdamW over `parameters` fp32 host parameters split in `blocks`, as streaming updates them."""
    per_block = parameters // blocks
    params = [[torch.nn.Parameter(torch.randn(per_block) * 0.02)] for _ in range(blocks)]
    for block in params:
        block[0].grad = torch.randn(per_block) * 1e-3
    updater = BlockUpdater(
        [make_optimizer(OptimizerName.ADAMW, b, 1e-4, torch.device("cpu")) for b in params]
    )

    def keep_grads(block: list[torch.nn.Parameter]) -> Callable[[], None]:
        grad = block[0].grad

        def place() -> None:
            block[0].grad = grad

        return place

    places = [keep_grads(b) for b in params]
    rates = []
    for _ in range(rounds + 1):
        start = time.perf_counter()
        for index in reversed(range(blocks)):
            updater.submit(index, places[index], lambda: None)
        updater.wait_all()
        rates.append(per_block * blocks / (time.perf_counter() - start))
    updater.close()
    rates = sorted(rates[1:])
    threads = torch.get_num_threads()
    table(
        "Host optimizer (AdamW, fused CPU kernel, one host thread issuing per-block updates)",
        ["parameters", "blocks", "torch threads", "median params/s", "range"],
        [
            [
                f"{per_block * blocks:,}",
                str(blocks),
                str(threads),
                f"**{rates[len(rates) // 2] / 1e9:.2f} billion/s**",
                f"{rates[0] / 1e9:.2f}–{rates[-1] / 1e9:.2f}",
            ]
        ],
    )


def samples_per_sec(problem: str, execution: str, batch: int, **extra: object) -> float:
    result = flowrate.benchmark(
        problem,
        execution=execution,
        precision="bf16",
        batch_size=batch,
        duration_s=extra.pop("duration_s", 20.0),
        preheat_steps=3,
        min_steps=5,
        **extra,
    )
    return result.summary.samples_per_sec


@contextlib.contextmanager
def released() -> Iterator[None]:
    try:
        yield
    finally:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def ratio_part(problem: str, seq: int, tokens: tuple[int, ...], duration: float, **shape: object) -> None:
    rows = []
    for per_step in tokens:
        batch = max(1, per_step // seq)
        with released():
            resident = _or_oom(
                lambda batch=batch: samples_per_sec(problem, "resident", batch, duration_s=duration, **shape)
            )
        with released():
            streamed = samples_per_sec(problem, "streaming", batch, duration_s=duration, **shape)
        ratio = f"**{streamed / resident:.3f}**" if resident else "— (resident does not fit)"
        rows.append([f"{batch * seq:,}", str(batch), f"{resident or 0:.3g}", f"{streamed:.3g}", ratio])
    table(
        f"Streaming ÷ resident, {problem}, bf16, seq {seq}",
        ["tokens/step", "batch", "resident samples/s", "streaming samples/s", "ratio"],
        rows,
    )


def _or_oom(run: Callable[[], float]) -> float | None:
    try:
        return run()
    except FlowrateError as error:
        if "memory" in str(error):
            return None
        raise


def fsdp_offload_samples_per_sec(problem: str, batch: int, seconds: float) -> float:
    """FSDP2 with CPUOffloadPolicy at world size 1: the peer streaming is measured against."""
    import torch.distributed as dist
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    from flowrate.problems.registry import get_problem

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        spec = get_problem(problem, None, {})
        torch.manual_seed(0)
        model = spec.build_model()
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in spec.blocks(model):
            fully_shard(block, offload_policy=CPUOffloadPolicy(), mp_policy=policy)
        fully_shard(model, offload_policy=CPUOffloadPolicy(), mp_policy=policy)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
        device = torch.device("cuda")
        generator = torch.Generator(device=device).manual_seed(0)
        batches = [spec.make_batch(batch, device, generator) for _ in range(2)]

        def step(i: int) -> None:
            loss = spec.loss(model, batches[i % 2])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for i in range(3):
            step(i)
        torch.cuda.synchronize()
        start, steps = time.perf_counter(), 0
        while time.perf_counter() - start < seconds or steps < 5:
            step(steps)
            steps += 1
            torch.cuda.synchronize()
        return steps * batch / (time.perf_counter() - start)
    finally:
        dist.destroy_process_group()


def fsdp_part(problem: str, seq: int, duration: float) -> None:
    batch = 16384 // seq
    with released():
        streamed = samples_per_sec(problem, "streaming", batch, duration_s=duration)
    with released():
        fsdp = fsdp_offload_samples_per_sec(problem, batch, duration)
    table(
        f"Streaming ÷ FSDP2 CPU offload (world size 1), {problem}, bf16, 16k tokens/step",
        ["streaming samples/s", "FSDP2 offload samples/s", "ratio"],
        [[f"{streamed:.3g}", f"{fsdp:.3g}", f"**{streamed / fsdp:.2f}**"]],
    )


def largest_part(duration: float) -> None:
    import psutil

    from flowrate.config import Mode, Precision
    from flowrate.execution.host_memory import host_bytes_per_parameter
    from flowrate.problems.registry import get_problem

    per = host_bytes_per_parameter(Mode.TRAIN, Precision.BF16, OptimizerName.ADAMW)
    fits = [
        n
        for n in LADDER
        if get_problem(n, None, {}).parameter_count() * per < 0.85 * psutil.virtual_memory().available
    ]
    name = fits[-1]
    with released():
        result = flowrate.benchmark(
            name,
            execution="streaming",
            precision="bf16",
            batch_size=32768 // SEQ,
            duration_s=duration,
            preheat_steps=3,
        )
    table(
        "Achieved model TFLOP/s, streaming the largest GPT the host memory holds",
        ["problem", "parameters", "tokens/step", "model TFLOP/s", "MFU"],
        [
            [
                name,
                f"{result.problem['parameters']:,}",
                f"{result.batch_size * SEQ:,}",
                f"**{result.summary.model_flops_per_sec / 1e12:.1f}**",
                f"{result.flops.get('mfu') or 0:.1%}",
            ]
        ],
    )


def limit_part(limit_gib: float) -> None:
    rows = []
    best: dict[str, tuple[str, int] | None] = {"resident": None, "streaming": None}
    from flowrate.problems.registry import get_problem

    for execution in ("resident", "streaming"):
        for name in LADDER:
            with released():
                try:
                    flowrate.benchmark(
                        name,
                        execution=execution,
                        precision="bf16",
                        batch_size=4,
                        device_memory_limit_gib=limit_gib,
                        steps=3,
                        preheat_steps=1,
                    )
                except FlowrateError:
                    break
            best[execution] = (name, get_problem(name, None, {}).parameter_count())
    resident, streamed = best["resident"], best["streaming"]
    ratio = f"**{streamed[1] / resident[1]:.1f}×**" if resident and streamed else "—"
    rows.append(
        [
            f"{resident[0]} ({resident[1] / 1e9:.2f} B)" if resident else "none",
            f"{streamed[0]} ({streamed[1] / 1e9:.2f} B)" if streamed else "none",
            ratio,
        ]
    )
    table(
        f"Largest GPT that trains under --device-memory-limit {limit_gib:g}",
        ["resident", "streaming", "ratio"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", nargs="*", default=["optimizer", "ratio", "fsdp", "largest", "limit"])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds timed per measurement")
    parser.add_argument("--smoke", action="store_true", help="tiny GPT on any device: plumbing only")
    parser.add_argument("--optimizer-parameters", type=int, default=200_000_000)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name() if cuda else "CPU only"
    print(f"# weight streaming benchmark: {device}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}")
    if "optimizer" in args.parts:
        host_optimizer_throughput(args.optimizer_parameters)
    if args.smoke:
        ratio_part(
            "transformer",
            64,
            (256, 1024),
            min(args.duration, 3.0),
            size="debug",
            problem_options={"seq_len": 64},
        )
        return
    for part in ("ratio", "fsdp", "largest", "limit"):
        if part not in args.parts:
            continue
        if not cuda:
            print(f"\n## {part}: skipped — needs a CUDA device (this machine has none)")
            continue
        if part == "ratio":
            ratio_part(GPT, SEQ, TOKENS_PER_STEP, args.duration)
        elif part == "fsdp":
            fsdp_part(GPT, SEQ, args.duration)
        elif part == "largest":
            largest_part(args.duration)
        else:
            limit_part(16.0)


if __name__ == "__main__":
    main()
