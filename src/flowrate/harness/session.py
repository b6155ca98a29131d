"""Measure your own training loop: wrap the model, the optimizer and the loader, in a few lines.

Seed 002's programming model: an existing PyTorch program adapts by wrapping what it already has,
and runs inside a session::

    import flowrate

    with flowrate.session("my-mlp", tensorboard="tb/") as s:
        model = s.model(model)                     # on the device (streamed, or in DDP, as configured)
        optimizer = s.optimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
        for inputs, targets in s.loader(loader):  # batches on the device, the input wait timed
            loss = F.cross_entropy(model(inputs), targets)
            s.step(loss)                           # backward, optimizer step, zero_grad: counted
    print(s.result.summary.samples_per_sec)        # a flowrate Result, recorded in the store

The loop is measured as `flowrate run` measures its own: the first ``preheat_steps`` steps are
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
import inspect
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch import nn

from flowrate.config import Execution, Mode, OptimizerName, Precision, RunConfig
from flowrate.errors import ConfigError, FlowrateError, NonFiniteLoss
from flowrate.execution.distributed import DataParallel, data_parallel
from flowrate.execution.precision import PrecisionPolicy, check_supported, matmul_settings
from flowrate.execution.resident import ResidentExecutor
from flowrate.execution.streaming import StreamingExecutor, check_streamable
from flowrate.harness.run import Executor, IntervalRecorder, Measurements, Prepared, assemble
from flowrate.measure.device import resolve_device, synchronizer
from flowrate.measure.energy import open_energy_meter
from flowrate.measure.env import collect_environment, device_name
from flowrate.measure.inputs import INPUT_BOUND_HIGH, INPUT_BOUND_WARN, input_bound_level
from flowrate.measure.loop import Interval, LoopPlan, LoopRecord, choose_sample_every
from flowrate.measure.memory import read_peaks, reset_peaks
from flowrate.measure.peaks import peak_for
from flowrate.measure.rate import RateTracker
from flowrate.problems.base import Batch, Problem
from flowrate.results.schema import IntervalRecord, Result
from flowrate.results.tensorboard import TensorBoardWriter

__all__ = ["Session", "session"]


class Session:
    """One measured run of the user's own loop: ``model``, ``optimizer``, ``loader``, ``step``."""

    def __init__(
        self,
        name: str = "loop",
        *,
        mode: str = "train",
        execution: str = "resident",
        precision: str = "fp32",
        device: str = "auto",
        preheat_steps: int = 5,
        steps: int | None = None,
        duration_s: float | None = None,
        sample_every: int | None = None,
        target_interval_s: float = 0.2,
        smoothing: float = 0.4,
        threads: int | None = None,
        recompute: bool = False,
        clip_grad_norm: float | None = None,
        flops_per_sample: int | None = None,
        tokens_per_sample: int | None = None,
        blocks: Callable[[nn.Module], list[nn.Module]] | None = None,
        tensorboard: str | Path | None = None,
        store: bool | str | Path = True,
        tags: Sequence[str] = (),
        dist_timeout_s: float = 300.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """``flops_per_sample``: the model's forward FLOPs per sample (2 per multiply-add), for
        FLOP/s and MFU; ``tokens_per_sample`` for tokens/s; ``store``: False, True (the default
        store) or a store path."""
        self.config = RunConfig(
            problem=f"loop:{name}",
            mode=Mode.parse(mode),
            precision=Precision.parse(precision),
            execution=Execution.parse(execution),
            device=device,
            threads=threads,
            preheat_steps=preheat_steps,
            steps=steps,
            duration_s=duration_s or RunConfig.duration_s,
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
        self.problem = _LoopProblem(name, flops_per_sample, tokens_per_sample, blocks)
        self._tensorboard = tensorboard
        self._store = store
        self._tags = tuple(tags)
        self._clock = clock
        self._stack = contextlib.ExitStack()
        self._result: Result | None = None
        self._model: nn.Module | None = None
        self._executor: Executor | None = None
        self._dp: DataParallel | None = None
        self._waits: _Waits | None = None  # set when s.loader() is used
        self._sharding: str | None = None
        self._last_samples: int | None = None
        self._batch_size: int | None = None
        # the loop's progress
        self._steps_done = 0
        self._step_times: list[float] = []
        self._mark = 0.0
        self._started = False
        self._every = 1
        self._pending: list[torch.Tensor] = []
        self._interval_steps = 0
        self._interval_first = 0
        self._intervals: list[Interval] = []
        self._losses: list[float] = []
        self._done = False

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
        if config.threads is not None:
            saved = torch.get_num_threads()
            torch.set_num_threads(config.threads)
            stack.callback(torch.set_num_threads, saved)
        self._dp = dp = stack.enter_context(data_parallel(config))
        self.device = dp.device if dp is not None else resolve_device(config.device)
        check_supported(config.precision, self.device)
        if config.execution is Execution.STREAMING:
            check_streamable(config.precision, self.device)
        if dp is not None:
            dp.check_same_configuration(config, self.problem)
        self.policy = PrecisionPolicy(config.precision, self.device)
        stack.enter_context(matmul_settings(config.precision))
        self._sync = synchronizer(self.device)
        meter = open_energy_meter(self.device, clock=self._clock)
        self._meter = stack.enter_context(contextlib.closing(meter))
        self._peak = peak_for(device_name(self.device), config.precision)
        self._listeners: list[Callable[[IntervalRecord], None]] = []
        if self._tensorboard is not None and dp is None:  # data-parallel: rank 0 writes the merged run
            self._listeners.append(stack.enter_context(TensorBoardWriter(self._tensorboard)).write)
        self._rss_reset = reset_peaks(self.device)
        self._mark = self._clock()

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
        return self._done

    # --- wrapping the user's objects ----------------------------------------------------------------

    def model(self, module: nn.Module) -> nn.Module:
        """The model to call in the loop: on the device (resident), streamed from host memory
        (streaming), in DistributedDataParallel under torchrun (resident training)."""
        if self._model is not None:
            raise FlowrateError("a session measures one model: call s.model() once")
        self.problem.module = module
        self.problem.counted = sum(p.numel() for p in module.parameters() if p.requires_grad)
        if self.policy.autocast_dtype is not None:
            _forward_under(module, self.policy)
        mode = self.config.settled_mode
        if self.config.execution is Execution.RESIDENT:
            module = module.to(device=self.device, dtype=self.policy.weight_dtype)
            if mode is Mode.TRAIN and self._dp is not None:
                module = self._dp.wrap(module)
        self._model = module
        if mode is Mode.INFER:
            self._build(OptimizerName.ADAMW, self.config.learning_rate)
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
            optimizer=_known_optimizer(optimizer) or self.config.optimizer, learning_rate=learning_rate
        )
        if self.config.execution is Execution.STREAMING:
            self._build(_same_kind(optimizer), learning_rate)
        else:
            self._build(optimizer, learning_rate)
        return optimizer

    def _build(self, optimizer: Any, learning_rate: float) -> None:
        assert self._model is not None
        dp, mode = self._dp, self.config.settled_mode
        if self.config.execution is Execution.STREAMING:
            streaming = StreamingExecutor(
                self.problem,
                self._model,
                self.policy,
                mode,
                optimizer,
                learning_rate,
                recompute=self.config.recompute,
                clip_grad_norm=self.config.clip_grad_norm,
                reduce_gradients=dp.average_host_gradients if dp is not None else None,
            )
            self._stack.callback(streaming.finish)  # stop its host thread, whatever happens
            streaming.begin_step()
            self._executor = streaming
        else:
            self._executor = ResidentExecutor(
                self.problem,
                self._model,
                self.policy,
                mode,
                optimizer,
                learning_rate,
                clip_grad_norm=self.config.clip_grad_norm,
            )

    def loader(self, batches: Iterable[Any]) -> Iterator[Any]:
        """The loop's batches, on the device, until the loader ends or the session is done.

        The wait for each batch is timed (the input-bound share). Under torchrun a DataLoader over
        a map-style dataset is given a DistributedSampler, so each rank reads its own share.
        """
        waits = self._waits = self._waits or _Waits()
        iterator = iter(self._shard(batches))
        while not self._done:
            start = self._clock()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            waits.wait_s += self._clock() - start
            self._last_samples = _samples_in(batch)
            yield _to_device(batch, self.device)

    def _shard(self, batches: Iterable[Any]) -> Iterable[Any]:
        from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, RandomSampler

        dp = self._dp
        if dp is None:
            self._sharding = None
            return batches
        if not isinstance(batches, DataLoader):
            self._sharding = "the loop's own (not a DataLoader)"
            return batches
        if isinstance(batches.sampler, DistributedSampler):
            self._sharding = "the loop's own DistributedSampler"
            return batches
        if isinstance(batches.dataset, IterableDataset) or batches.batch_size is None:
            self._sharding = "the loop's own (an iterable dataset or a batch sampler is not re-sharded)"
            return batches
        self._sharding = "DistributedSampler (added by flowrate)"
        sampler: DistributedSampler[Any] = DistributedSampler(
            batches.dataset,
            num_replicas=dp.world_size,
            rank=dp.rank,
            shuffle=isinstance(batches.sampler, RandomSampler),
            drop_last=batches.drop_last,
        )
        return DataLoader(
            batches.dataset,
            batch_size=batches.batch_size,
            sampler=sampler,
            num_workers=batches.num_workers,
            collate_fn=batches.collate_fn,
            pin_memory=batches.pin_memory,
            drop_last=batches.drop_last,
            timeout=batches.timeout,
            worker_init_fn=batches.worker_init_fn,
            multiprocessing_context=batches.multiprocessing_context,
            generator=batches.generator,
            prefetch_factor=batches.prefetch_factor,
            persistent_workers=batches.persistent_workers,
        )

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
        if self._done:  # measured enough: the loop may go on training, uncounted
            return
        self._steps_done += 1
        if not self._started:
            self._preheat_step(value)
            return
        self._batch_size = self._batch_size or samples
        self._tracker.add(samples)
        if value is not None:
            self._pending.append(value)
        self._interval_steps += 1
        if self._interval_steps >= self._every or self._reached_steps():
            self._sample_point()

    def _update(self, executor: Executor, loss: torch.Tensor | None) -> torch.Tensor | None:
        train = self.config.settled_mode is Mode.TRAIN
        if loss is None:
            if train:
                raise FlowrateError("a training step needs its loss: s.step(loss)")
            return None
        if loss.dim() != 0:
            raise FlowrateError("s.step(loss) takes the scalar loss; an inference loop may call s.step()")
        if isinstance(executor, StreamingExecutor):
            value = executor.finish_step(loss)
            executor.begin_step()
            return value
        return executor.update(loss) if train else loss.detach()

    def _preheat_step(self, value: torch.Tensor | None) -> None:
        """Untimed: synchronize, check the loss, time the step; the last one starts the clock."""
        self._sync()
        if value is not None and not torch.isfinite(value).item():
            raise NonFiniteLoss(self._steps_done - 1, float(value), preheat=True)
        now = self._clock()
        self._step_times.append(now - self._mark)
        self._mark = now
        if self._steps_done >= self.config.preheat_steps:
            self._start_clock()

    def _start_clock(self) -> None:
        step_s = statistics.median(self._step_times[1:]) if len(self._step_times) > 1 else None
        plan = LoopPlan(
            preheat_steps=self.config.preheat_steps,
            steps=self.config.steps,
            min_steps=self.config.min_steps,
            duration_s=self.config.duration_s,
            sample_every=self.config.sample_every,
            target_interval_s=self.config.target_interval_s,
            smoothing=self.config.smoothing,
        )
        self._every = choose_sample_every(plan, step_s)
        if self._dp is not None:
            self._every = self._dp.sample_every(self._every)
        self._step_s = step_s
        mode = self.config.settled_mode
        self._recorder = IntervalRecorder(
            self.problem.flops_per_sample(mode),
            self._peak.flops,
            self.device,
            self._meter,
            self._listeners,
            self._waits,
        )
        self._tracker = RateTracker(self.config.smoothing, self._clock)
        self._sync()
        self._tracker.start()
        self._recorder.start()
        self._started = True
        self._interval_first = self._steps_done

    def _reached_steps(self) -> bool:
        steps = self.config.steps
        return steps is not None and self._steps_done - self.config.preheat_steps >= steps

    def _sample_point(self) -> None:
        self._sync()
        reading = self._tracker.read()
        values = torch.stack(self._pending).float().tolist() if self._pending else []
        first = self._interval_first - self.config.preheat_steps
        for offset, value in enumerate(values):
            if not math.isfinite(value):
                raise NonFiniteLoss(first + offset, value)
        self._losses.extend(values)
        interval = Interval(
            index=len(self._intervals),
            first_step=first,
            steps=self._interval_steps,
            reading=reading,
            loss=statistics.fmean(values) if values else None,
        )
        self._intervals.append(interval)
        self._recorder(interval)
        self._pending = []
        self._interval_steps = 0
        self._interval_first = self._steps_done
        finished = self._reached_steps() or (
            self._duration_s is not None
            and self._steps_done - self.config.preheat_steps >= self.config.min_steps
            and reading.elapsed_s >= self._duration_s
        )
        if self._dp is not None and self._duration_s is not None and self.config.steps is None:
            finished = self._dp.finished(finished)
        self._done = finished

    # --- the result -----------------------------------------------------------------------------------

    def _finish(self) -> None:
        if not self._started or not (self._intervals or self._interval_steps):
            raise FlowrateError(
                f"the loop ran {self._steps_done} step(s), none timed: the first {self.config.preheat_steps} "
                "are preheat; give it more batches or fewer preheat_steps"
            )
        if self._interval_steps:
            self._sample_point()  # the steps since the last sample point
        assert self._executor is not None and self._model is not None
        energy = self._meter.stop()
        memory = read_peaks(self.device, self._rss_reset)
        timed = sum(i.steps for i in self._intervals)
        streaming = None
        if isinstance(self._executor, StreamingExecutor):
            self._executor.finish()
            streaming = self._executor.report(timed)
        config = self.config.replace(
            batch_size=self._batch_size,
            steps=self.config.steps or (None if self._duration_s else timed),
        )
        built = self.problem.parameter_count()
        prepared = Prepared(self._executor, [], self._batch_size or 0, [], built, self.problem.block_count())
        record = LoopRecord(self._intervals, self._losses, sum(self._step_times), self._step_s, self._every)
        measured = Measurements(
            self._recorder.records,
            None,
            None,
            energy,
            memory,
            self._peak,
            None,
            True,
            streaming,
            self._input_section(),
        )
        result = assemble(config, self.problem, prepared, record, measured, collect_environment(self.device))
        if not self.problem.forward_flops_per_sample():
            result.flops["reason"] = "give session(flops_per_sample=…), the forward FLOPs of one sample"
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
        self._result = result

    def _input_section(self) -> tuple[dict[str, Any], list[str]] | None:
        if self._waits is None:
            return None
        records = [r for r in self._recorder.records if r.input_wait_s is not None]
        wait = sum(r.input_wait_s or 0.0 for r in records)
        seconds = sum(r.seconds for r in records)
        share = wait / seconds if seconds > 0 else 0.0
        level = input_bound_level(share)
        section = {
            "dataset": "the loop's loader",
            "sharding": self._sharding,
            "input_wait_s": wait,
            "input_bound_share": share,
            "input_bound": level,
        }
        warnings = []
        if level != "no":
            threshold = INPUT_BOUND_HIGH if level == "highly" else INPUT_BOUND_WARN
            warnings.append(
                f"{level} input-bound: {share:.1%} of the loop's time went to waiting for the loader's next "
                f"batch (≥ {threshold:.0%}); give its DataLoader more num_workers, pin_memory=True or a "
                "larger prefetch_factor"
            )
        return section, warnings


# `flowrate.session(...)`, as the seed's programs write it: the Session itself.
session = Session


class _Waits:
    """The loader's wait for batches since the last sample point (the recorder's InputWaits)."""

    def __init__(self) -> None:
        self.wait_s = 0.0

    def start(self) -> None:
        self.wait_s = 0.0

    def take_wait(self) -> float:
        wait, self.wait_s = self.wait_s, 0.0
        return wait


class _LoopProblem(Problem):
    """The user's model as flowrate's Problem: its name, counts and blocks (the loop has the rest)."""

    size = "loop"

    def __init__(
        self,
        name: str,
        flops: int | None,
        tokens: int | None,
        blocks: Callable[[nn.Module], list[nn.Module]] | None,
    ) -> None:
        self.name = name
        self.flops = flops or 0
        self.tokens = tokens
        self.declared_blocks = blocks
        self.module: nn.Module | None = None
        self.counted = 0  # trainable parameters, counted before streaming moved them to the host
        self.optimizer: str | None = None

    def build_model(self) -> nn.Module:
        raise FlowrateError("a session measures the user's model; it builds none")

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        raise FlowrateError("a session measures the user's batches; it makes none")

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        raise FlowrateError("a session's loss is computed by the user's loop")

    def parameter_count(self) -> int:
        return self.counted

    def forward_flops_per_sample(self) -> int:
        return self.flops

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        if self.declared_blocks is not None:
            return self.declared_blocks(model)
        return super().blocks(model)

    def block_count(self) -> int | None:
        """How many blocks the user's model declares (None: none, which resident runs allow)."""
        if self.module is None:
            return None
        try:
            return len(self.blocks(self.module))
        except FlowrateError:
            return None

    @property
    def tokens_per_sample(self) -> int | None:
        return self.tokens

    def describe(self) -> dict[str, Any]:
        model = type(self.module).__name__ if self.module is not None else None
        return {"loop": "user", "model": model, "optimizer": self.optimizer}


def _forward_under(module: nn.Module, policy: PrecisionPolicy) -> None:
    """Run ``module``'s forward under the policy's autocast (its loss may run outside it)."""
    forward = module.forward

    def autocast_forward(*args: Any, **kwargs: Any) -> Any:
        with policy.autocast():
            return forward(*args, **kwargs)

    module.forward = autocast_forward


def _same_kind(optimizer: torch.optim.Optimizer) -> Callable[[list[nn.Parameter]], torch.optim.Optimizer]:
    """Makes optimizers of ``optimizer``'s class with its hyper-parameters (those its constructor
    takes: ``defaults`` may hold more, as AdamW's holds Adam's decoupled_weight_decay)."""
    kind = type(optimizer)
    accepted = inspect.signature(kind).parameters
    defaults = {k: v for k, v in optimizer.defaults.items() if k in accepted}

    def make(params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return kind(params, **defaults)

    return make


def _known_optimizer(optimizer: torch.optim.Optimizer) -> OptimizerName | None:
    """The RunConfig name of a user's optimizer, where flowrate has one (its class is recorded too)."""
    if type(optimizer) is torch.optim.AdamW:
        return OptimizerName.ADAMW
    if type(optimizer) is torch.optim.SGD:
        return OptimizerName.SGD
    return None


def _samples_in(batch: Any) -> int | None:
    """The batch dimension of the first tensor in ``batch`` (a tensor, tuple, list or dict)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else None
    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, tuple | list) else ()
    for item in items:
        found = _samples_in(item)
        if found is not None:
            return found
    return None


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple | list):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch
