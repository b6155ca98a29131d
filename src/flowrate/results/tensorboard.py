"""TensorBoard event files written at every sample point, with Cerebras' tag names.

Tags: ``local_samples_per_sec`` (Rate: the smoothed rate), ``avg_samples_per_sec`` (GlobalRate),
``avg_steps_per_sec`` (GlobalRate / batch size), ``loss`` (mean over the interval's steps), and
where the run has them ``mfu``, ``model_flops_per_sec``, ``power_w``,
``device_memory_allocated_bytes`` and ``process_rss_bytes``. The step axis is the number of timed
steps done. A checkpoint interval writes ``checkpoint_s`` only: its other figures are those of the
compute interval before it, and the next GlobalRate includes its time.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

from flowrate.errors import PathError
from flowrate.results.schema import IntervalRecord

# Optional per-interval figures written when present, under the record's own field names.
_OPTIONAL = ("mfu", "model_flops_per_sec", "power_w", "device_memory_allocated_bytes", "process_rss_bytes")


def scalars(record: IntervalRecord) -> dict[str, float]:
    """The tag -> value pairs one interval writes (the tests compare these with the event files)."""
    steps_done = record.first_step + record.steps
    if record.kind == "checkpoint":
        return {"checkpoint_s": record.seconds}
    values: dict[str, float] = {
        "local_samples_per_sec": record.rate_samples_per_sec,
        "avg_samples_per_sec": record.global_samples_per_sec,
        "avg_steps_per_sec": steps_done / record.elapsed_s if record.elapsed_s > 0 else 0.0,
    }
    if record.loss is not None:
        values["loss"] = record.loss
    for name in _OPTIONAL:
        value = getattr(record, name)
        if value is not None:
            values[name] = float(value)
    return values


class TensorBoardWriter:
    """Writes each IntervalRecord it is given; use as a context manager so files are flushed."""

    def __init__(self, logdir: str | Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        try:
            self._writer: Any = SummaryWriter(log_dir=str(logdir))
        except OSError as error:
            raise PathError(f"cannot write TensorBoard files to {logdir}", error) from None

    def write(self, record: IntervalRecord) -> None:
        step = record.first_step + record.steps
        for tag, value in scalars(record).items():
            self._writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> TensorBoardWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
