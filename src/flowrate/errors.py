"""The one exception type for a user's mistake.

The CLI turns a ``FlowrateError`` into one line on stderr and a non-zero exit code, never a
traceback. Anything else that escapes is a bug in flowrate and keeps its traceback.
"""

from __future__ import annotations


class FlowrateError(Exception):
    """Bad input or an unmet requirement, explained in one line that says how to fix it."""


class ConfigError(FlowrateError):
    """A configuration field holds a value flowrate cannot run with."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class OutOfMemory(FlowrateError):
    """The step did not fit in the device's (or host's) memory."""


class NonFiniteLoss(FlowrateError):
    """The loss became NaN or infinite; the run stops and names the step."""

    def __init__(self, step: int, value: float, preheat: bool = False) -> None:
        self.step = step
        self.value = value
        where = "preheat step" if preheat else "timed step"
        super().__init__(
            f"the loss became {value} at {where} {step} (counting from 0); the run stopped. Lower "
            "--lr, use --precision fp32 or bf16 instead of fp16, or check the problem's loss"
        )
