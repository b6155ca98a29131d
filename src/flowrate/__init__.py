"""flowrate: measure and raise deep-learning throughput, with numbers you can trust.

The public API is what ``__all__`` names; every other module is internal. Names are imported
lazily so that ``flowrate --help`` starts without loading PyTorch.

    import flowrate
    result = flowrate.benchmark("transformer", size="debug", steps=20)
    print(result.summary.samples_per_sec)
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("flowrate")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "Batch",
    "ConfigError",
    "FlowrateError",
    "Mode",
    "Precision",
    "Problem",
    "Result",
    "RunConfig",
    "Session",
    "Store",
    "__version__",
    "benchmark",
    "get_problem",
    "list_problems",
    "run_config",
    "session",
]

_LAZY = {
    "Batch": "flowrate.problems.base",
    "Problem": "flowrate.problems.base",
    "ConfigError": "flowrate.errors",
    "FlowrateError": "flowrate.errors",
    "Mode": "flowrate.config",
    "Precision": "flowrate.config",
    "RunConfig": "flowrate.config",
    "Result": "flowrate.results.schema",
    "Store": "flowrate.results.store",
    "Session": "flowrate.user_loop",
    "session": "flowrate.user_loop",
    "benchmark": "flowrate.runner",
    "run_config": "flowrate.runner",
    "get_problem": "flowrate.problems.registry",
    "list_problems": "flowrate.problems.registry",
}

if TYPE_CHECKING:
    from flowrate.config import Mode, Precision, RunConfig
    from flowrate.errors import ConfigError, FlowrateError
    from flowrate.problems.base import Batch, Problem
    from flowrate.problems.registry import get_problem, list_problems
    from flowrate.results.schema import Result
    from flowrate.results.store import Store
    from flowrate.runner import benchmark, run_config
    from flowrate.user_loop import Session, session


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flowrate' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
