"""flowrate: measure and raise deep-learning throughput, with numbers you can trust.

The public API is what ``__all__`` names; every other module is internal. Names are imported
lazily so that ``flowrate --help`` starts without loading PyTorch.

    import flowrate
    result = flowrate.benchmark("transformer", size="debug", steps=20)
    print(result.summary.samples_per_sec)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flowrate._version import __version__

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
    "Session": "flowrate.harness.session",
    "session": "flowrate.harness.session",
    "benchmark": "flowrate.harness.api",
    "run_config": "flowrate.harness.api",
    "get_problem": "flowrate.problems.registry",
    "list_problems": "flowrate.problems.registry",
}

if TYPE_CHECKING:
    from flowrate.config import Mode, Precision, RunConfig
    from flowrate.errors import ConfigError, FlowrateError
    from flowrate.harness.api import benchmark, run_config
    from flowrate.harness.session import Session, session
    from flowrate.problems.base import Batch, Problem
    from flowrate.problems.registry import get_problem, list_problems
    from flowrate.results.schema import Result
    from flowrate.results.store import Store


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flowrate' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
