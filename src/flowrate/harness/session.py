"""Measure your own training loop: wrap the model, the optimizer and the loader, in a few lines.

An existing PyTorch program adapts by wrapping what it already has, and runs inside a session::

    import flowrate

    with flowrate.session("my-mlp", tensorboard="tb/") as s:
        model = s.model(model)                     # on the device (streamed, or in DDP, as configured)
        optimizer = s.optimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
        for inputs, targets in s.loader(loader):  # batches on the device, the input wait timed
            loss = F.cross_entropy(model(inputs), targets)
            s.step(loss)                           # backward, optimizer step, zero_grad: counted
    print(s.result.summary.samples_per_sec)        # a flowrate Result, recorded in the store

The loop is measured by the clock that measures `flowrate run`'s (flowrate.measure.loop's
LoopClock, fed one step at a time by s.step()): the first ``preheat_steps`` steps are
synchronized and timed to choose the sample interval, then the clock starts with the device idle
and the device is synchronized only at sample points, where Rate, GlobalRate, the interval's
mean loss, power and memory are recorded (and written to TensorBoard). The clock runs over the
user's whole loop — loading, forward, loss, whatever else it does — so the figure is the loop's
own throughput. The session ends when the loop does, or when ``steps`` / ``duration_s`` are met
(the loader then stops yielding). The Result goes to the results store unless ``store=False``.

``execution="streaming"`` streams the weights of a model that declares its blocks (a ``blocks``
ModuleList, or ``blocks=`` a function returning them): the host optimizer is built per block from
the user's optimizer's class and hyper-parameters (its param groups collapse to its defaults, and
a learning-rate scheduler on it has no effect). Under torchrun the session is data-parallel with
no change to the loop: the model is wrapped in DistributedDataParallel (streaming averages host
gradients), a DataLoader over a map-style dataset gets a DistributedSampler, and the Result sums
every rank's throughput. ``precision`` runs the model's forward under autocast (fp16 with loss
scaling); a loss computed outside the model runs outside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch import nn

from flowrate.config import Execution, FreedMemory, Mode, Precision, RunConfig
from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.base import Executor
from flowrate.execution.distributed import DataParallel, data_parallel
from flowrate.execution.factory import make_executor, run_device
from flowrate.execution.precision import PrecisionPolicy, matmul_settings
from flowrate.harness.loop_batches import LoaderWaits, input_section, samples_in, shard, to_device
from flowrate.harness.loop_problem import LoopProblem, forward_under, known_optimizer
from flowrate.harness.recorder import IntervalRecorder
from flowrate.measure import freed_memory
from flowrate.measure.device import synchronizer, torch_threads
from flowrate.measure.energy import open_energy_meter
from flowrate.measure.env import collect_environment, device_name
from flowrate.measure.loop import Interval, LoopClock, LoopPlan
from flowrate.measure.memory import read_peaks, reset_peaks
from flowrate.measure.peaks import peak_for
from flowrate.results.assemble import Built, Measurements, assemble
from flowrate.results.schema import IntervalRecord, Result
from flowrate.results.tensorboard import TensorBoardWriter

__all__ = ["Session", "session"]


class Session:
    """One measured run of the user's own loop: ``model``, ``optimizer``, ``loader``, ``step``."""

    # Set on entering (the data-parallel group, the loop's clock), when the clock starts (the
    # recorder), and by s.loader() (its waits, how it is divided among ranks, the last batch's size).
    _dp: DataParallel | None = None
    _loop: LoopClock | None = None
    _recorder: IntervalRecorder | None = None
    _waits: LoaderWaits | None = None
    _sharding: str | None = None
    _last_samples: int | None = None

    def __init__(
        self,
        name: str = "loop",
        *,
        mode: str = "train",
        execution: str = RunConfig.execution,
        precision: str = RunConfig.precision,
        device: str = RunConfig.device,
        preheat_steps: int = RunConfig.preheat_steps,
        steps: int | None = None,
        duration_s: float | None = None,
        sample_every: int | None = None,
        target_interval_s: float = RunConfig.target_interval_s,
        smoothing: float = RunConfig.smoothing,
        threads: int | None = None,
        freed_memory: str = RunConfig.freed_memory,
        recompute: bool = RunConfig.recompute,
        clip_grad_norm: float | None = None,
        flops_per_sample: int | None = None,
        tokens_per_sample: int | None = None,
        blocks: Callable[[nn.Module], list[nn.Module]] | None = None,
        tensorboard: str | Path | None = None,
        store: bool | str | Path = True,
        tags: Sequence[str] = (),
        dist_timeout_s: float = RunConfig.dist_timeout_s,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """The run's settings mean what RunConfig's fields of the same names mean, with their
        defaults (a session trains unless ``mode`` says otherwise, and measures until its loop ends
        unless ``steps`` or ``duration_s`` is given). ``flops_per_sample``: the model's forward
        FLOPs per sample (2 per multiply-add), for FLOP/s and MFU; ``tokens_per_sample`` for
        tokens/s; ``store``: False, True (the default store) or a store path; ``freed_memory``:
        release (the C library's policy, as a plain process) or keep (flowrate.measure.freed_memory)."""
        self.config = RunConfig(
            problem=f"loop:{name}",
            mode=Mode.parse(mode),
            precision=Precision.parse(precision),
            execution=Execution.parse(execution),
            device=device,
            threads=threads,
            freed_memory=FreedMemory.parse(freed_memory),
            preheat_steps=preheat_steps,
            steps=steps,
            duration_s=duration_s or RunConfig.duration_s,  # recorded; the loop ends by its own only if given
            sample_every=sample_every,
            target_interval_s=target_interval_s,
            smoothing=smoothing,
            recompute=recompute,
            clip_grad_norm=clip_grad_norm,
            dist_timeout_s=dist_timeout_s,
        )
        if preheat_steps < 1:
            raise ConfigError("preheat_steps", "a session needs 1 or more: its clock starts when a step ends")
        self._duration_s = duration_s
        self.problem = LoopProblem(name, flops_per_sample, tokens_per_sample, blocks)
        self._tensorboard, self._store, self._tags = tensorboard, store, tuple(tags)
        self._clock = clock
        self._stack = contextlib.ExitStack()
        self._result: Result | None = None
        self._model: nn.Module | None = None
        self._executor: Executor | None = None
        self._batch_size: int | None = None
        self._kept_earlier: str | None = None  # freed_memory.apply's warning

    # --- entering and leaving ---------------------------------------------------------------------

    def __enter__(self) -> Session:
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _open(self) -> None:
        config = self.config
        stack = self._stack
        self._kept_earlier = freed_memory.apply(config.freed_memory)  # a warning, or None
        stack.enter_context(torch_threads(config.threads))
        self._dp = dp = stack.enter_context(data_parallel(config))
        self.device = run_device(config, dp)
        if dp is not None:
            dp.check_same_configuration(config, self.problem)
        self.policy = PrecisionPolicy(config.precision, self.device)
        stack.enter_context(matmul_settings(config.precision))
        meter = open_energy_meter(self.device, clock=self._clock)
        self._meter = stack.enter_context(contextlib.closing(meter))
        self._peak = peak_for(device_name(self.device), config.precision)
        self._listeners: list[Callable[[IntervalRecord], None]] = []
        if self._tensorboard is not None and dp is None:  # data-parallel: rank 0 writes the merged run
            self._listeners.append(stack.enter_context(TensorBoardWriter(self._tensorboard)).write)
        self._rss_reset = reset_peaks(self.device)
        # the loop's own measurement, as `flowrate run`'s; the first preheat step is timed from here
        plan = dataclasses.replace(LoopPlan.from_config(config), duration_s=self._duration_s)
        self._loop = LoopClock(
            plan,
            synchronizer(self.device),
            self._clock,
            on_interval=self._record,
            on_start=self._start_recording,
            consensus=dp,
        )

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> bool:
        """Assemble and record the Result after a loop that ended well; clean up in any case (a
        data-parallel failure leaves as one line naming the rank that stopped responding)."""
        if kind is None:
            try:
                self._finish()
            except BaseException:
                self._stack.__exit__(*sys.exc_info())
                raise
        return bool(self._stack.__exit__(kind, error, tb))

    @property
    def result(self) -> Result:
        """The run's Result, once the ``with`` block has ended."""
        if self._result is None:
            raise FlowrateError("the session's result exists once its `with` block has ended without error")
        return self._result

    @property
    def rank(self) -> int:
        return self._dp.rank if self._dp is not None else 0

    @property
    def world_size(self) -> int:
        return self._dp.world_size if self._dp is not None else 1

    @property
    def done(self) -> bool:
        """True once ``steps`` or ``duration_s`` are met (s.loader() stops by itself then)."""
        return self._loop is not None and self._loop.done

    # --- wrapping the user's objects ----------------------------------------------------------------

    def model(self, module: nn.Module) -> nn.Module:
        """The model to call in the loop: on the device (resident), streamed from host memory
        (streaming), in DistributedDataParallel under torchrun (resident training)."""
        if self._model is not None:
            raise FlowrateError("a session measures one model: call s.model() once")
        self.problem.module = module
        self.problem.counted = sum(p.numel() for p in module.parameters() if p.requires_grad)
        if self.policy.autocast_dtype is not None:
            forward_under(module, self.policy)
        mode = self.config.settled_mode
        if self.config.execution is Execution.RESIDENT:
            module = module.to(device=self.device, dtype=self.policy.weight_dtype)
            if mode is Mode.TRAIN and self._dp is not None:
                module = self._dp.wrap(module)
        self._model = module
        if mode is Mode.INFER:
            self._build(None)
        return module

    def optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """The user's optimizer, stepped by s.step(). Streaming builds a host optimizer per block
        from its class and hyper-parameters instead."""
        if self._model is None:
            raise FlowrateError("call s.model(model) before s.optimizer(...), which needs its parameters")
        if self.config.settled_mode is not Mode.TRAIN:
            raise FlowrateError("an inference session has no optimizer: leave s.optimizer() out")
        lr = optimizer.defaults.get("lr")
        learning_rate = float(lr) if isinstance(lr, int | float) and lr > 0 else self.config.learning_rate
        self.problem.optimizer = f"{type(optimizer).__name__}(lr={learning_rate:g})"
        self.config = self.config.replace(
            optimizer=known_optimizer(optimizer) or self.config.optimizer, learning_rate=learning_rate
        )
        self._build(optimizer)
        return optimizer

    def _build(self, optimizer: torch.optim.Optimizer | None) -> None:
        """The executor the config names, over the user's model (and optimizer, when training)."""
        assert self._model is not None
        executor = make_executor(
            self.config, self.problem, self._model, self.policy, optimizer=optimizer, dp=self._dp
        )
        self._stack.callback(executor.finish)  # stop its helper threads, whatever happens
        executor.begin_step()
        self._executor = executor

    def loader(self, batches: Iterable[Any]) -> Iterator[Any]:
        """The loop's batches, on the device, until the loader ends or the session is done.

        The wait for each batch is timed (the input-bound share). Under torchrun a DataLoader over
        a map-style dataset is given a DistributedSampler, so each rank reads its own share.
        """
        waits = self._waits = self._waits or LoaderWaits()
        mine, self._sharding = shard(batches, self._dp)
        iterator = iter(mine)
        while not self.done:
            start = self._clock()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            waits.wait_s += self._clock() - start
            self._last_samples = samples_in(batch)
            yield to_device(batch, self.device)

    # --- the step -----------------------------------------------------------------------------------

    def step(self, loss: torch.Tensor | None = None, samples: int | None = None) -> None:
        """End one step: backward and optimizer step from ``loss`` (training), and count it.

        ``samples`` defaults to the size of the last batch s.loader() gave. An inference loop may
        pass its loss (recorded) or nothing (only counted).
        """
        executor = self._executor
        if executor is None:
            missing = "s.model(model)" if self._model is None else "s.optimizer(optimizer)"
            raise FlowrateError(f"call {missing} before the first s.step()")
        samples = samples if samples is not None else self._last_samples
        if samples is None:
            raise FlowrateError("s.step() needs samples=N when the batches do not come from s.loader()")
        value = self._update(executor, loss)
        loop = self._loop
        assert loop is not None  # set on entering, before any executor exists
        if loop.done:  # measured enough: the loop may go on training, uncounted
            return
        if loop.started:
            self._batch_size = self._batch_size or samples
        loop.on_step(value, samples)

    def _update(self, executor: Executor, loss: torch.Tensor | None) -> torch.Tensor | None:
        train = self.config.settled_mode is Mode.TRAIN
        if loss is None:
            if train:
                raise FlowrateError("a training step needs its loss: s.step(loss)")
            return None
        if loss.dim() != 0:
            raise FlowrateError("s.step(loss) takes the scalar loss; an inference loop may call s.step()")
        value = executor.update(loss)
        executor.begin_step()
        return value

    def _start_recording(self) -> None:
        """The clock has started: each interval's record is made from here on (the loader's waits too)."""
        mode = self.config.settled_mode
        flops = self.problem.flops_per_sample(mode)
        self._recorder = IntervalRecorder(
            flops, self._peak.flops, self.device, self._meter, self._listeners, self._waits
        )
        self._recorder.start()

    def _record(self, interval: Interval) -> None:
        assert self._recorder is not None
        self._recorder(interval)

    # --- the result -----------------------------------------------------------------------------------

    def _finish(self) -> None:
        loop, executor, recorder = self._loop, self._executor, self._recorder
        assert loop is not None
        loop.flush()  # the steps since the last sample point
        if not loop.intervals:
            raise FlowrateError(
                f"the loop ran {loop.steps} step(s), none timed: the first {self.config.preheat_steps} "
                "are preheat; give it more batches or fewer preheat_steps"
            )
        assert executor is not None and recorder is not None
        energy = self._meter.stop()
        memory = read_peaks(self.device, self._rss_reset)
        record = loop.record()
        timed = sum(i.steps for i in record.intervals)
        executor.finish()
        config = self.config.replace(
            batch_size=self._batch_size,
            steps=self.config.steps or (None if self._duration_s else timed),
        )
        built = Built(self._batch_size or 0, self.problem.parameter_count(), self.problem.block_count())
        measured = Measurements(
            intervals=recorder.records,
            executed_flops_per_sample=None,
            measured_peak_flops=None,
            energy=energy,
            memory=memory,
            peak=self._peak,
            count_warning=None,
            is_benchmark=True,
            streaming=executor.report(timed),
            inputs=input_section(recorder.records, self._sharding) if self._waits is not None else None,
            executor_warnings=[*executor.warnings, *filter(None, [self._kept_earlier])],
        )
        result = assemble(config, self.problem, built, record, measured, collect_environment(self.device))
        if not self.problem.forward_flops_per_sample():
            why = "give session(flops_per_sample=…), the forward FLOPs of one sample"
            result = dataclasses.replace(result, flops=dataclasses.replace(result.flops, reason=why))
        self._result = self._publish(result)

    def _publish(self, result: Result) -> Result:
        """Merge the ranks' Results (rank 0 writes TensorBoard), record it in the store; the merged one."""
        if self._dp is not None:
            result = self._dp.merge(result)
            if self._tensorboard is not None and self._dp.rank == 0:
                with TensorBoardWriter(self._tensorboard) as board:
                    for interval in result.intervals:
                        board.write(interval)
        if self._store is not False and self.rank == 0:
            from flowrate.results.store import Store

            with Store(None if self._store is True else self._store) as opened:
                opened.add(result, self._tags)
        return result


# `flowrate.session(...)`, as the seed's programs write it: the Session itself.
session = Session
