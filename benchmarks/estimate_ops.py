"""Where does an estimate miss? The cost model's time per aten op beside the profiler's.

For one configuration on this CPU: the traced step's ops priced by the cost model (each op's
roofline, max(compute, memory), summed by aten op name; dispatch and the framework's terms
left out, as the profiler's self times leave them out too), beside torch.profiler's self CPU
time per aten op over N real steps of a plain loop (the problem's model, fused AdamW when
training). An op the model prices far below the profiler is where to look; an op only the
profiler shows runs inside another (addmm's bias copy) or is the framework's.

    python benchmarks/estimate_ops.py -p transformer --size mini --mode infer --batch-size 8
    python benchmarks/estimate_ops.py -p bert-base --size default -O seq_len=64 --mode train --batch-size 2

Needs a calibration of this CPU (`flowrate estimate --calibrate`, or FLOWRATE_CALIBRATION).
"""

from __future__ import annotations

import argparse
import collections
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from flowrate.config import FreedMemory, RunConfig
from flowrate.estimate.cost import estimate_step, op_cost
from flowrate.estimate.devices import local_device
from flowrate.estimate.report import trace_for
from flowrate.measure import freed_memory
from flowrate.problems.base import Problem
from flowrate.problems.registry import get_problem
from record import Figure, record  # beside this script


def predicted(config: RunConfig, problem: Problem, batch: int) -> tuple[float, dict[str, tuple[int, float]]]:
    """The estimate's step seconds, and (ops, roofline seconds) per aten op name."""
    device = local_device(torch.device("cpu"))
    trace = trace_for(config, problem, batch, device)
    by_op: dict[str, tuple[int, float]] = {}
    for op in trace.ops:
        cost = op_cost(op, device, config.settled_mode.value, trace.saved_bytes)
        name = op.name.split(".")[1] if op.name.startswith("aten.") else op.name
        count, seconds = by_op.get(name, (0, 0.0))
        by_op[name] = (count + 1, seconds + max(cost.compute_s, cost.memory_s))
    return estimate_step(trace, device).step_s, by_op


def plain_step(problem: Problem, batch: int, train: bool) -> Callable[[], None]:
    generator = torch.Generator().manual_seed(0)
    model = problem.build_model().train(train)
    data = problem.make_batch(batch, torch.device("cpu"), generator)
    if not train:

        def infer() -> None:
            with torch.inference_mode():
                problem.loss(model, data)

        return infer
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)

    def step() -> None:
        problem.loss(model, data).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def profiled(step: Callable[[], None], steps: int) -> tuple[float, dict[str, tuple[float, float]]]:
    """Seconds per step unprofiled, and (calls, self seconds) per aten op per step, profiled."""
    for _ in range(5):
        step()
    started = time.perf_counter()
    for _ in range(steps):
        step()
    wall = (time.perf_counter() - started) / steps
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    by_op: dict[str, tuple[float, float]] = collections.defaultdict(lambda: (0.0, 0.0))
    for event in prof.key_averages():
        if event.key.startswith("aten::"):
            calls, seconds = by_op[event.key[6:]]
            by_op[event.key[6:]] = (
                calls + event.count / steps,
                seconds + event.self_cpu_time_total / 1e6 / steps,
            )
    return wall, dict(by_op)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--problem", default="transformer")
    parser.add_argument("--size", default="mini")
    parser.add_argument("--mode", default="infer", choices=("train", "infer"))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("-O", "--option", action="append", default=[], help="shape option KEY=VALUE")
    parser.add_argument("--freed-memory", default="keep", choices=[h.value for h in FreedMemory])
    parser.add_argument("--steps", type=int, default=20, help="steps timed, then profiled")
    parser.add_argument("--top", type=int, default=25, help="ops shown, by the larger of the two times")
    args = parser.parse_args()
    freed_memory.apply(FreedMemory(args.freed_memory))
    options = {key: int(value) for key, value in (o.split("=", 1) for o in args.option)}
    problem = get_problem(args.problem, args.size, options)
    config = RunConfig(problem=args.problem, size=args.size, problem_options=options, mode=args.mode)
    config = config.for_problem(problem.modes, problem.default_mode, problem.name)
    step_s, model_ops = predicted(config, problem, args.batch_size)
    wall, real_ops = profiled(plain_step(problem, args.batch_size, args.mode == "train"), args.steps)
    print(f"host memory: {freed_memory.describe()}")
    measured = f"measured {wall * 1e3:.2f} ms (unprofiled, {args.steps} steps)"
    print(f"step: predicted {step_s * 1e3:.2f} ms, {measured}")
    print(f"{'aten op':48s} {'ops':>5s} {'calls':>6s} {'model ms':>9s} {'self ms':>9s}")
    names = set(model_ops) | set(real_ops)

    def larger(name: str) -> float:
        return max(model_ops.get(name, (0, 0.0))[1], real_ops.get(name, (0.0, 0.0))[1])

    for name in sorted(names, key=larger, reverse=True)[: args.top]:
        count, seconds = model_ops.get(name, (0, 0.0))
        calls, self_s = real_ops.get(name, (0.0, 0.0))
        print(f"{name:48s} {count:5d} {calls:6.0f} {seconds * 1e3:9.3f} {self_s * 1e3:9.3f}")
    model_total = sum(s for _, s in model_ops.values()) * 1e3
    real_total = sum(s for _, s in real_ops.values()) * 1e3
    print(f"sum: model's rooflines {model_total:.2f} ms, profiler's aten self times {real_total:.2f} ms")
    figures = [
        Figure("step, predicted", round(step_s * 1e3, 4), "ms"),
        Figure("step, measured", round(wall * 1e3, 4), "ms", note=f"unprofiled, {args.steps} steps"),
        Figure("predicted / measured", round(step_s / wall, 4), "ratio"),
        Figure("aten ops, the model's rooflines", round(model_total, 4), "ms", note="summed by aten op"),
        Figure("aten ops, the profiler's self times", round(real_total, 4), "ms", note="summed by aten op"),
    ]
    case = f"{args.problem}/{args.size} {args.mode}, batch {args.batch_size}"
    case += "".join(f" -O {o}" for o in args.option)
    record("estimate_ops", figures, note=f"{case}; host memory {freed_memory.describe()}")


if __name__ == "__main__":
    main()
